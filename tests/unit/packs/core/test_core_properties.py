"""Properties of the matching metrics, checked by hypothesis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalsi.core import Content, Record, Score
from evalsi.packs import builtin_registry

REG = builtin_registry(entry_points=False)


def fn(name: str, **params: Any) -> Callable[[Record], Any]:
    return REG.resolve(name).bind(params).record_fn()


def passes(f: Callable[[Record], Any]) -> Callable[[Record], bool]:
    """Whether ``f`` passed the record (a failure is a Score that explains itself)."""

    def check(record: Record) -> bool:
        result = f(record)
        return result is True or (isinstance(result, Score) and result.passed is True)

    return check


EXACT = passes(fn("exact-match"))
EXACT_NOCASE = passes(fn("exact-match", ignore_case=True))
EXACT_ALL = passes(
    fn("exact-match", ignore_case=True, ignore_punctuation=True, normalize_whitespace=True)
)
FUZZY = fn("fuzzy-match")
FUZZY_RAW = fn("fuzzy-match", trim=False)

texts = st.text(max_size=40)
needles = st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=4)


def rec(output: str, reference: Any) -> Record:
    return Record(id="p", output=Content.of_text(output), reference=Content.from_value(reference))


def similarity(result: Any) -> float:
    value = next(s.number for s in result if s.name == "similarity")
    assert isinstance(value, float)
    return value


@given(texts)
def test_exact_match_is_reflexive(text: str) -> None:
    assert EXACT(rec(text, text)) is True
    assert EXACT_NOCASE(rec(text, text)) is True
    assert EXACT_ALL(rec(text, text)) is True


@given(texts, texts)
def test_exact_match_is_symmetric(a: str, b: str) -> None:
    assert EXACT_ALL(rec(a, b)) == EXACT_ALL(rec(b, a))


@given(texts, texts)
def test_ignore_case_is_invariant_under_case_changes(a: str, b: str) -> None:
    expected = EXACT_NOCASE(rec(a, b))
    for changed in (a.upper(), a.lower(), a.swapcase(), a.title()):
        assert EXACT_NOCASE(rec(changed, b)) == expected, changed


@given(texts, st.lists(texts, min_size=1, max_size=4))
def test_list_reference_is_any_of_its_elements(output: str, options: list[str]) -> None:
    assert EXACT(rec(output, options)) == any(EXACT(rec(output, o)) for o in options)


@given(texts, texts)
def test_fuzzy_similarity_is_in_unit_interval(a: str, b: str) -> None:
    assert 0.0 <= similarity(FUZZY(rec(a, b))) <= 1.0


@given(texts)
def test_fuzzy_similarity_of_identical_texts_is_one(text: str) -> None:
    assert similarity(FUZZY_RAW(rec(text, text))) == 1.0


@given(texts, texts)
def test_exact_match_implies_fuzzy_pass(a: str, b: str) -> None:
    if EXACT(rec(a, b)):
        result = FUZZY(rec(a, b))
        assert similarity(result) == 1.0
        assert result[0].name == ""  # the main metric: the runner names it after the instance
        assert result[0].passed is True


@given(texts, needles, st.booleans())
def test_contains_all_implies_any(text: str, values: list[str], ignore_case: bool) -> None:
    any_fn = fn("contains", values=values, mode="any", ignore_case=ignore_case)
    all_fn = fn("contains", values=values, mode="all", ignore_case=ignore_case)
    record = rec(text, "unused")
    if all_fn(record) is True:
        assert any_fn(record) is True


@given(texts, texts)
def test_contains_finds_any_substring(prefix: str, rest: str) -> None:
    text = prefix + rest
    if prefix:
        assert fn("contains", values=[prefix])(rec(text, "x")) is True
        assert fn("starts-with", prefix=prefix, trim=False)(rec(text, "x")) is True
