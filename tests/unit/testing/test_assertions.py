"""``assert_metric`` on runs made here: which bound strict compares, and what it cannot."""

from __future__ import annotations

import pytest

import evalsi
from evalsi import OutputSpec, Record, Score, evaluator
from evalsi.core import UserError
from evalsi.runs import ScoreResult
from evalsi.testing import assert_metric


def _run(right: int, n: int = 20, evaluators: tuple[str, ...] = ("exact-match",)) -> ScoreResult:
    rows = [{"output": "y" if i < right else "n", "reference": "y"} for i in range(n)]
    return evalsi.evaluate(rows, list(evaluators), store=":memory:")


def test_strict_names_a_miss_when_the_mean_fails_too() -> None:
    with pytest.raises(AssertionError, match=r"the interval misses 0\.900: its lower bound"):
        assert_metric(_run(12), "exact-match", ">=", 0.9, strict=True)


def test_strict_passes_when_the_whole_interval_clears_the_threshold() -> None:
    m = assert_metric(_run(1), "exact-match", "<", 0.4, strict=True)
    assert m.ci.high is not None
    assert m.ci.high < 0.4


def test_a_metric_with_no_scored_value_fails_plainly() -> None:
    r = evalsi.evaluate([{"output": "y"}], ["exact-match"], store=":memory:")  # no reference
    with pytest.raises(AssertionError, match="no scored values"):
        assert_metric(r, "exact-match", ">=", 0.5)


@evaluator(
    name="t/two", outputs=[OutputSpec("precision", "number"), OutputSpec("recall", "number")]
)
def two(record: Record) -> list[Score]:
    return [Score(name="precision", number=1.0), Score(name="recall", number=0.5)]


def test_an_evaluator_with_several_metrics_asks_which() -> None:
    r = evalsi.evaluate([{"output": "y"}], [two], store=":memory:")
    with pytest.raises(UserError, match=r"'two' has several metrics; name one of: two/precision"):
        assert_metric(r, "two", ">=", 0)
    assert assert_metric(r, "two/recall", "<=", 0.5).mean == 0.5


def test_a_bool_is_not_a_threshold() -> None:
    with pytest.raises(UserError, match="is not a number"):
        assert_metric(_run(5), "exact-match", ">=", True)


@evaluator(name="t/band", outputs=[OutputSpec("band", "label")])
def band(record: Record) -> list[Score]:
    return [Score(name="band", label="hi")]


def test_a_label_metric_has_no_mean_to_compare() -> None:
    r = evalsi.evaluate([{"output": "y"}], [band], store=":memory:")
    with pytest.raises(UserError, match="band/band is a label metric"):
        assert_metric(r, "band", ">=", 0.5)
