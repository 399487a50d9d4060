"""ml-classic on a real three-class problem (iris): every metric equals scikit-learn's to 1e-9."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

import evalsi
from evalsi.core import EvaluationResult, Outcome
from evalsi.evaluators import Registry
from evalsi.packs import ml_classic

REG = Registry(ml_classic.EVALUATORS)
NAMES = np.array(["setosa", "versicolor", "virginica"])


def dataset_result(rows: list[dict[str, Any]], name: str, **params: Any) -> EvaluationResult:
    r = evalsi.evaluate(
        data=rows, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    (result,) = [x for x in r.results if x.evaluator == name and x.record_id == ""]
    return result


def number(rows: list[dict[str, Any]], name: str, **params: Any) -> float:
    result = dataset_result(rows, name, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    value = result.scores[0].number
    assert value is not None
    return value


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    x, y = load_iris(return_X_y=True)
    # two features and strong regularisation: a model that confuses versicolor and virginica
    model = LogisticRegression(max_iter=1000, C=0.02).fit(x[::2, :2], y[::2])
    proba = model.predict_proba(x[1::2, :2])
    return {"y": NAMES[y[1::2]], "pred": NAMES[proba.argmax(axis=1)], "proba": proba}


def rows_of(y: Any, pred: Any, proba: Any) -> list[dict[str, Any]]:
    return [
        {
            "output": {"label": lab, "probabilities": dict(zip(NAMES, map(float, p), strict=True))},
            "reference": truth,
        }
        for truth, lab, p in zip(y, pred, proba, strict=True)
    ]


LABEL_METRICS = [
    ("accuracy", {}, lambda y, p: skm.accuracy_score(y, p)),
    ("balanced-accuracy", {}, lambda y, p: skm.balanced_accuracy_score(y, p)),
    ("mcc", {}, lambda y, p: skm.matthews_corrcoef(y, p)),
    ("cohen-kappa", {}, lambda y, p: skm.cohen_kappa_score(y, p)),
    (
        "cohen-kappa",
        {"weights": "linear"},
        lambda y, p: skm.cohen_kappa_score(y, p, weights="linear"),
    ),
    (
        "cohen-kappa",
        {"weights": "quadratic"},
        lambda y, p: skm.cohen_kappa_score(y, p, weights="quadratic"),
    ),
] + [
    (name, {"average": avg}, lambda y, p, fn=fn, avg=avg: fn(y, p, average=avg))
    for name, fn in (
        ("precision", skm.precision_score),
        ("recall", skm.recall_score),
        ("f1", skm.f1_score),
    )
    for avg in ("micro", "macro", "weighted")
]


@pytest.mark.parametrize(("name", "params", "reference"), LABEL_METRICS)
def test_label_metrics_match_sklearn(
    golden: dict[str, Any], name: str, params: dict[str, Any], reference: Any
) -> None:
    rows = rows_of(golden["y"], golden["pred"], golden["proba"])
    expected = reference(golden["y"], golden["pred"])
    assert number(rows, name, **params) == pytest.approx(expected, abs=1e-9)


def _top_label_ece(y: Any, proba: Any, bins: int) -> float:
    conf = proba.max(axis=1)
    hit = (NAMES[proba.argmax(axis=1)] == y).astype(int)
    prob_true, prob_pred = calibration_curve(hit, conf, n_bins=bins, strategy="uniform")
    counts = np.bincount(np.searchsorted(np.linspace(0, 1, bins + 1)[1:-1], conf), minlength=bins)
    counts = counts[counts > 0]
    return float(np.sum(counts / len(conf) * np.abs(prob_true - prob_pred)))


def _brier(y: Any, proba: Any) -> float:
    return float(skm.brier_score_loss(y, proba, labels=NAMES))


PROB_METRICS = [
    ("roc-auc", {}, lambda y, p: skm.roc_auc_score(y, p, multi_class="ovr", labels=NAMES)),
    (
        "roc-auc",
        {"average": "weighted"},
        lambda y, p: skm.roc_auc_score(y, p, multi_class="ovr", average="weighted", labels=NAMES),
    ),
    ("pr-auc", {}, lambda y, p: skm.average_precision_score(y, p)),
    (
        "pr-auc",
        {"average": "weighted"},
        lambda y, p: skm.average_precision_score(y, p, average="weighted"),
    ),
    ("log-loss", {}, lambda y, p: skm.log_loss(y, p, labels=NAMES)),
    ("brier", {}, _brier),
    ("ece", {}, lambda y, p: _top_label_ece(y, p, 10)),
]


@pytest.mark.parametrize("rounded", [False, True], ids=["exact", "ties"])
@pytest.mark.parametrize(("name", "params", "reference"), PROB_METRICS)
def test_probability_metrics_match_sklearn(
    golden: dict[str, Any], name: str, params: dict[str, Any], reference: Any, rounded: bool
) -> None:
    proba = golden["proba"]
    if rounded:  # ties; the last column keeps rows summing to 1
        proba = np.round(proba, 1)
        proba[:, 2] = np.clip(1 - proba[:, :2].sum(axis=1), 0, 1)
        proba = proba / proba.sum(axis=1, keepdims=True)
    rows = rows_of(golden["y"], golden["pred"], proba)
    y = golden["y"]
    if name == "pr-auc":  # sklearn wants a binarised indicator matrix for multiclass AP
        y = (golden["y"][:, None] == NAMES[None, :]).astype(int)
    expected = reference(y, proba)
    assert number(rows, name, **params) == pytest.approx(expected, abs=1e-9)


def test_confusion_matrix(golden: dict[str, Any]) -> None:
    rows = rows_of(golden["y"], golden["pred"], golden["proba"])
    result = dataset_result(rows, "confusion-matrix")
    expected = skm.confusion_matrix(golden["y"], golden["pred"], labels=NAMES)
    assert result.scores[0].structured == {"labels": list(NAMES), "matrix": expected.tolist()}


def test_binary_average_on_three_classes_is_an_error_with_a_reason(golden: dict[str, Any]) -> None:
    rows = rows_of(golden["y"], golden["pred"], golden["proba"])
    result = dataset_result(rows, "f1")
    assert result.outcome is Outcome.ERROR
    assert "average='binary'" in result.reason
    assert "micro, macro or weighted" in result.reason
