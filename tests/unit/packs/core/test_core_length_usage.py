"""length, and the usage evaluators: latency, tokens, cost."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.core import Content, EvaluationResult, Outcome, ParamError, Record, Usage
from evalsi.evaluators import RecordRunner, make_runner
from evalsi.packs import builtin_registry

REG = builtin_registry(entry_points=False)


def run(name: str, record: Record, **params: Any) -> EvaluationResult:
    runner = make_runner(REG.resolve(name).bind(params))
    assert isinstance(runner, RecordRunner)
    (result,) = runner.run([record])
    return result


def scores(name: str, record: Record, **params: Any) -> dict[str, Any]:
    result = run(name, record, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    return {s.name: s.value for s in result.scores}


def text(value: str) -> Record:
    return Record(id="r", output=Content.of_text(value))


def used(**fields: Any) -> Record:
    return Record(id="r", output=Content.of_text("x"), usage=Usage(**fields))


# -- length -------------------------------------------------------------------------------------


def test_length_counts_code_points_by_default() -> None:
    assert scores("length", text("hello")) == {"length": 5.0}
    assert scores("length", text("naïve 🙂")) == {"length": 7.0}
    assert scores("length", text("")) == {"length": 0.0}


def test_length_counts_words() -> None:
    assert scores("length", text("  one two\tthree\nfour "), unit="words") == {"length": 4.0}
    assert scores("length", text("   "), unit="words") == {"length": 0.0}


@pytest.mark.parametrize(
    ("bounds", "inside"),
    [
        ({"min": 3}, True),
        ({"min": 4}, False),
        ({"max": 3}, True),
        ({"max": 2}, False),
        ({"min": 3, "max": 3}, True),
        ({"min": 0, "max": 10}, True),
    ],
)
def test_length_bounds_are_inclusive(bounds: dict[str, int], inside: bool) -> None:
    got = scores("length", text("a b c"), unit="words", **bounds)
    assert got == {"length": 3.0, "length-in-bounds": inside}


def test_length_bounds_from_cli_strings() -> None:
    assert scores("length", text("abc"), max="2")["length-in-bounds"] is False


def test_length_bad_bounds() -> None:
    ev = REG.resolve("length")
    with pytest.raises(ParamError, match=r"length: param 'min' \(5\) is greater than param 'max'"):
        ev.bind({"min": 5, "max": 4})
    with pytest.raises(ParamError, match="length: param 'max' must be >= 0"):
        ev.bind({"max": -1})
    with pytest.raises(ParamError, match="length: param 'min' must be an integer"):
        ev.bind({"min": 1.5})
    with pytest.raises(ParamError, match="length: param 'unit' must be one of 'chars', 'words'"):
        ev.bind({"unit": "tokens"})


# -- latency, tokens, cost ----------------------------------------------------------------------


def test_latency() -> None:
    assert scores("latency", used(latency_ms=812.5)) == {"latency": 812.5}
    assert scores("latency", used(latency_ms=812.5), max_ms=1000) == {
        "latency": 812.5,
        "latency-within-budget": True,
    }
    assert scores("latency", used(latency_ms=812.5), max_ms=800)["latency-within-budget"] is False


def test_tokens_total_or_sum() -> None:
    assert scores("tokens", used(total_tokens=120)) == {"tokens": 120.0}
    assert scores("tokens", used(input_tokens=100, output_tokens=20)) == {"tokens": 120.0}
    assert scores("tokens", used(output_tokens=20), max_tokens=10) == {
        "tokens": 20.0,
        "tokens-within-budget": False,
    }


def test_cost() -> None:
    assert scores("cost", used(cost_usd=0.0021)) == {"cost": 0.0021}
    assert scores("cost", used(cost_usd=0.0021), max_usd="0.01")["cost-within-budget"] is True
    assert scores("cost", used(cost_usd=0.0)) == {"cost": 0.0}


@pytest.mark.parametrize(
    ("name", "field", "record"),
    [
        ("latency", "usage.latency_ms", Record(id="r", output=Content.of_text("x"))),
        ("latency", "usage.latency_ms", used(cost_usd=0.1)),
        ("tokens", "usage.tokens", used(latency_ms=3.0)),
        ("cost", "usage.cost_usd", used(total_tokens=3)),
    ],
)
def test_usage_evaluators_skip_when_the_field_is_unknown(
    name: str, field: str, record: Record
) -> None:
    result = run(name, record)
    assert result.outcome is Outcome.SKIPPED
    assert result.reason == f"record has no {field}"


def test_usage_evaluators_need_no_output() -> None:
    record = Record(id="r", usage=Usage(latency_ms=5.0))
    assert scores("latency", record) == {"latency": 5.0}


@pytest.mark.parametrize(
    ("name", "param"), [("latency", "max_ms"), ("tokens", "max_tokens"), ("cost", "max_usd")]
)
def test_negative_budgets_are_param_errors(name: str, param: str) -> None:
    with pytest.raises(ParamError, match=f"{name}: param '{param}' must be >= 0"):
        REG.resolve(name).bind({param: -1})


def test_a_non_finite_latency_is_an_error_not_a_score() -> None:
    result = run("latency", used(latency_ms=float("nan")))
    assert result.outcome is Outcome.ERROR
    assert "finite" in result.reason
