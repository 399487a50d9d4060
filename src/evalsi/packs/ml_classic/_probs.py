"""Probability metrics: ROC-AUC, average precision, log-loss, Brier score and expected
calibration error. Each equals scikit-learn's function (ECE: its ``calibration_curve`` bins).

With two classes the score is p(positive); with more, ROC-AUC and average precision are
one-vs-rest averages, log-loss and Brier use the whole probability row, ECE the top label.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.stats import rankdata

from evalsi.core import ParamError, Score
from evalsi.packs.ml_classic._arrays import Probs, default_positive, probs
from evalsi.packs.ml_classic._base import ProbMetric, check_choice
from evalsi.packs.ml_classic._extract import Mapped

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


def _auc(y: Bools, score: F64) -> float:
    """ROC-AUC as the Mann-Whitney U statistic (ties count one half): the ROC curve's area."""
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    ranks = rankdata(score)  # average ranks for ties
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _average_precision(y: Bools, score: F64) -> float:
    """sum over thresholds of (R_n - R_n-1) * P_n, thresholds at each distinct score."""
    order = np.argsort(score, kind="mergesort")[::-1]
    s, hit = score[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]  # last index of each distinct score
    tps = np.cumsum(hit)[last].astype(np.float64)
    precision = tps / (last + 1)
    recall = tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def _ovr(p: Probs, fn: str, average: OvrAverage) -> float:
    k = len(p.classes)
    missing = sorted(set(p.classes) - {p.classes[i] for i in np.unique(p.truth)})
    if missing:
        raise ValueError(
            f"one-vs-rest needs every class of the probabilities in the reference; "
            f"{missing} never occur there"
        )
    onehot = p.truth[:, None] == np.arange(k)[None, :]
    if fn == "roc":
        sums = p.matrix.sum(axis=1)
        if not np.allclose(sums, 1.0):
            raise ValueError("multiclass ROC-AUC needs probabilities that sum to 1 on every record")
        per_class = np.array([_auc(onehot[:, j], p.matrix[:, j]) for j in range(k)])
    else:
        per_class = np.array([_average_precision(onehot[:, j], p.matrix[:, j]) for j in range(k)])
    if average == "weighted":
        return float(np.average(per_class, weights=onehot.sum(axis=0)))
    return float(per_class.mean())


class _Ranking(ProbMetric):
    fn = "roc"

    def __init__(self, *, positive: str | None = None, average: OvrAverage = "macro") -> None:
        check_choice(self.fn, "average", average, ("macro", "weighted"))
        self.positive = positive
        self.average = average

    def reduce(self, values: Sequence[Mapped]) -> Score:
        p = probs(values)
        if len(p.classes) > 2:
            value = _ovr(p, self.fn, self.average)
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
        value = _auc(y, score) if self.fn == "roc" else _average_precision(y, score)
        return Score(number=value, explanation=f"positive label {pos!r}, {y.size} records")


class RocAuc(_Ranking):
    """Area under the ROC curve from p(positive); one-vs-rest (macro) for more classes."""

    fn = "roc"


class PrAuc(_Ranking):
    """Average precision (area under the precision-recall curve, step-wise, no interpolation)."""

    fn = "ap"


class LogLoss(ProbMetric):
    """Mean negative log-likelihood of the reference label (p clipped to [eps, 1 - eps])."""

    def reduce(self, values: Sequence[Mapped]) -> Score:
        p = probs(values)
        eps = np.finfo(np.float64).eps
        true_p = np.clip(p.matrix[np.arange(p.truth.size), p.truth], eps, 1 - eps)
        return Score(
            number=float(-np.log(true_p).mean()),
            explanation=f"natural log over {len(p.classes)} classes, {p.truth.size} records",
        )


class Brier(ProbMetric):
    """Brier score: mean squared error of p(positive); for 3+ classes, summed over classes."""

    def __init__(self, *, positive: str | None = None) -> None:
        self.positive = positive

    def reduce(self, values: Sequence[Mapped]) -> Score:
        p = probs(values)
        if len(p.classes) > 2:
            onehot = p.truth[:, None] == np.arange(len(p.classes))[None, :]
            value = float(((onehot - p.matrix) ** 2).sum(axis=1).mean())
            return Score(number=value, explanation=f"summed over {len(p.classes)} classes")
        y, score, pos = _binary(p, self.positive)
        value = float(((y - score) ** 2).mean())
        return Score(number=value, explanation=f"positive label {pos!r}")


class Ece(ProbMetric):
    """Expected calibration error over equal-width confidence bins.

    Two classes: confidence p(positive) against the positive rate; more: the top label's
    probability against accuracy. Bins split [0, 1] into ``bins`` equal parts, right edges
    inclusive (the first bin also holds 0), as scikit-learn's ``calibration_curve``.
    """

    def __init__(self, *, bins: int = 10, positive: str | None = None) -> None:
        if bins < 1:
            raise ParamError(f"ece: param 'bins' must be >= 1, got {bins}")
        self.bins = bins
        self.positive = positive

    def reduce(self, values: Sequence[Mapped]) -> Score:
        p = probs(values)
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
        gap = np.bincount(ids, weights=hit, minlength=self.bins) - np.bincount(
            ids, weights=conf, minlength=self.bins
        )
        return Score(
            number=float(np.abs(gap).sum() / conf.size),
            explanation=f"{self.bins} equal-width bins on [0, 1], {how}",
        )
