"""Failures explain themselves: expected vs got for the matchers, value vs budget for usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evalsi.core import Content, Record, Score, Usage
from evalsi.packs import builtin_registry

REG = builtin_registry(entry_points=False)


def run(name: str, record: Record, **params: Any) -> list[Score]:
    result = REG.resolve(name).bind(params).record_fn()(record)
    if isinstance(result, bool):
        return [Score(passed=result)]
    if isinstance(result, Score):
        return [result]
    assert isinstance(result, list)
    return result


def rec(output: str, reference: Any = None, usage: Usage | None = None) -> Record:
    ref = None if reference is None else Content.from_value(reference)
    return Record(id="r", output=Content.of_text(output), reference=ref, usage=usage)


@pytest.mark.parametrize(
    ("name", "params", "reference", "expected"),
    [
        ("exact-match", {}, "Paris", 'expected "Paris", got "paris."'),
        ("exact-match", {}, ["Lyon", "Nice"], 'expected one of ["Lyon","Nice"], got "paris."'),
        ("fuzzy-match", {}, "Lyon", 'similarity 0.000 < 0.8: expected "Lyon", got "paris."'),
        ("starts-with", {}, "Par", 'expected a start "Par", got "paris."'),
        ("starts-with", {}, ["A", "B"], 'expected a start one of "A", "B", got "paris."'),
        ("regex", {"pattern": "^P"}, None, 'no match for pattern "^P" (search), got "paris."'),
    ],
)
def test_a_failed_match_shows_expected_and_got(
    name: str, params: dict[str, Any], reference: Any, expected: str
) -> None:
    first = run(name, rec("paris.", reference), **params)[0]
    assert first.passed is False
    assert first.explanation == expected


@pytest.mark.parametrize(
    ("name", "params", "reference"),
    [
        ("exact-match", {}, "Paris"),
        ("fuzzy-match", {}, "Paris"),
        ("starts-with", {}, "Par"),
        ("regex", {"pattern": "^P"}, None),
    ],
)
def test_a_pass_has_no_explanation(name: str, params: dict[str, Any], reference: Any) -> None:
    first = run(name, rec("Paris", reference), **params)[0]
    assert first.passed is True
    assert first.explanation == ""


def test_long_and_multiline_sides_are_cut_to_one_short_line() -> None:
    got = "line one\nline two " + "x" * 500
    first = run("exact-match", rec(got, "y" * 500))[0]
    text = first.explanation
    assert "\n" not in text
    assert '"line one\\nline two ' in text  # JSON escapes keep it on one line
    expected_part, got_part = text.removeprefix("expected ").split(", got ")
    assert len(json.loads(expected_part)) == 120  # each side cut to 120 characters
    assert expected_part.endswith('…"')
    assert json.loads(got_part) == got[:119] + "…"


def test_an_empty_output_is_shown_as_empty() -> None:
    assert run("exact-match", rec("", "Paris"))[0].explanation == 'expected "Paris", got ""'


@pytest.mark.parametrize(
    ("name", "param", "budget", "usage", "reason"),
    [
        ("latency", "max_ms", 2000, Usage(latency_ms=2310.4), "latency 2310 ms > budget 2000 ms"),
        ("latency", "max_ms", 1, Usage(latency_ms=1.25), "latency 1.25 ms > budget 1 ms"),
        ("tokens", "max_tokens", 10, Usage(total_tokens=50), "tokens 50 > budget 10"),
        ("cost", "max_usd", 0.01, Usage(cost_usd=0.0234), "cost $0.0234 > budget $0.01"),
    ],
)
def test_over_budget_shows_value_and_budget(
    name: str, param: str, budget: float, usage: Usage, reason: str
) -> None:
    scores = run(name, rec("x", usage=usage), **{param: budget})
    assert scores[1].passed is False
    assert scores[1].explanation == reason


@pytest.mark.parametrize(
    ("name", "param", "usage"),
    [
        ("latency", "max_ms", Usage(latency_ms=2000)),
        ("tokens", "max_tokens", Usage(total_tokens=2000)),
        ("cost", "max_usd", Usage(cost_usd=2000)),
    ],
)
def test_exactly_at_the_budget_passes_unexplained(name: str, param: str, usage: Usage) -> None:
    scores = run(name, rec("x", usage=usage), **{param: 2000})
    assert scores[1].passed is True
    assert scores[1].explanation == ""
