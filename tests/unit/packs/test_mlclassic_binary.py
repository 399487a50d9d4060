"""ml-classic on a real binary problem: every metric equals scikit-learn's to 1e-9.

Golden vectors: a logistic regression fitted here on scikit-learn's breast-cancer data, its
predicted labels and probabilities sent through ``evalsi.evaluate`` as records.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import evalsi
from evalsi.core import EvaluationResult, Outcome
from evalsi.evaluators import Registry
from evalsi.packs import ml_classic

REG = Registry(ml_classic.EVALUATORS)


def dataset_result(rows: list[dict[str, Any]], name: str, **params: Any) -> EvaluationResult:
    """Run one ml-classic evaluator through the public API; its one dataset-level result."""
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
    x, y = load_breast_cancer(return_X_y=True)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, C=0.05))
    model.fit(x[::2], y[::2])  # fit on half, score the other half: an imperfect model
    xt, yt = x[1::2], y[1::2]
    p1 = model.predict_proba(xt)[:, 1]
    return {"y": yt.astype(str), "pred": model.predict(xt).astype(str), "p1": p1}


def rows_of(y: Any, pred: Any, p1: Any, names: tuple[str, str] = ("0", "1")) -> list[Any]:
    neg, pos = names
    return [
        {
            "output": {"label": lab, "probabilities": {neg: float(1 - p), pos: float(p)}},
            "reference": truth,
        }
        for truth, lab, p in zip(y, pred, p1, strict=True)
    ]


LABEL_METRICS = [
    ("accuracy", {}, lambda y, p: skm.accuracy_score(y, p)),
    ("balanced-accuracy", {}, lambda y, p: skm.balanced_accuracy_score(y, p)),
    ("precision", {}, lambda y, p: skm.precision_score(y, p, pos_label="1")),
    ("recall", {}, lambda y, p: skm.recall_score(y, p, pos_label="1")),
    ("f1", {}, lambda y, p: skm.f1_score(y, p, pos_label="1")),
    ("f1", {"positive": "0"}, lambda y, p: skm.f1_score(y, p, pos_label="0")),
    ("f1", {"average": "macro"}, lambda y, p: skm.f1_score(y, p, average="macro")),
    ("f1", {"average": "micro"}, lambda y, p: skm.f1_score(y, p, average="micro")),
    (
        "precision",
        {"average": "weighted"},
        lambda y, p: skm.precision_score(y, p, average="weighted"),
    ),
    ("recall", {"average": "macro"}, lambda y, p: skm.recall_score(y, p, average="macro")),
    ("mcc", {}, lambda y, p: skm.matthews_corrcoef(y, p)),
    ("cohen-kappa", {}, lambda y, p: skm.cohen_kappa_score(y, p)),
]


@pytest.mark.parametrize(("name", "params", "reference"), LABEL_METRICS)
def test_label_metrics_match_sklearn(
    golden: dict[str, Any], name: str, params: dict[str, Any], reference: Any
) -> None:
    rows = rows_of(golden["y"], golden["pred"], golden["p1"])
    expected = reference(golden["y"], golden["pred"])
    assert number(rows, name, **params) == pytest.approx(expected, abs=1e-9)


def _ece(y: Any, p: Any, bins: int) -> float:
    prob_true, prob_pred = calibration_curve(y, p, n_bins=bins, strategy="uniform")
    ids = np.searchsorted(np.linspace(0, 1, bins + 1)[1:-1], p)
    counts = np.bincount(ids, minlength=bins)
    counts = counts[counts > 0]
    return float(np.sum(counts / len(p) * np.abs(prob_true - prob_pred)))


PROB_METRICS = [
    ("roc-auc", {}, lambda y, p: skm.roc_auc_score(y, p)),
    ("pr-auc", {}, lambda y, p: skm.average_precision_score(y, p)),
    ("log-loss", {}, lambda y, p: skm.log_loss(y, p)),
    ("brier", {}, lambda y, p: skm.brier_score_loss(y, p)),
    ("ece", {}, lambda y, p: _ece(y, p, 10)),
    ("ece", {"bins": 7}, lambda y, p: _ece(y, p, 7)),
]


@pytest.mark.parametrize("rounded", [False, True], ids=["exact", "ties"])
@pytest.mark.parametrize(("name", "params", "reference"), PROB_METRICS)
def test_probability_metrics_match_sklearn(
    golden: dict[str, Any], name: str, params: dict[str, Any], reference: Any, rounded: bool
) -> None:
    # rounding to one decimal makes many tied scores: the curves must treat ties as sklearn does
    p1 = np.round(golden["p1"], 1) if rounded else golden["p1"]
    rows = rows_of(golden["y"], golden["pred"], p1)
    expected = reference(golden["y"].astype(int), p1)
    assert number(rows, name, **params) == pytest.approx(expected, abs=1e-9)


def test_string_labels_and_positive_param(golden: dict[str, Any]) -> None:
    names = np.array(["benign", "malignant"])
    y = names[golden["y"].astype(int)]
    pred = names[golden["pred"].astype(int)]
    rows = rows_of(y, pred, golden["p1"], names=("benign", "malignant"))
    # no "1": the greater sorted label ("malignant") is the positive one by default
    assert number(rows, "f1") == pytest.approx(
        skm.f1_score(y, pred, pos_label="malignant"), abs=1e-9
    )
    assert number(rows, "recall", positive="benign") == pytest.approx(
        skm.recall_score(y, pred, pos_label="benign"), abs=1e-9
    )
    p_benign = 1 - golden["p1"]
    assert number(rows, "roc-auc", positive="benign") == pytest.approx(
        skm.roc_auc_score(y == "benign", p_benign), abs=1e-9
    )
    assert number(rows, "brier", positive="benign") == pytest.approx(
        skm.brier_score_loss(y, p_benign, pos_label="benign"), abs=1e-9
    )


def test_positive_probability_only_and_label_from_argmax(golden: dict[str, Any]) -> None:
    # outputs giving only p("1") and no label: p("0") is the rest, the label the argmax
    rows = [
        {"output": {"probabilities": {"1": float(p)}}, "reference": t}
        for t, p in zip(golden["y"], golden["p1"], strict=True)
    ]
    y = golden["y"].astype(int)
    assert number(rows, "log-loss") == pytest.approx(skm.log_loss(y, golden["p1"]), abs=1e-9)
    argmax = (golden["p1"] > 0.5).astype(int)
    assert number(rows, "accuracy") == pytest.approx(skm.accuracy_score(y, argmax), abs=1e-9)


def test_confusion_matrix_is_structured(golden: dict[str, Any]) -> None:
    rows = rows_of(golden["y"], golden["pred"], golden["p1"])
    result = dataset_result(rows, "confusion-matrix")
    assert result.outcome is Outcome.SCORED, result.reason
    expected = skm.confusion_matrix(golden["y"], golden["pred"], labels=["0", "1"])
    assert result.scores[0].structured == {"labels": ["0", "1"], "matrix": expected.tolist()}
