"""The bootstrap protocol of every ml-classic dataset-scope metric (prepare / reduce_weighted).

Two equalities, over random counts drawn by hypothesis:
- ``reduce_weighted(prepare(v), counts)`` equals ``reduce`` of the values repeated by their
  counts (zeros included: a resample that leaves a record out);
- with positive weights (counts or fractions) it equals scikit-learn with ``sample_weight``.
With a zero count a class seen only in left-out records is absent, as in the repeated data
(scikit-learn's ``sample_weight=0`` would still list it), hence positive weights for the second.

Golden data: small real samples (breast cancer, iris, diabetes), small so that random counts
often leave a class out or keep one class only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from evalsi.core import Content, Record, Score
from evalsi.evaluators import Registry
from evalsi.packs import ml_classic
from evalsi.packs.ml_classic._base import Weighted

REG = Registry(ml_classic.EVALUATORS)
N = 14
NAMES = np.array(["setosa", "versicolor", "virginica"])
Reference = Callable[[Any, np.ndarray], Any]


def _binary() -> dict[str, Any]:
    x, y = load_breast_cancer(return_X_y=True)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.01, max_iter=1000))
    model.fit(x[::2], y[::2])
    pick = np.r_[np.flatnonzero(y[1::2] == 0)[:6], np.flatnonzero(y[1::2] == 1)[: N - 6]]
    xt, yt = x[1::2][pick], y[1::2][pick]
    p1 = np.round(model.predict_proba(xt)[:, 1], 2)  # rounded: tied scores
    pred = (p1 >= 0.5).astype(int)
    rows = [
        {"output": {"label": int(lab), "probabilities": {"0": 1 - p, "1": p}}, "reference": int(t)}
        for t, lab, p in zip(yt, pred, p1.tolist(), strict=True)
    ]
    return {"rows": rows, "y": yt, "pred": pred, "p1": p1}


def _multiclass() -> dict[str, Any]:
    x, y = load_iris(return_X_y=True)
    model = LogisticRegression(C=0.02, max_iter=1000).fit(x[::2, :2], y[::2])
    pick = np.r_[0:5, 25:30, 50:54]  # every class, in order
    proba = model.predict_proba(x[1::2, :2])[pick]
    yt = NAMES[y[1::2][pick]]
    pred = NAMES[proba.argmax(axis=1)]
    rows = [
        {
            "output": {"label": lab, "probabilities": dict(zip(NAMES, map(float, p), strict=True))},
            "reference": t,
        }
        for t, lab, p in zip(yt, pred, proba, strict=True)
    ]
    return {"rows": rows, "y": yt, "pred": pred, "proba": proba}


def _positive_only(binary: dict[str, Any]) -> dict[str, Any]:
    """Outputs with p("1") only and no label: p("0") is the rest, the label the argmax."""
    rows = [
        {"output": {"probabilities": {"1": float(p)}}, "reference": int(t)}
        for t, p in zip(binary["y"], binary["p1"], strict=True)
    ]
    return {**binary, "rows": rows, "pred": (binary["p1"] > 0.5).astype(int)}


def _two_named(multiclass: dict[str, Any]) -> dict[str, Any]:
    """Outputs naming setosa and versicolor only: virginica gets the rest, labels the argmax."""
    rows = [
        {
            "output": {"probabilities": {"setosa": float(p[0]), "versicolor": float(p[1])}},
            "reference": t,
        }
        for t, p in zip(multiclass["y"], multiclass["proba"], strict=True)
    ]
    return {**multiclass, "rows": rows}


def _regression() -> dict[str, Any]:
    x, y = load_diabetes(return_X_y=True)
    model = Ridge(alpha=0.5).fit(x[::2], y[::2])
    yt, pred = y[1::2][:N], model.predict(x[1::2][:N])
    rows = [{"output": float(p), "reference": float(t)} for t, p in zip(yt, pred, strict=True)]
    return {"rows": rows, "y": yt, "pred": pred}


BINARY, MULTICLASS = _binary(), _multiclass()
DATA = {
    "binary": BINARY,
    "multiclass": MULTICLASS,
    "two-named": _two_named(MULTICLASS),
    "positive-only": _positive_only(BINARY),
    "regression": _regression(),
}


def _ece(y: Any, p: Any, w: Any, bins: int = 10) -> float:
    """ECE from scikit-learn's calibration_curve on the repeated records (it has no weights)."""
    reps = w.astype(int)
    y, p = np.repeat(y, reps), np.repeat(p, reps)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=bins, strategy="uniform")
    counts = np.bincount(np.searchsorted(np.linspace(0, 1, bins + 1)[1:-1], p), minlength=bins)
    counts = counts[counts > 0]
    return float(np.sum(counts / len(p) * np.abs(prob_true - prob_pred)))


def _labels(d: dict[str, Any]) -> tuple[Any, Any]:
    return d["y"].astype(str), d["pred"].astype(str)


B, M = "binary", "multiclass"
CASES: list[tuple[str, str, dict[str, Any], Reference | None]] = [
    (B, "accuracy", {}, lambda d, w: skm.accuracy_score(*_labels(d), sample_weight=w)),
    (
        B,
        "balanced-accuracy",
        {},
        lambda d, w: skm.balanced_accuracy_score(*_labels(d), sample_weight=w),
    ),
    (
        B,
        "f1",
        {},
        lambda d, w: skm.f1_score(*_labels(d), pos_label="1", sample_weight=w, zero_division=0),
    ),
    (
        B,
        "precision",
        {},
        lambda d, w: skm.precision_score(
            *_labels(d), pos_label="1", sample_weight=w, zero_division=0
        ),
    ),
    (B, "mcc", {}, lambda d, w: skm.matthews_corrcoef(*_labels(d), sample_weight=w)),
    (B, "roc-auc", {}, lambda d, w: skm.roc_auc_score(d["y"], d["p1"], sample_weight=w)),
    (B, "pr-auc", {}, lambda d, w: skm.average_precision_score(d["y"], d["p1"], sample_weight=w)),
    (B, "log-loss", {}, lambda d, w: skm.log_loss(d["y"], d["p1"], sample_weight=w)),
    (B, "brier", {}, lambda d, w: skm.brier_score_loss(d["y"], d["p1"], sample_weight=w)),
    (B, "ece", {}, lambda d, w: _ece(d["y"], d["p1"], w) if np.all(w % 1 == 0) else None),
    (
        B,
        "confusion-matrix",
        {},
        lambda d, w: {
            "labels": ["0", "1"],
            "matrix": skm.confusion_matrix(*_labels(d), sample_weight=w).tolist(),
        },
    ),
    (M, "accuracy", {}, lambda d, w: skm.accuracy_score(d["y"], d["pred"], sample_weight=w)),
    (
        M,
        "balanced-accuracy",
        {},
        lambda d, w: skm.balanced_accuracy_score(d["y"], d["pred"], sample_weight=w),
    ),
    *[
        (
            M,
            name,
            {"average": avg},
            lambda d, w, fn=fn, avg=avg: fn(
                d["y"], d["pred"], average=avg, sample_weight=w, zero_division=0
            ),
        )
        for name, fn in (
            ("precision", skm.precision_score),
            ("recall", skm.recall_score),
            ("f1", skm.f1_score),
        )
        for avg in ("micro", "macro", "weighted")
    ],
    (M, "mcc", {}, lambda d, w: skm.matthews_corrcoef(d["y"], d["pred"], sample_weight=w)),
    *[
        (
            M,
            "cohen-kappa",
            {"weights": kw},
            lambda d, w, kw=kw: skm.cohen_kappa_score(
                d["y"], d["pred"], weights=None if kw == "none" else kw, sample_weight=w
            ),
        )
        for kw in ("none", "linear", "quadratic")
    ],
    *[
        (
            M,
            "roc-auc",
            {"average": avg},
            lambda d, w, avg=avg: skm.roc_auc_score(
                d["y"], d["proba"], multi_class="ovr", average=avg, labels=NAMES, sample_weight=w
            ),
        )
        for avg in ("macro", "weighted")
    ],
    (
        M,
        "pr-auc",
        {},
        lambda d, w: skm.average_precision_score(
            d["y"][:, None] == NAMES[None, :], d["proba"], sample_weight=w
        ),
    ),
    (
        M,
        "log-loss",
        {},
        lambda d, w: skm.log_loss(d["y"], d["proba"], labels=NAMES, sample_weight=w),
    ),
    (
        M,
        "brier",
        {},
        lambda d, w: skm.brier_score_loss(d["y"], d["proba"], labels=NAMES, sample_weight=w),
    ),
    (
        M,
        "confusion-matrix",
        {},
        lambda d, w: {
            "labels": list(NAMES),
            "matrix": skm.confusion_matrix(
                d["y"], d["pred"], labels=NAMES, sample_weight=w
            ).tolist(),
        },
    ),
    (
        "positive-only",
        "accuracy",
        {},
        lambda d, w: skm.accuracy_score(*_labels(d), sample_weight=w),
    ),
    ("positive-only", "log-loss", {}, lambda d, w: skm.log_loss(d["y"], d["p1"], sample_weight=w)),
    (
        "positive-only",
        "roc-auc",
        {},
        lambda d, w: skm.roc_auc_score(d["y"], d["p1"], sample_weight=w),
    ),
    (
        "two-named",
        "accuracy",
        {},
        lambda d, w: skm.accuracy_score(d["y"], d["pred"], sample_weight=w),
    ),
    (
        "two-named",
        "roc-auc",
        {},
        lambda d, w: skm.roc_auc_score(
            d["y"], d["proba"], multi_class="ovr", labels=NAMES, sample_weight=w
        ),
    ),
    (
        "two-named",
        "brier",
        {},
        lambda d, w: skm.brier_score_loss(d["y"], d["proba"], labels=NAMES, sample_weight=w),
    ),
    *[
        ("regression", name, {}, lambda d, w, fn=fn: fn(d["y"], d["pred"], sample_weight=w))
        for name, fn in (
            ("mae", skm.mean_absolute_error),
            ("mse", skm.mean_squared_error),
            ("rmse", skm.root_mean_squared_error),
            ("r2", skm.r2_score),
            ("mape", skm.mean_absolute_percentage_error),
        )
    ],
]
IDS = [f"{data}-{name}-{'-'.join(map(str, p.values())) or 'default'}" for data, name, p, _ in CASES]


def _mapped(data: str, name: str, params: dict[str, Any]) -> tuple[Any, list[Any]]:
    instance = REG.resolve(name).bind(params).instance
    records = [
        Record(
            id=str(i),
            output=Content.from_value(row["output"]),
            reference=Content.from_value(row["reference"]),
        )
        for i, row in enumerate(DATA[data]["rows"])
    ]
    return instance, [instance.map(r) for r in records]


def _outcome(fn: Callable[[], Score]) -> Any:
    """The score's value, or the error's message: both sides must agree on either."""
    try:
        score = fn()
    except ValueError as e:
        return ("error", str(e))
    return score.number if score.number is not None else score.structured


def _same(got: Any, want: Any) -> None:
    if isinstance(want, float):
        assert isinstance(got, float)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-9)
    elif isinstance(want, dict):  # a confusion matrix: labels, and counts to 1e-9
        assert got["labels"] == want["labels"]
        np.testing.assert_allclose(got["matrix"], want["matrix"], rtol=0, atol=1e-9)
    else:
        assert got == want


def test_every_dataset_metric_adopts_the_protocol() -> None:
    dataset = [ev for ev in ml_classic.EVALUATORS if ev.manifest.scope.value == "dataset"]
    assert len(dataset) == 18
    covered = {name for _, name, _, _ in CASES}
    for ev in dataset:
        assert isinstance(ev.bind().instance, Weighted), ev.name
        assert type(ev.bind().instance).reduce is Weighted.reduce, ev.name  # reduce = ones
        assert ev.name in covered, ev.name


COUNTS = st.lists(st.integers(0, 3), min_size=N, max_size=N).filter(lambda c: sum(c) > 0)
POSITIVE = st.one_of(
    st.lists(st.integers(1, 4), min_size=N, max_size=N),
    st.lists(st.floats(0.5, 3.0), min_size=N, max_size=N),
)


@pytest.mark.parametrize(("data", "name", "params", "reference"), CASES, ids=IDS)
@settings(max_examples=30, deadline=None)
@given(counts=COUNTS)
@example(counts=[0] * 6 + [1] * (N - 6))  # binary data: class 0 left out entirely
@example(counts=[2] * 6 + [0] * (N - 6))  # binary data: class 1 left out entirely
@example(counts=[0] * 5 + [1] * (N - 5))  # multiclass data: setosa left out
@example(counts=[1] * 10 + [0] * (N - 10))  # multiclass data: virginica left out
@example(counts=[0] * (N - 1) + [3])  # one record, three times
def test_counts_equal_repeated_values(
    data: str, name: str, params: dict[str, Any], reference: Reference | None, counts: list[int]
) -> None:
    del reference
    instance, values = _mapped(data, name, params)
    weights = np.array(counts, dtype=np.float64)
    got = _outcome(lambda: instance.reduce_weighted(instance.prepare(values), weights))
    repeated = [v for v, c in zip(values, counts, strict=True) for _ in range(c)]
    want = _outcome(lambda: instance.reduce(repeated))
    _same(got, want)


@pytest.mark.parametrize(("data", "name", "params", "reference"), CASES, ids=IDS)
@settings(max_examples=20, deadline=None)
@given(weights=POSITIVE)
def test_positive_weights_equal_sklearn_sample_weight(
    data: str, name: str, params: dict[str, Any], reference: Reference | None, weights: list[float]
) -> None:
    assert reference is not None
    w = np.array(weights, dtype=np.float64)
    want = reference(DATA[data], w)
    if want is None:  # no weighted form in scikit-learn for fractional weights (ECE)
        return
    instance, values = _mapped(data, name, params)
    got = _outcome(lambda: instance.reduce_weighted(instance.prepare(values), w))
    _same(got, float(want) if not isinstance(want, dict) else want)


@pytest.mark.parametrize(("data", "name", "params", "reference"), CASES, ids=IDS)
def test_unit_weights_equal_sklearn(
    data: str, name: str, params: dict[str, Any], reference: Reference | None
) -> None:
    assert reference is not None
    instance, values = _mapped(data, name, params)
    want = reference(DATA[data], np.ones(N))
    got = _outcome(lambda: instance.reduce(values))
    _same(got, float(want) if not isinstance(want, dict) else want)


def test_bad_weights_are_refused() -> None:
    instance, values = _mapped("binary", "accuracy", {})
    prepared = instance.prepare(values)
    with pytest.raises(ValueError, match="one per value"):
        instance.reduce_weighted(prepared, np.ones(N - 1))
    with pytest.raises(ValueError, match="not all 0"):
        instance.reduce_weighted(prepared, np.zeros(N))
    with pytest.raises(ValueError, match=">= 0"):
        instance.reduce_weighted(prepared, np.r_[-1.0, np.ones(N - 1)])
