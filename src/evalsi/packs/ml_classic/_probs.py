"""Probability metrics: ROC-AUC, average precision, log-loss, Brier score and expected
calibration error. Each equals scikit-learn's function (ECE: its ``calibration_curve`` bins).

With two classes the score is p(positive); with more, ROC-AUC and average precision are
one-vs-rest averages, log-loss and Brier use the whole probability row, ECE the top label.
Weights are scikit-learn's ``sample_weight`` (ECE: counts, as repeated records).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from evalsi.core import Score
from evalsi.packs._declare import check_at_least, check_choice
from evalsi.packs.ml_classic._arrays import Probs, default_positive, restrict
from evalsi.packs.ml_classic._base import Weighted, check_weights, fmt
from evalsi.packs.ml_classic._batch import map_prob_batch, merge_probs, unbatch_probs
from evalsi.packs.ml_classic._extract import map_probs

F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
OvrAverage = Literal["macro", "weighted"]


def _binary(p: Probs, positive: str | None) -> tuple[Bools, F64, str]:
    """(is positive, p(positive), positive label) for a two-class problem."""
    pos = default_positive(p.classes, positive)
    if pos not in p.classes:
        raise ValueError(f"positive label {pos!r} is not one of {p.classes}")
    col = p.classes.index(pos)
    return p.truth == col, p.matrix[:, col], pos


def _auc(y: Bools, score: F64, w: F64) -> float:
    """ROC-AUC as the weighted Mann-Whitney statistic: P(score+ > score-) + P(tie) / 2.

    Over the distinct scores in ascending order, each positive weight counts the negative
    weight below it plus half the tied negative weight: the area under the ROC curve.
    """
    order = np.argsort(score)
    s, ws = score[order], w[order]
    pos = np.where(y[order], ws, 0.0)
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    p_tie = np.add.reduceat(pos, starts)
    n_tie = np.add.reduceat(ws - pos, starts)
    below = np.cumsum(n_tie) - n_tie
    # (a * b).sum(), not np.dot: BLAS may wake its thread pool, slow on a busy host
    return float((p_tie * (below + 0.5 * n_tie)).sum() / (p_tie.sum() * n_tie.sum()))


def _average_precision(y: Bools, score: F64, w: F64) -> float:
    """sum over thresholds of (R_n - R_n-1) * P_n, thresholds at each distinct score."""
    order = np.argsort(score, kind="stable")[::-1]
    s, ws = score[order], w[order]
    last = np.r_[np.flatnonzero(s[1:] != s[:-1]), s.size - 1]  # last index of each score
    tps = np.cumsum(np.where(y[order], ws, 0.0))[last]
    precision = tps / np.cumsum(ws)[last]
    recall = tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def _ovr(p: Probs, w: F64, fn: str, average: OvrAverage) -> float:
    k = len(p.classes)
    missing = sorted(set(p.classes) - {p.classes[i] for i in np.unique(p.truth)})
    if missing:
        raise ValueError(
            f"one-vs-rest needs every class of the probabilities in the reference; "
            f"{missing} never occur there"
        )
    onehot = p.truth[:, None] == np.arange(k)[None, :]
    if fn == "roc" and not np.allclose(p.matrix.sum(axis=1), 1.0):
        raise ValueError("multiclass ROC-AUC needs probabilities that sum to 1 on every record")
    curve = _auc if fn == "roc" else _average_precision
    per_class = np.array([curve(onehot[:, j], p.matrix[:, j], w) for j in range(k)])
    if average == "weighted":
        return float(np.average(per_class, weights=np.bincount(p.truth, weights=w, minlength=k)))
    return float(per_class.mean())


class ProbMetric(Weighted[Probs]):
    """map(): (truth, probabilities); a record without probabilities is SKIPPED."""

    map = staticmethod(map_probs)  # the runner calls it once per record: no extra frame
    map_batch = staticmethod(map_prob_batch)  # a whole batch at once (``_batch``)
    unbatch = staticmethod(unbatch_probs)
    prepare = staticmethod(merge_probs)

    def reduce_weighted(self, prepared: Probs, weights: F64) -> Score:
        p, w = restrict(prepared, check_weights(weights, len(prepared.truth)))
        return self.weighted(p, w)

    def weighted(self, p: Probs, w: F64) -> Score:  # pragma: no cover - abstract
        raise NotImplementedError


class _Curve(ProbMetric):
    fn = "roc"
    metric = "roc-auc"

    def __init__(self, *, positive: str | None = None, average: OvrAverage = "macro") -> None:
        check_choice(self.metric, "average", average, ("macro", "weighted"))
        self.positive = positive
        self.average = average

    def weighted(self, p: Probs, w: F64) -> Score:
        if len(p.classes) > 2:
            value = _ovr(p, w, self.fn, self.average)
            how = f"one-vs-rest {self.average} over {len(p.classes)} classes"
            return Score(number=value, explanation=how)
        y, score, pos = _binary(p, self.positive)
        n_pos = int(y.sum())
        if self.fn == "roc" and n_pos in (0, y.size):
            raise ValueError(
                "Only one class present in the reference: ROC AUC is not defined in that case"
            )
        if self.fn == "ap" and n_pos == 0:
            raise ValueError(
                f"average precision is undefined: no record has the positive label {pos!r}"
            )
        value = _auc(y, score, w) if self.fn == "roc" else _average_precision(y, score, w)
        return Score(number=value, explanation=f"positive label {pos!r}, {fmt(w.sum())} records")


class RocAuc(_Curve):
    """Area under the ROC curve from p(positive); one-vs-rest (macro) for more classes."""

    fn = "roc"


class PrAuc(_Curve):
    """Average precision (area under the precision-recall curve, step-wise, no interpolation)."""

    fn = "ap"
    metric = "pr-auc"


class LogLoss(ProbMetric):
    """Mean negative log-likelihood of the reference label (p clipped to [eps, 1 - eps])."""

    def weighted(self, p: Probs, w: F64) -> Score:
        eps = np.finfo(np.float64).eps
        true_p = np.clip(p.matrix[np.arange(p.truth.size), p.truth], eps, 1 - eps)
        return Score(
            number=float(-(np.log(true_p) * w).sum() / w.sum()),
            explanation=f"natural log over {len(p.classes)} classes, {fmt(w.sum())} records",
        )


class Brier(ProbMetric):
    """Brier score: mean squared error of p(positive); for 3+ classes, summed over classes."""

    def __init__(self, *, positive: str | None = None) -> None:
        self.positive = positive

    def weighted(self, p: Probs, w: F64) -> Score:
        if len(p.classes) > 2:
            onehot = p.truth[:, None] == np.arange(len(p.classes))[None, :]
            value = float(np.average(((onehot - p.matrix) ** 2).sum(axis=1), weights=w))
            return Score(number=value, explanation=f"summed over {len(p.classes)} classes")
        y, score, pos = _binary(p, self.positive)
        value = float(np.average((y - score) ** 2, weights=w))
        return Score(number=value, explanation=f"positive label {pos!r}")


class Ece(ProbMetric):
    """Expected calibration error over equal-width confidence bins.

    Two classes: confidence p(positive) against the positive rate; more: the top label's
    probability against accuracy. Bins split [0, 1] into ``bins`` equal parts, right edges
    inclusive (the first bin also holds 0), as scikit-learn's ``calibration_curve``.
    """

    def __init__(self, *, bins: int = 10, positive: str | None = None) -> None:
        check_at_least("ece", "bins", bins, 1)
        self.bins = bins
        self.positive = positive

    def weighted(self, p: Probs, w: F64) -> Score:
        if len(p.classes) > 2:
            conf = p.matrix.max(axis=1)
            hit = (p.matrix.argmax(axis=1) == p.truth).astype(np.float64)
            how = "top-label confidence vs accuracy"
        else:
            y, conf, pos = _binary(p, self.positive)
            hit = y.astype(np.float64)
            how = f"p({pos!r}) vs positive rate"
        edges = np.linspace(0.0, 1.0, self.bins + 1)
        ids = np.searchsorted(edges[1:-1], conf)
        gap = np.bincount(ids, weights=hit * w, minlength=self.bins) - np.bincount(
            ids, weights=conf * w, minlength=self.bins
        )
        return Score(
            number=float(np.abs(gap).sum() / w.sum()),
            explanation=f"{self.bins} equal-width bins on [0, 1], {how}",
        )
