"""record_from_dict and FieldMap: mapping source rows onto records."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from evalsi.core import Content, DatasetError, Message, Provenance, Record, Usage, UserError
from evalsi.datasets import FieldMap, record_from_dict


def rec(row: dict[str, Any], fields: FieldMap | None = None, line: int = 4) -> Any:
    return record_from_dict(row, fields or FieldMap(), line=line, path="qa.jsonl")


def bad(row: dict[str, Any], fields: FieldMap | None = None) -> str:
    with pytest.raises(DatasetError) as info:
        rec(row, fields)
    assert info.value.path == "qa.jsonl"
    assert info.value.line == 4
    message = str(info.value)
    assert message.startswith("qa.jsonl:4: ")
    return message


# -- the basic fields ------------------------------------------------------------------------


def test_the_default_names_fill_the_record() -> None:
    r = rec({"id": "q1", "input": "2+2?", "output": "4", "reference": "4"})
    assert r.id == "q1"
    assert r.input == Content.of_text("2+2?")
    assert r.output == Content.of_text("4")
    assert r.reference == Content.of_text("4")
    assert r.context == []
    assert r.metadata == {}
    assert r.usage is None
    assert r.trajectory is None
    assert r.provenance is not None
    assert (r.provenance.source, r.provenance.dataset, r.provenance.line) == (
        "dataset",
        "qa.jsonl",
        4,
    )


def test_absent_and_null_fields_stay_none() -> None:
    r = rec({"input": "q", "output": None, "usage": None, "context": None})
    assert r.output is None
    assert r.reference is None
    assert r.usage is None
    assert r.context == []


def test_non_text_values_become_json_or_messages() -> None:
    r = rec(
        {
            "input": [{"role": "user", "content": "hi"}],
            "output": {"answer": 4},
            "reference": [4, "four"],
        }
    )
    assert r.input is not None
    assert r.input.messages == [Message(role="user", content="hi")]
    assert r.output == Content.of_json({"answer": 4})
    assert r.reference == Content.of_json([4, "four"])


# -- ids -------------------------------------------------------------------------------------


def test_integer_ids_become_strings() -> None:
    assert rec({"id": 17}).id == "17"


def test_a_missing_id_is_the_row_number() -> None:
    assert rec({"input": "x"}, line=12).id == "12"


@pytest.mark.parametrize(
    ("value", "expected"),
    [({}, "an object"), (True, "True"), (1.5, "1.5"), ("", "non-empty"), ([1], "a list")],
)
def test_unusable_ids_are_errors(value: Any, expected: str) -> None:
    message = bad({"id": value})
    assert "field 'id'" in message
    assert "expected a" in message
    assert expected in message


# -- the reference and its fallback ------------------------------------------------------------


def test_expected_is_the_fallback_reference() -> None:
    r = rec({"input": "q", "expected": "a", "lang": "en"})
    assert r.reference == Content.of_text("a")
    assert r.metadata == {"lang": "en"}


def test_reference_wins_over_expected_and_expected_is_kept_as_metadata() -> None:
    r = rec({"reference": "a", "expected": "b"})
    assert r.reference == Content.of_text("a")
    assert r.metadata == {"expected": "b"}


def test_a_custom_reference_name_turns_the_fallback_off() -> None:
    r = rec({"gold": "g", "expected": "e"}, FieldMap(reference="gold"))
    assert r.reference == Content.of_text("g")
    r = rec({"expected": "e"}, FieldMap(reference="gold"))
    assert r.reference is None
    assert r.metadata == {"expected": "e"}


# -- mapping ---------------------------------------------------------------------------------


def test_renamed_fields() -> None:
    fields = FieldMap(input="question", output="answer", reference="gold", id="qid")
    r = rec({"qid": 3, "question": "q", "answer": "a", "gold": "g", "input": "ignored"}, fields)
    assert (r.id, r.input, r.output, r.reference) == (
        "3",
        Content.of_text("q"),
        Content.of_text("a"),
        Content.of_text("g"),
    )
    assert r.metadata == {"input": "ignored"}


def test_dotted_paths_read_nested_objects() -> None:
    fields = FieldMap(output="response.text", usage="response.usage")
    row = {
        "input": "q",
        "response": {"text": "a", "usage": {"latency_ms": 12}, "model": "m"},
        "lang": "en",
    }
    r = rec(row, fields)
    assert r.output == Content.of_text("a")
    assert r.usage == Usage(latency_ms=12.0)
    # the top-level key a mapping reads from is not copied into metadata
    assert r.metadata == {"lang": "en"}


def test_a_key_that_contains_the_dots_wins_over_the_nested_lookup() -> None:
    r = rec(
        {"response.text": "flat", "response": {"text": "nested"}}, FieldMap(output="response.text")
    )
    assert r.output == Content.of_text("flat")


def test_a_missing_or_null_parent_means_absent() -> None:
    fields = FieldMap(output="response.text")
    assert rec({"input": "q"}, fields).output is None
    assert rec({"response": None}, fields).output is None
    assert rec({"response": {}}, fields).output is None


def test_a_parent_that_is_not_an_object_is_an_error() -> None:
    message = bad({"response": "oops"}, FieldMap(output="response.text"))
    assert "'response.text'" in message
    assert "'response' to be an object" in message


def test_a_field_mapped_to_none_is_never_read() -> None:
    r = rec({"id": "x", "context": "c"}, FieldMap(id=None, context=None), line=2)
    assert r.id == "2"
    assert r.context == []
    assert r.metadata == {"id": "x", "context": "c"}


@pytest.mark.parametrize("name", ["", "a..b", ".a", "a."])
def test_unusable_field_names_are_rejected(name: str) -> None:
    with pytest.raises(UserError, match="field map"):
        FieldMap(output=name)


def test_field_maps_compare_by_value() -> None:
    assert FieldMap(output="x") == FieldMap(output="x")
    assert FieldMap(output="x") != FieldMap()
    assert "_plan" not in repr(FieldMap())


# -- metadata --------------------------------------------------------------------------------


def test_unmapped_keys_go_to_metadata_and_an_explicit_metadata_object_wins() -> None:
    r = rec({"input": "q", "lang": "en", "split": "dev", "metadata": {"lang": "fr", "n": 1}})
    assert r.metadata == {"lang": "fr", "split": "dev", "n": 1}


def test_explicit_metadata_alone() -> None:
    assert rec({"metadata": {"a": 1}}).metadata == {"a": 1}


def test_metadata_must_be_an_object() -> None:
    message = bad({"metadata": [1, 2]})
    assert "field 'metadata'" in message
    assert "expected an object" in message
    assert "field 'metadata'" in bad({"metadata": "x", "extra": 1})


# -- context ---------------------------------------------------------------------------------


def test_context_is_a_list_of_values_and_a_string_is_one_item() -> None:
    assert rec({"context": "one passage"}).context == [Content.of_text("one passage")]
    assert rec({"context": ["a", {"text": "b", "source": "s"}]}).context == [
        Content.of_text("a"),
        Content.of_json({"text": "b", "source": "s"}),
    ]
    assert rec({"context": []}).context == []


def test_unusable_context() -> None:
    assert "list of passages" in bad({"context": 3})
    assert "'context[1]'" in bad({"context": ["a", None]})


# -- usage -----------------------------------------------------------------------------------


def test_usage_fields() -> None:
    r = rec(
        {
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5.0,
                "total_tokens": 15,
                "cost_usd": 0.002,
                "latency_ms": 250,
            }
        }
    )
    assert r.usage == Usage(
        input_tokens=10, output_tokens=5, total_tokens=15, cost_usd=0.002, latency_ms=250.0
    )
    assert isinstance(r.usage.output_tokens, int)
    assert isinstance(r.usage.latency_ms, float)


def test_usage_accepts_openai_token_names_and_nulls() -> None:
    r = rec({"usage": {"prompt_tokens": 3, "completion_tokens": 4, "cost_usd": None}})
    assert r.usage == Usage(input_tokens=3, output_tokens=4)


@pytest.mark.parametrize(
    ("usage", "field", "expected"),
    [
        ({"latency_ms": "fast"}, "usage.latency_ms", "expected a non-negative number, got 'fast'"),
        ({"latency_ms": True}, "usage.latency_ms", "expected a non-negative number"),
        ({"cost_usd": -1}, "usage.cost_usd", "expected a non-negative number"),
        ({"input_tokens": 1.5}, "usage.input_tokens", "expected a non-negative integer"),
        ({"input_tokens": -2}, "usage.input_tokens", "expected a non-negative integer"),
        ({"output_tokens": "5"}, "usage.output_tokens", "expected a non-negative integer"),
        ({"latency": 3}, "usage.latency", "unknown usage key"),
        ([1, 2], "usage", "expected an object"),
    ],
)
def test_unusable_usage(usage: Any, field: str, expected: str) -> None:
    message = bad({"input": "q", "usage": usage})
    assert f"field '{field}'" in message
    assert expected in message


def test_usage_nan_and_infinity_are_rejected() -> None:
    assert "non-negative number" in bad({"usage": {"latency_ms": float("nan")}})
    assert "non-negative number" in bad({"usage": {"cost_usd": float("inf")}})


def test_errors_name_the_mapped_source_key() -> None:
    message = bad({"stats": {"latency_ms": "slow"}}, FieldMap(usage="stats"))
    assert "field 'stats.latency_ms'" in message


# -- trajectory ------------------------------------------------------------------------------


def test_trajectory_steps() -> None:
    r = rec(
        {
            "trajectory": [
                {
                    "kind": "llm_call",
                    "name": "plan",
                    "output": "search",
                    "usage": {"input_tokens": 9},
                },
                {"tool_call": {"name": "search", "arguments": '{"q": "x"}'}, "output": ["hit"]},
                {
                    "kind": "tool_call",
                    "tool_call": {"function": {"name": "f", "arguments": "{bad"}},
                },
                {"kind": "message", "error": "timeout", "start_time_unix_nano": 5},
            ]
        }
    )
    assert r.trajectory is not None
    steps = r.trajectory.steps
    assert [s.kind for s in steps] == ["llm_call", "tool_call", "tool_call", "message"]
    assert steps[0].usage == Usage(input_tokens=9)
    assert steps[1].tool_call is not None
    assert (steps[1].tool_call.name, steps[1].tool_call.arguments) == ("search", {"q": "x"})
    assert steps[2].tool_call is not None
    assert steps[2].tool_call.arguments == "{bad"  # kept: malformed arguments are evidence
    assert (steps[3].error, steps[3].start_time_unix_nano) == ("timeout", 5)


def test_trajectory_as_an_object_with_steps() -> None:
    r = rec({"trajectory": {"steps": [{"kind": "retrieval", "name": "bm25"}]}})
    assert r.trajectory is not None
    assert r.trajectory.steps[0].name == "bm25"


@pytest.mark.parametrize(
    ("trajectory", "field", "expected"),
    [
        ("steps", "trajectory", "expected a list of steps"),
        ([1], "trajectory[0]", "expected a step object"),
        ([{"kind": "dance"}], "trajectory[0].kind", "expected one of"),
        ([{}, {"nmae": "x"}], "trajectory[1]", "unknown step key(s) nmae"),
        ([{"tool_call": {"arguments": {}}}], "trajectory[0].tool_call.name", "non-empty string"),
        ([{"tool_call": "search"}], "trajectory[0].tool_call", "expected an object"),
        ([{"name": 3}], "trajectory[0].name", "expected a string"),
        ([{"usage": {"latency_ms": "x"}}], "trajectory[0].usage.latency_ms", "number"),
        ([{"end_time_unix_nano": -1}], "trajectory[0].end_time_unix_nano", "integer"),
    ],
)
def test_unusable_trajectory(trajectory: Any, field: str, expected: str) -> None:
    message = bad({"trajectory": trajectory})
    assert f"field '{field}'" in message
    assert expected in message


# -- the row itself --------------------------------------------------------------------------


def test_a_row_that_is_not_an_object() -> None:
    with pytest.raises(DatasetError, match=r"qa\.jsonl:4: expected an object, got a list"):
        record_from_dict([1, 2], FieldMap(), line=4, path="qa.jsonl")  # type: ignore[arg-type]


def test_unusable_tagged_content_is_an_error() -> None:
    message = bad({"output": {"tensor": {"values": ["x"]}}})
    assert "field 'output'" in message


def test_the_row_is_not_copied_needlessly() -> None:
    meta = {"a": 1}
    r = rec({"metadata": meta})
    assert r.metadata is meta


def test_the_record_field_order_the_hot_path_relies_on() -> None:
    # build_record constructs Record and Provenance positionally, for speed.
    assert [f.name for f in dataclasses.fields(Record)] == [
        "id",
        "input",
        "output",
        "reference",
        "context",
        "trajectory",
        "usage",
        "metadata",
        "provenance",
    ]
    assert [f.name for f in dataclasses.fields(Provenance)][:4] == [
        "source",
        "dataset",
        "dataset_version",
        "line",
    ]
