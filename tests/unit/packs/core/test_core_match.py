"""exact-match, fuzzy-match, contains, starts-with and one-of."""

from __future__ import annotations

from typing import Any

import pytest
from rapidfuzz import fuzz

from evalsi.core import Content, EvaluationResult, Message, Outcome, ParamError, Record
from evalsi.evaluators import RecordRunner, make_runner
from evalsi.packs import builtin_registry

REG = builtin_registry(entry_points=False)
_ABSENT: Any = object()


def rec(output: Any = _ABSENT, reference: Any = _ABSENT) -> Record:
    return Record(
        id="r1",
        output=None if output is _ABSENT else Content.from_value(output),
        reference=None if reference is _ABSENT else Content.from_value(reference),
    )


def run(name: str, record: Record, **params: Any) -> EvaluationResult:
    runner = make_runner(REG.resolve(name).bind(params))
    assert isinstance(runner, RecordRunner)
    results = runner.run([record])
    assert len(results) == 1
    return results[0]


def scores(name: str, record: Record, **params: Any) -> dict[str, Any]:
    result = run(name, record, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    return {s.name: s.value for s in result.scores}


def passed(name: str, output: Any, reference: Any = _ABSENT, **params: Any) -> bool:
    value = scores(name, rec(output, reference), **params)[name]
    assert isinstance(value, bool)
    return value


# -- exact-match --------------------------------------------------------------------------------


def test_exact_match_trims_and_is_case_sensitive_by_default() -> None:
    assert passed("exact-match", "  Paris\n", "Paris")
    assert not passed("exact-match", "paris", "Paris")
    assert not passed("exact-match", "Paris, France", "Paris")


def test_exact_match_trim_off_keeps_surrounding_whitespace() -> None:
    assert not passed("exact-match", " Paris", "Paris", trim=False)
    assert passed("exact-match", "Paris", "Paris", trim=False)


def test_exact_match_ignore_case_folds_unicode() -> None:
    assert passed("exact-match", "PARIS", "paris", ignore_case=True)
    assert passed("exact-match", "STRASSE", "Straße", ignore_case=True)
    assert passed("exact-match", "ΣΊΣΥΦΟΣ", "σίσυφος", ignore_case=True)


def test_exact_match_ignore_punctuation_covers_unicode_punctuation() -> None:
    assert not passed("exact-match", "Paris.", "Paris")
    assert passed("exact-match", "Paris.", "Paris", ignore_punctuation=True)
    assert passed("exact-match", "¿Qué?", "Qué", ignore_punctuation=True)
    assert passed("exact-match", "«Bonjour»", "Bonjour", ignore_punctuation=True)
    assert passed("exact-match", "「東京」。", "東京", ignore_punctuation=True)
    # Symbols are not punctuation.
    assert not passed("exact-match", "$5", "5", ignore_punctuation=True)


def test_exact_match_normalize_whitespace() -> None:
    assert not passed("exact-match", "New   York", "New York")
    assert passed("exact-match", "New \t\n York", "New York", normalize_whitespace=True)
    assert passed("exact-match", " New  York ", " New York ", normalize_whitespace=True, trim=False)
    assert not passed(
        "exact-match", " New  York", "New York", normalize_whitespace=True, trim=False
    )


def test_exact_match_params_combine() -> None:
    assert passed(
        "exact-match",
        "  the  EIFFEL tower!! ",
        "The Eiffel Tower",
        ignore_case=True,
        ignore_punctuation=True,
        normalize_whitespace=True,
    )


def test_exact_match_accepts_cli_strings_for_params() -> None:
    assert passed("exact-match", "PARIS", "paris", ignore_case="true")
    assert not passed("exact-match", "PARIS", "paris", ignore_case="false")


def test_exact_match_list_reference_means_any_of() -> None:
    assert passed("exact-match", "Paris", ["Lyon", "Paris"])
    assert passed("exact-match", "paris", ["Lyon", "PARIS"], ignore_case=True)
    assert not passed("exact-match", "Nice", ["Lyon", "Paris"])
    # A nested list is one alternative, compared as data.
    assert passed("exact-match", '["Paris"]', [["Paris"]])
    assert not passed("exact-match", '["Lyon"]', [["Paris"]])


def test_exact_match_non_string_alternatives_compare_as_data() -> None:
    assert passed("exact-match", "4", [4, "four"])
    assert passed("exact-match", "four", [4, "four"])
    assert passed("exact-match", "4.0", [4])
    assert not passed("exact-match", "true", [1])


def test_exact_match_empty_list_reference_is_skipped() -> None:
    result = run("exact-match", rec("Paris", []))
    assert result.outcome is Outcome.SKIPPED
    assert "empty list" in result.reason


def test_exact_match_json_object_reference_compares_as_data() -> None:
    ref = {"city": "Paris", "population": 2100000}
    assert passed("exact-match", {"population": 2100000, "city": "Paris"}, ref)
    assert passed("exact-match", '{"population": 2100000.0, "city": "Paris"}', ref)
    assert not passed("exact-match", {"city": "Paris"}, ref)
    assert not passed("exact-match", "Paris", ref)
    assert passed("exact-match", {"city": " PARIS ", "population": 2100000}, ref, ignore_case=True)
    assert not passed(
        "exact-match", {"CITY": "Paris", "population": 2100000}, ref, ignore_case=True
    )


def test_exact_match_json_scalars_are_typed() -> None:
    assert passed("exact-match", "true", {"json": True})
    assert not passed("exact-match", "1", {"json": True})
    assert not passed("exact-match", {"json": 1}, {"json": True})
    assert passed("exact-match", "null", {"json": None})
    assert passed("exact-match", {"a": [1, [2]]}, {"a": [1.0, [2]]})
    assert not passed("exact-match", {"a": [[2], 1]}, {"a": [1, [2]]})


def test_exact_match_output_list_equal_to_whole_list_reference() -> None:
    assert passed("exact-match", {"json": [2, 3, 5]}, [2, 3, 5])
    assert passed("exact-match", "[2, 3, 5]", [2, 3, 5])
    assert not passed("exact-match", "[2, 3]", [2, 3, 5])


def test_exact_match_json_string_reference_is_text() -> None:
    assert passed("exact-match", " Paris", {"json": "Paris"})


def test_exact_match_reads_the_last_assistant_message() -> None:
    record = Record(
        id="m",
        output=Content.of_messages([Message("user", "capital?"), Message("assistant", " Paris ")]),
        reference=Content.of_text("Paris"),
    )
    assert scores("exact-match", record) == {"exact-match": True}


def test_exact_match_requires_output_and_reference() -> None:
    result = run("exact-match", rec("Paris"))
    assert result.outcome is Outcome.SKIPPED
    assert result.reason == "record has no reference"
    result = run("exact-match", rec(reference="Paris"))
    assert result.outcome is Outcome.SKIPPED
    assert result.reason == "record has no output"


def test_alias_names_the_instance_not_the_metric() -> None:
    bound = REG.resolve("exact-match").bind({}, alias="em")
    runner = make_runner(bound)
    assert isinstance(runner, RecordRunner)
    results = runner.run([rec("a", "a")])
    assert results[0].evaluator == "em"
    assert [s.name for s in results[0].scores] == ["exact-match"]


# -- fuzzy-match --------------------------------------------------------------------------------


def test_fuzzy_match_identical_is_one() -> None:
    assert scores("fuzzy-match", rec("kitten", " kitten ")) == {
        "fuzzy-match": True,
        "similarity": 1.0,
    }


def test_fuzzy_match_similarity_is_rapidfuzz_ratio() -> None:
    got = scores("fuzzy-match", rec("kitten", "sitting"))
    assert got["similarity"] == pytest.approx(fuzz.ratio("kitten", "sitting") / 100)
    assert got["fuzzy-match"] is False


def test_fuzzy_match_threshold() -> None:
    record = rec("kitten", "sitting")
    sim = fuzz.ratio("kitten", "sitting") / 100
    assert scores("fuzzy-match", record, threshold=sim)["fuzzy-match"] is True
    assert scores("fuzzy-match", record, threshold=sim + 0.01)["fuzzy-match"] is False
    assert scores("fuzzy-match", record, threshold="0")["fuzzy-match"] is True


def test_fuzzy_match_threshold_boundary_is_inclusive() -> None:
    # 4 of 5 characters kept on each side: similarity exactly 0.8.
    assert scores("fuzzy-match", rec("abcde", "abcdx"))["fuzzy-match"] is True


def test_fuzzy_match_ignore_case() -> None:
    assert scores("fuzzy-match", rec("HELLO", "hello"))["similarity"] == 0.0
    assert scores("fuzzy-match", rec("HELLO", "hello"), ignore_case=True)["similarity"] == 1.0


def test_fuzzy_match_list_reference_takes_the_best() -> None:
    got = scores("fuzzy-match", rec("colour", ["zzz", "color", "colour!"]))
    assert got["similarity"] == pytest.approx(fuzz.ratio("colour", "colour!") / 100)
    result = run("fuzzy-match", rec("x", []))
    assert result.outcome is Outcome.SKIPPED


def test_fuzzy_match_unicode() -> None:
    got = scores("fuzzy-match", rec("naïve café", "naive cafe"))
    assert 0.0 < got["similarity"] < 1.0


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_fuzzy_match_threshold_out_of_range(threshold: float) -> None:
    with pytest.raises(ParamError, match=r"fuzzy-match: param 'threshold' must be in \[0, 1\]"):
        REG.resolve("fuzzy-match").bind({"threshold": threshold})


# -- contains -----------------------------------------------------------------------------------


def test_contains_values_any_and_all() -> None:
    out = "The capital of France is Paris."
    assert passed("contains", out, values=["Paris", "Lyon"])
    assert not passed("contains", out, values=["Paris", "Lyon"], mode="all")
    assert passed("contains", out, values=["Paris", "France"], mode="all")
    assert not passed("contains", out, values=["Lyon"])


def test_contains_values_from_a_cli_string() -> None:
    assert passed("contains", "a b c", values="a,c", mode="all")


def test_contains_ignore_case() -> None:
    assert not passed("contains", "PARIS", values=["paris"])
    assert passed("contains", "PARIS", values=["paris"], ignore_case=True)
    assert passed("contains", "Die STRASSE", values=["straße"], ignore_case=True)


def test_contains_uses_the_reference_without_values() -> None:
    assert passed("contains", "It is Paris.", "Paris")
    assert passed("contains", "It is Paris.", ["Lyon", "Paris"])
    assert not passed("contains", "It is Paris.", ["Lyon", "Paris"], mode="all")
    # The param wins over the reference.
    assert not passed("contains", "It is Paris.", "Paris", values=["Lyon"])


def test_contains_explains_what_is_missing() -> None:
    result = run("contains", rec("Paris"), values=["Paris", "Lyon", "Nice"], mode="all")
    (score,) = result.scores
    assert score.passed is False
    assert score.explanation == "missing 'Lyon', 'Nice'"
    (score,) = run("contains", rec("Paris"), values=["Lyon"]).scores
    assert score.explanation == "'Lyon' not found"
    (score,) = run("contains", rec("Paris"), values=["Lyon", "Nice"]).scores
    assert score.explanation == "none of the 2 values found"


def test_contains_skips_without_values_or_reference() -> None:
    result = run("contains", rec("Paris"))
    assert result.outcome is Outcome.SKIPPED
    assert result.reason == "no values to look for: set values= or give a reference"
    result = run("contains", rec("Paris", ""))
    assert result.outcome is Outcome.SKIPPED
    assert "reference is empty" in result.reason
    assert run("contains", rec("Paris", [])).outcome is Outcome.SKIPPED


def test_contains_requires_output() -> None:
    result = run("contains", rec(reference="x"), values=["x"])
    assert result.outcome is Outcome.SKIPPED
    assert result.reason == "record has no output"


@pytest.mark.parametrize("values", [[], ["a", ""]])
def test_contains_rejects_empty_values(values: list[str]) -> None:
    with pytest.raises(ParamError, match="contains: param 'values'"):
        REG.resolve("contains").bind({"values": values})


# -- starts-with --------------------------------------------------------------------------------


def test_starts_with_prefix_param() -> None:
    assert passed("starts-with", "  Answer: 42", prefix="Answer:")
    assert not passed("starts-with", "The answer: 42", prefix="Answer:")
    assert not passed("starts-with", "  Answer: 42", prefix="Answer:", trim=False)


def test_starts_with_keeps_the_prefix_trailing_space() -> None:
    assert not passed("starts-with", "Answer:42", prefix="Answer: ")


def test_starts_with_ignore_case() -> None:
    assert not passed("starts-with", "yes, indeed", prefix="Yes")
    assert passed("starts-with", "yes, indeed", prefix="Yes", ignore_case=True)


def test_starts_with_reference_and_list() -> None:
    assert passed("starts-with", "Yes, indeed", "Yes")
    assert passed("starts-with", "Sure thing", ["Yes", "Sure"])
    assert not passed("starts-with", "No", ["Yes", "Sure"])


def test_starts_with_skips_without_prefix() -> None:
    result = run("starts-with", rec("Yes"))
    assert result.outcome is Outcome.SKIPPED
    assert "no prefix" in result.reason
    assert run("starts-with", rec("Yes", "  ")).outcome is Outcome.SKIPPED


def test_starts_with_rejects_an_empty_prefix() -> None:
    with pytest.raises(ParamError, match="starts-with: param 'prefix' must not be empty"):
        REG.resolve("starts-with").bind({"prefix": " "})


# -- one-of -------------------------------------------------------------------------------------


def test_one_of_emits_passed_and_the_choice() -> None:
    choices = ["positive", "negative", "neutral"]
    assert scores("one-of", rec(" negative\n"), choices=choices) == {
        "one-of": True,
        "choice": "negative",
    }
    got = scores("one-of", rec("Positive"), choices=choices)
    assert got == {"one-of": False, "choice": "(none)"}


def test_one_of_explains_a_miss() -> None:
    result = run("one-of", rec("maybe"), choices=["yes", "no"])
    failed = next(s for s in result.scores if s.name == "one-of")
    assert failed.explanation == "'maybe' is not one of the choices"


def test_one_of_normalisation_params() -> None:
    choices = ["Positive", "Negative"]
    assert scores("one-of", rec("POSITIVE"), choices=choices, ignore_case=True) == {
        "one-of": True,
        "choice": "Positive",
    }
    assert scores("one-of", rec("Positive."), choices=choices)["one-of"] is False
    assert scores("one-of", rec("Positive."), choices=choices, ignore_punctuation=True)["one-of"]
    assert scores("one-of", rec(" Positive"), choices=choices, trim=False)["one-of"] is False


def test_one_of_choices_from_a_cli_string() -> None:
    assert scores("one-of", rec("b"), choices="a,b,c")["choice"] == "b"


def test_one_of_requires_choices() -> None:
    with pytest.raises(ParamError, match="one-of: missing required param"):
        REG.resolve("one-of").bind({})
    with pytest.raises(ParamError, match="one-of: param 'choices'"):
        REG.resolve("one-of").bind({"choices": []})
