"""``tool-call-accuracy``: hand-computed scores for each pairing mode and edge case."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.core import Outcome, ParamError
from evalsi.packs.agent._accuracy import tool_call_accuracy
from tests.unit.packs.agent_support import agent_record, llm, outcome, run, tool

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
S = {"name": "search", "arguments": {"q": "hotels"}}
B = {"name": "book", "arguments": {"id": 7}}


def scores(*steps: Any, reference: Any, **params: Any) -> dict[str, float | None]:
    got = run(tool_call_accuracy, agent_record(*steps, reference=reference), **params)
    return {name: s.number for name, s in got.items()}


def test_exact_match() -> None:
    got = scores(llm(), tool("search", {"q": "hotels"}), tool("book", {"id": 7}), reference=[S, B])
    assert got == {"tool-call-accuracy": 1.0, "tool-name-accuracy": 1.0, "tool-args-accuracy": 1.0}


def test_wrong_arguments_count_for_the_name_only() -> None:
    got = scores(tool("search", {"q": "hotels"}), tool("book", {"id": 8}), reference=[S, B])
    # 2 pairs by name; 1 with the right arguments; max(A, R) = 2
    assert got == {"tool-call-accuracy": 0.5, "tool-name-accuracy": 1.0, "tool-args-accuracy": 0.5}


def test_extra_and_missing_calls_count_against_the_agent() -> None:
    # agent: search, get_weather, search (A=3); reference: search, book (R=2) → 1 pair
    got = scores(
        tool("search", {"q": "hotels"}),
        tool("get_weather", {"city": "Paris"}),
        tool("search", {"q": "hotels"}),
        reference={"tool_calls": [S, B]},
    )
    assert got == {
        "tool-call-accuracy": pytest.approx(1 / 3),
        "tool-name-accuracy": pytest.approx(1 / 3),
        "tool-args-accuracy": 1.0,
    }


def test_order_matters_unless_unordered() -> None:
    steps = (tool("book", {"id": 7}), tool("search", {"q": "hotels"}))
    ordered = scores(*steps, reference=[S, B])
    assert ordered["tool-call-accuracy"] == 0.5  # one of the two in the reference's order
    unordered = scores(*steps, reference=[S, B], ordered=False)
    assert unordered["tool-call-accuracy"] == 1.0


def test_explanations() -> None:
    got = run(
        tool_call_accuracy,
        agent_record(
            tool("book", {"id": 7}),
            tool("search", {"q": "flats"}),
            tool("ping"),
            reference=[S, B, "get_weather"],
        ),
    )["tool-call-accuracy"]
    # One pair at most keeps the reference's order: search or book. Both pair by name; only
    # book has the right arguments, so book is the pair and search is out of order.
    assert got.number == pytest.approx(1 / 3)
    assert got.explanation == (
        "1 of 3 calls right (agent 3, reference 3); missing get_weather; unexpected ping({}) at "
        "step 3; out of order: search at step 2"
    )
    assert got.metadata == {
        "agent_calls": 3,
        "reference_calls": 3,
        "pairs": [[1, 1]],
        "args_correct": 1,
    }
    wrong = run(tool_call_accuracy, agent_record(tool("search", {"q": "flats"}), reference=[S]))[
        "tool-call-accuracy"
    ]
    assert wrong.explanation == (
        "0 of 1 calls right (agent 1, reference 1); wrong arguments: search at step 1 "
        '(expected search({"q":"hotels"}), got search({"q":"flats"}))'
    )


def test_subset_arguments() -> None:
    steps = (tool("search", {"q": "hotels", "limit": 5}),)
    assert scores(*steps, reference=[S])["tool-call-accuracy"] == 0.0
    assert scores(*steps, reference=[S], args="subset")["tool-call-accuracy"] == 1.0


def test_a_reference_call_without_arguments_accepts_any() -> None:
    got = scores(tool("search", {"q": "anything"}), reference=["search"])
    assert got["tool-call-accuracy"] == 1.0


def test_arguments_as_json_strings_equal_arguments_as_objects() -> None:
    got = scores(
        tool("get_weather", '{"city": "Z\\u00fcrich"}'),
        reference={"tool_calls": [{"name": "get_weather", "arguments": '{"city":"Zürich"}'}]},
    )
    assert got["tool-call-accuracy"] == 1.0
    got = scores(tool("get_weather", {"city": "Zurich"}), reference=[{"name": "get_weather",
                 "arguments": {"city": "Zürich"}}])  # fmt: skip
    assert got["tool-call-accuracy"] == 0.0


def test_no_calls_expected_and_none_made_is_perfect() -> None:
    got = run(tool_call_accuracy, agent_record(llm(), reference={"tool_calls": []}))
    assert {k: s.number for k, s in got.items()} == {
        "tool-call-accuracy": 1.0,
        "tool-name-accuracy": 1.0,
    }  # no pair: no argument accuracy
    assert got["tool-call-accuracy"].explanation == "no call expected and none made"


def test_no_tool_calls_when_some_were_expected_scores_zero() -> None:
    got = scores(llm(), reference=[S])
    assert got == {"tool-call-accuracy": 0.0, "tool-name-accuracy": 0.0}


def test_calls_made_when_none_were_expected_score_zero() -> None:
    got = scores(tool("search", {"q": "hotels"}), reference={"tool_calls": []})
    assert got == {"tool-call-accuracy": 0.0, "tool-name-accuracy": 0.0}


def test_the_expected_param() -> None:
    got = scores(tool("search", {"q": "hotels"}), reference=None, expected=[S])
    assert got["tool-call-accuracy"] == 1.0


def test_records_without_what_it_needs_are_skipped() -> None:
    assert outcome(tool_call_accuracy, agent_record(reference=[S])) == (
        Outcome.SKIPPED,
        "record has no trajectory",  # an empty trajectory is none
    )
    state, reason = outcome(tool_call_accuracy, agent_record(tool("search"), reference="text"))
    assert state is Outcome.SKIPPED
    assert reason.startswith("record has no reference tool calls")


def test_a_malformed_reference_is_an_error_naming_the_field() -> None:
    state, reason = outcome(
        tool_call_accuracy, agent_record(tool("search"), reference={"tool_calls": [{"nam": 1}]})
    )
    assert state is Outcome.ERROR
    assert reason.startswith("ValueError: reference.tool_calls[0]: unknown key(s) nam")


def test_bad_params() -> None:
    with pytest.raises(ParamError, match="param 'expected'"):
        tool_call_accuracy.bind({"expected": [{"name": ""}]})
    with pytest.raises(ParamError):
        tool_call_accuracy.bind({"args": "fuzzy"})
