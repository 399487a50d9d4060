"""ml-classic edge cases: a single class, ties, empty-string labels, NaN probabilities,
missing probabilities, other output shapes and bad params, through ``evalsi.evaluate``."""

from __future__ import annotations

import math
from typing import Any

import pytest
from sklearn import metrics as skm
from sklearn.exceptions import UndefinedMetricWarning

import evalsi
from evalsi.core import EvaluationResult, Outcome, ParamError
from evalsi.evaluators import Registry
from evalsi.packs import ml_classic

REG = Registry(ml_classic.EVALUATORS)


def run(rows: list[Any], name: str, **options: Any) -> tuple[EvaluationResult, Any]:
    params = options.pop("params", {})
    r = evalsi.evaluate(
        data=rows,
        evaluators=[name],
        params={name: params},
        registry=REG,
        store=":memory:",
        **options,
    )
    (result,) = [x for x in r.results if x.evaluator == name and x.record_id == ""]
    return result, r.metric(name)


def number(rows: list[Any], name: str, **params: Any) -> float:
    result, _ = run(rows, name, params=params)
    assert result.outcome is Outcome.SCORED, result.reason
    value = result.scores[0].number
    assert value is not None
    return value


def prob_rows(truths: list[str], p1: list[float]) -> list[dict[str, Any]]:
    return [
        {"output": {"probabilities": {"0": 1 - p, "1": p}}, "reference": t}
        for t, p in zip(truths, p1, strict=True)
    ]


def test_roc_auc_with_a_single_class_is_an_error_like_sklearn() -> None:
    truths, p1 = ["1", "1", "1"], [0.2, 0.7, 0.9]
    # scikit-learn 1.9 warns and returns NaN: no number to report, so evalsi says ERROR
    with pytest.warns(UndefinedMetricWarning, match="Only one class"):
        assert math.isnan(skm.roc_auc_score([1, 1, 1], p1))
    result, summary = run(prob_rows(truths, p1), "roc-auc")
    assert result.outcome is Outcome.ERROR
    assert "Only one class present in the reference" in result.reason
    assert summary.errors == 3


def test_nan_probabilities_are_an_error_with_a_reason() -> None:
    rows = prob_rows(["0", "1", "1"], [0.1, math.nan, 0.8])
    for name in ("roc-auc", "log-loss", "brier", "ece", "pr-auc"):
        result, _ = run(rows, name)
        assert result.outcome is Outcome.ERROR, name
        assert "NaN" in result.reason


def test_probabilities_outside_zero_one_are_an_error() -> None:
    result, _ = run(prob_rows(["0", "1"], [1.5, 0.2]), "log-loss")
    assert result.outcome is Outcome.ERROR
    assert "[0, 1]" in result.reason


def test_records_without_probabilities_are_skipped() -> None:
    rows = [{"output": "1", "reference": "1"}, {"output": "0", "reference": "0"}]
    result, summary = run(rows, "roc-auc")
    assert result.outcome is Outcome.SKIPPED
    assert summary.skipped == 2
    # mixed: only records with probabilities count; the others are SKIPPED
    rows += prob_rows(["0", "1", "0", "1"], [0.3, 0.6, 0.7, 0.9])
    result, summary = run(rows, "roc-auc")
    assert result.outcome is Outcome.SCORED
    assert result.scores[0].number == pytest.approx(
        skm.roc_auc_score([0, 1, 0, 1], [0.3, 0.6, 0.7, 0.9])
    )
    assert summary.skipped == 2


def test_all_tied_scores() -> None:
    truths = ["0", "1", "0", "1", "1"]
    p1 = [0.5] * 5
    y = [int(t) for t in truths]
    assert number(prob_rows(truths, p1), "roc-auc") == pytest.approx(0.5)
    assert number(prob_rows(truths, p1), "pr-auc") == pytest.approx(
        skm.average_precision_score(y, p1), abs=1e-9
    )


def test_empty_string_labels() -> None:
    y = ["", "x", "", "x", "x", ""]
    pred = ["", "x", "x", "", "x", ""]
    rows = [{"output": p, "reference": t} for t, p in zip(y, pred, strict=True)]
    assert number(rows, "accuracy") == pytest.approx(skm.accuracy_score(y, pred), abs=1e-9)
    # no "1": the greater label "x" is positive
    assert number(rows, "f1") == pytest.approx(skm.f1_score(y, pred, pos_label="x"), abs=1e-9)
    assert number(rows, "precision", positive="") == pytest.approx(
        skm.precision_score(y, pred, pos_label=""), abs=1e-9
    )
    assert number(rows, "mcc") == pytest.approx(skm.matthews_corrcoef(y, pred), abs=1e-9)


def test_single_class_label_metrics() -> None:
    rows = [{"output": "a", "reference": "a"}] * 4
    assert number(rows, "accuracy") == 1.0
    assert number(rows, "mcc") == 0.0  # undefined: 0, as scikit-learn
    result, _ = run(rows, "cohen-kappa")
    assert result.outcome is Outcome.ERROR
    assert "undefined" in result.reason


def test_average_precision_without_positives_is_an_error() -> None:
    result, _ = run(prob_rows(["0", "0"], [0.2, 0.4]), "pr-auc", params={"positive": "1"})
    assert result.outcome is Outcome.ERROR
    assert "no record has the positive label" in result.reason


def test_unknown_positive_label_is_an_error() -> None:
    rows = [{"output": "a", "reference": "b"}, {"output": "b", "reference": "b"}]
    result, _ = run(rows, "recall", params={"positive": "c"})
    assert result.outcome is Outcome.ERROR
    assert "'c'" in result.reason


def test_output_shapes_json_text_rows_and_numbers() -> None:
    rows = [
        {"output": '{"label": 1, "probabilities": {"0": 0.2, "1": 0.8}}', "reference": 1},
        {
            "output": {"row": {"prediction": 0, "probabilities": {"0": 0.6, "1": 0.4}}},
            "reference": "0",
        },
        {"output": {"label": 1.0, "probabilities": {"1": 0.7}}, "reference": 0},
    ]
    y, p1, pred = [1, 0, 0], [0.8, 0.4, 0.7], [1, 0, 1]
    assert number(rows, "accuracy") == pytest.approx(skm.accuracy_score(y, pred))
    assert number(rows, "log-loss") == pytest.approx(skm.log_loss(y, p1), abs=1e-9)


def test_bad_params_fail_before_any_record() -> None:
    with pytest.raises(ParamError, match="average"):
        run([{"output": "1", "reference": "1"}], "f1", params={"average": "samples"})
    with pytest.raises(ParamError, match="bins"):
        run([{"output": "1", "reference": "1"}], "ece", params={"bins": 0})


def test_bootstrap_interval_from_resampled_reductions() -> None:
    truths = ["0", "1"] * 20
    p1 = [0.1 + 0.02 * i for i in range(40)]
    _, summary = run(prob_rows(truths, p1), "roc-auc", bootstrap="percentile")
    assert summary.ci.low <= summary.mean <= summary.ci.high
    assert summary.ci.low < summary.ci.high


def test_explanation_states_the_binning() -> None:
    result, _ = run(prob_rows(["0", "1"], [0.2, 0.9]), "ece", params={"bins": 5})
    assert "5 equal-width bins" in result.scores[0].explanation


def test_pack_catalog() -> None:
    names = [ev.name for ev in ml_classic.EVALUATORS]
    assert names == [
        "accuracy", "balanced-accuracy", "precision", "recall", "f1", "mcc", "cohen-kappa",
        "roc-auc", "pr-auc", "log-loss", "brier", "ece", "confusion-matrix",
        "mae", "mse", "rmse", "r2", "mape",
        "ndcg", "mrr", "map", "recall-at-k", "precision-at-k", "hit-rate",
    ]  # fmt: skip
    assert {ev.manifest.pack for ev in ml_classic.EVALUATORS} == {"ml-classic"}
    scopes = {ev.name: ev.manifest.scope.value for ev in ml_classic.EVALUATORS}
    assert {n for n, s in scopes.items() if s == "record"} == set(names[-6:])
    assert {n for n, s in scopes.items() if s == "dataset"} == set(names[:-6])
    for ev in ml_classic.EVALUATORS:
        assert ev.ref == f"builtin/{ev.name}@1.0.0"
        (spec,) = ev.manifest.outputs
        assert spec.name == ev.name
        if spec.type == "number":  # every number states which direction is better
            assert spec.higher_is_better is not None, ev.name
    lower = {"log-loss", "brier", "ece", "mae", "mse", "rmse", "mape"}
    assert {
        ev.name for ev in ml_classic.EVALUATORS if ev.manifest.outputs[0].higher_is_better is False
    } == lower
