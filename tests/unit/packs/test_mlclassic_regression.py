"""ml-classic regression metrics equal scikit-learn's to 1e-9, through ``evalsi.evaluate``.

Golden vectors: a ridge regression fitted here on half of scikit-learn's diabetes data, its
predictions for the other half sent as records (JSON numbers, numeric text and tabular rows).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.datasets import load_diabetes
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.linear_model import Ridge

import evalsi
from evalsi.core import EvaluationResult, Outcome
from evalsi.evaluators import Registry
from evalsi.packs import ml_classic

REG = Registry(ml_classic.EVALUATORS)

SKLEARN = {
    "mae": skm.mean_absolute_error,
    "mse": skm.mean_squared_error,
    "rmse": skm.root_mean_squared_error,
    "r2": skm.r2_score,
    "mape": skm.mean_absolute_percentage_error,
}


def run(rows: list[Any], name: str) -> tuple[EvaluationResult, Any]:
    r = evalsi.evaluate(data=rows, evaluators=[name], registry=REG, store=":memory:")
    (result,) = [x for x in r.results if x.evaluator == name and x.record_id == ""]
    return result, r.metric(name)


def number(rows: list[Any], name: str) -> float:
    result, _ = run(rows, name)
    assert result.outcome is Outcome.SCORED, result.reason
    value = result.scores[0].number
    assert value is not None
    return value


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    x, y = load_diabetes(return_X_y=True)
    model = Ridge(alpha=0.5).fit(x[::2], y[::2])
    return {"y": y[1::2], "pred": model.predict(x[1::2])}


def plain_rows(y: Any, pred: Any) -> list[dict[str, Any]]:
    return [{"output": float(p), "reference": float(t)} for t, p in zip(y, pred, strict=True)]


@pytest.mark.parametrize("name", list(SKLEARN))
def test_regression_metrics_match_sklearn(golden: dict[str, Any], name: str) -> None:
    expected = SKLEARN[name](golden["y"], golden["pred"])
    assert number(plain_rows(golden["y"], golden["pred"]), name) == pytest.approx(
        expected, rel=1e-12, abs=1e-9
    )


def test_text_rows_and_integers_are_numbers(golden: dict[str, Any]) -> None:
    y, pred = golden["y"][:30], golden["pred"][:30]
    rows: list[dict[str, Any]] = []
    for i, (t, p) in enumerate(zip(y, pred, strict=True)):
        if i % 3 == 0:  # numeric text, as a CSV column or an LLM answer gives it
            rows.append({"output": f" {float(p)!r}\n", "reference": repr(float(t))})
        elif i % 3 == 1:  # a tabular row's prediction; an integer reference
            rows.append({"output": {"row": {"prediction": float(p)}}, "reference": int(t)})
        else:
            rows.append({"output": float(p), "reference": float(t)})
    for name, fn in SKLEARN.items():
        assert number(rows, name) == pytest.approx(fn(y, pred), rel=1e-12, abs=1e-9), name


def test_r2_with_a_constant_reference_follows_sklearn() -> None:
    y = [7.0] * 5
    perfect = [{"output": 7.0, "reference": t} for t in y]
    off = [{"output": p, "reference": t} for t, p in zip(y, [7.5, 7.0, 6.0, 7.0, 7.0], strict=True)]
    assert number(perfect, "r2") == skm.r2_score(y, y) == 1.0
    assert number(off, "r2") == skm.r2_score(y, [7.5, 7.0, 6.0, 7.0, 7.0]) == 0.0


def test_r2_constant_reference_is_exact_where_the_mean_rounds() -> None:
    # mean([0.1] * 3) != 0.1 in floating point, so scikit-learn's SS_tot is a tiny positive
    # number and its R² a huge negative artefact; evalsi sees a constant reference (0.0).
    y, pred = [0.1] * 3, [0.2, 0.1, 0.1]
    assert skm.r2_score(y, pred) < -1e20
    rows = [{"output": p, "reference": t} for t, p in zip(y, pred, strict=True)]
    assert number(rows, "r2") == 0.0


def test_mape_with_zero_references_divides_by_epsilon_like_sklearn() -> None:
    y = [0.0, 2.0, 0.0, 4.0, 5.0]
    pred = [0.0, 2.5, 1e-3, 3.0, 5.0]
    rows = [{"output": p, "reference": t} for t, p in zip(y, pred, strict=True)]
    result, _ = run(rows, "mape")
    assert result.scores[0].number == pytest.approx(
        skm.mean_absolute_percentage_error(y, pred), rel=1e-12
    )
    assert "2 records have reference 0" in result.scores[0].explanation


def test_a_single_record() -> None:
    rows = [{"output": 3.0, "reference": 5.0}]
    for name in ("mae", "mse", "rmse", "mape"):
        assert number(rows, name) == pytest.approx(SKLEARN[name]([5.0], [3.0]), abs=1e-12)
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(skm.r2_score([5.0], [3.0]))
    result, _ = run(rows, "r2")
    assert result.outcome is Outcome.ERROR
    assert "fewer than two records" in result.reason


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("about twelve", "output 'about twelve' is not a number"),
        (True, "output is a boolean (true), not a number"),
        ([1.0, 2.0], "output must be a number, got list"),
        ({"value": 3.0}, "output must be a number, got dict"),
    ],
)
def test_non_numeric_output_is_an_error_with_the_reason(bad: Any, reason: str) -> None:
    result, summary = run([{"output": bad, "reference": 1.0}], "mae")
    assert result.outcome is Outcome.ERROR
    assert reason in result.reason
    assert summary.errors == 1
    # among numeric records it is an ERROR of its own; the metric is the others' value
    rows = [{"output": bad, "reference": 1.0}, *plain_rows([1.0, 2.0], [1.5, 1.0])]
    result, summary = run(rows, "mae")
    assert result.scores[0].number == pytest.approx(0.75)
    assert (summary.n, summary.errors) == (2, 1)


def test_null_output_or_row_without_prediction_is_skipped() -> None:
    rows = [
        {"output": {"json": None}, "reference": 1.0},
        {"output": {"row": {"features": {"x": 1}}}, "reference": 2.0},
        {"output": 2.0, "reference": 1.0},
        {"output": 2.0},
    ]
    result, summary = run(rows, "rmse")
    assert result.scores[0].number == 1.0
    assert (summary.n, summary.skipped) == (1, 3)
    result, _ = run(rows[:2], "rmse")
    assert result.outcome is Outcome.SKIPPED


@pytest.mark.parametrize(
    ("output", "reference", "reason"),
    [
        ("nan", 1.0, "1 output is NaN"),
        (math.inf, 1.0, "1 output is infinite"),
        (2.0, "-inf", "1 reference is infinite"),
        (math.nan, math.nan, "1 output is NaN, 1 reference is NaN"),
    ],
)
def test_nan_and_infinity_make_the_metric_an_error(
    output: Any, reference: Any, reason: str
) -> None:
    rows = [{"output": output, "reference": reference}, *plain_rows([1.0, 2.0], [1.5, 1.0])]
    for name in SKLEARN:
        result, _ = run(rows, name)
        assert result.outcome is Outcome.ERROR, name
        assert reason in result.reason
        assert "every value must be a finite number" in result.reason


def test_bootstrap_interval_contains_the_value(golden: dict[str, Any]) -> None:
    rows = plain_rows(golden["y"][:80], golden["pred"][:80])
    r = evalsi.evaluate(
        data=rows, evaluators=["mae"], registry=REG, store=":memory:", bootstrap="percentile"
    )
    summary = r.metric("mae")
    expected = skm.mean_absolute_error(golden["y"][:80], golden["pred"][:80])
    assert summary.mean == pytest.approx(expected, abs=1e-9)
    assert summary.ci.low < expected < summary.ci.high


def test_numeric_text_and_integers_mix() -> None:
    # "10" and 10 are the same number; orders of magnitude in text parse as floats
    rows = [{"output": "1e1", "reference": 10}, {"output": 4, "reference": "2"}]
    assert number(rows, "mse") == np.mean([0.0, 4.0])
