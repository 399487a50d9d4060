"""Label metrics: accuracy, balanced accuracy, precision / recall / F1, MCC, Cohen's kappa and
the confusion matrix. Each equals scikit-learn's function of the same name (zero_division=0),
also with ``sample_weight``: every one is a function of the weighted confusion matrix."""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from evalsi.core import Score
from evalsi.packs._declare import check_choice
from evalsi.packs.ml_classic._arrays import Labels, default_positive, label_weights
from evalsi.packs.ml_classic._base import AVERAGES, Weighted, check_weights, fmt
from evalsi.packs.ml_classic._batch import map_label_batch, merge_labels, unbatch_labels
from evalsi.packs.ml_classic._extract import map_labels

Average = Literal["binary", "micro", "macro", "weighted"]
Kind = Literal["precision", "recall", "f1"]
F64 = npt.NDArray[np.float64]


def _div(num: F64, den: F64) -> F64:
    return np.divide(num, den, out=np.zeros_like(num), where=den != 0)


class LabelMetric(Weighted[Labels]):
    """map(): (truth, predicted label, probabilities); the label is the argmax when absent."""

    map = staticmethod(map_labels)  # the runner calls it once per record: no extra frame
    map_batch = staticmethod(map_label_batch)  # a whole batch at once (``_batch``)
    unbatch = staticmethod(unbatch_labels)
    prepare = staticmethod(merge_labels)

    def reduce_weighted(self, prepared: Labels, weights: F64) -> Score:
        lab, w = label_weights(prepared, check_weights(weights, len(prepared.truth)))
        classes, c = lab.confusion(w)
        return self.from_confusion(classes, c)

    def from_confusion(self, classes: list[str], c: F64) -> Score:  # pragma: no cover
        raise NotImplementedError


class Accuracy(LabelMetric):
    """Fraction of records whose predicted label equals the reference label."""

    def from_confusion(self, classes: list[str], c: F64) -> Score:
        correct, n = float(np.trace(c)), float(c.sum())
        return Score(number=correct / n, explanation=f"{fmt(correct)} of {fmt(n)} labels correct")


class BalancedAccuracy(LabelMetric):
    """Mean per-class recall over the classes present in the reference."""

    def from_confusion(self, classes: list[str], c: F64) -> Score:
        support = c.sum(axis=1)
        recalls = np.diag(c)[support > 0] / support[support > 0]
        return Score(
            number=float(recalls.mean()),
            explanation=f"mean recall over {recalls.size} classes present in the reference",
        )


class _PRF(LabelMetric):
    kind: Kind = "f1"

    def __init__(self, *, average: Average = "binary", positive: str | None = None) -> None:
        check_choice(self.kind, "average", average, AVERAGES)
        self.average = average
        self.positive = positive

    def from_confusion(self, classes: list[str], c: F64) -> Score:
        tp, pred_sum, true_sum = np.diag(c), c.sum(axis=0), c.sum(axis=1)
        avg = self.average
        where = f"average={avg}"
        if avg == "binary":
            if len(classes) > 2:
                raise ValueError(
                    f"{len(classes)} labels ({_short(classes)}) but average='binary'; "
                    "set param average to micro, macro or weighted"
                )
            pos = default_positive(classes, self.positive)
            if pos not in classes and len(classes) == 2:
                raise ValueError(f"positive label {pos!r} is not one of {_short(classes)}")
            keep = np.array([x == pos for x in classes], dtype=bool)
            tp, pred_sum, true_sum = tp[keep], pred_sum[keep], true_sum[keep]
            where = f"positive label {pos!r}"
        elif avg == "micro":
            tp, pred_sum, true_sum = (x.sum(keepdims=True) for x in (tp, pred_sum, true_sum))
        if tp.size == 0:  # binary, positive label absent everywhere
            tp = pred_sum = true_sum = np.zeros(1)
        per_class = _score(self.kind, tp, pred_sum, true_sum)
        if avg == "weighted":
            total = true_sum.sum()
            value = float((per_class * true_sum).sum() / total) if total else 0.0
        else:
            value = float(per_class.mean())
        n = fmt(float(c.sum()))
        return Score(number=value, explanation=f"{self.kind} over {n} records, {where}")


def _score(kind: Kind, tp: F64, pred_sum: F64, true_sum: F64) -> F64:
    if kind == "precision":
        return _div(tp, pred_sum)
    if kind == "recall":
        return _div(tp, true_sum)
    return _div(2 * tp, pred_sum + true_sum)  # 2tp / (2tp + fp + fn)


def _short(classes: list[str], limit: int = 8) -> str:
    shown = ", ".join(repr(c) for c in classes[:limit])
    return shown + (", …" if len(classes) > limit else "")


class Precision(_PRF):
    """Precision tp / (tp + fp): binary for the positive label, or micro/macro/weighted."""

    kind: Kind = "precision"


class Recall(_PRF):
    """Recall tp / (tp + fn): binary for the positive label, or micro/macro/weighted."""

    kind: Kind = "recall"


class F1(_PRF):
    """F1, the harmonic mean of precision and recall: binary or micro/macro/weighted."""

    kind: Kind = "f1"


class Mcc(LabelMetric):
    """Matthews correlation coefficient over all classes (0 when undefined, like scikit-learn)."""

    def from_confusion(self, classes: list[str], c: F64) -> Score:
        t_sum, p_sum = c.sum(axis=1), c.sum(axis=0)
        n, correct = c.sum(), np.trace(c)
        # (a * b).sum(), not a @ b: a BLAS call may wake its thread pool, slow on a busy host
        cov_tp = correct * n - (t_sum * p_sum).sum()
        cov_pp = n * n - (p_sum * p_sum).sum()
        cov_tt = n * n - (t_sum * t_sum).sum()
        if cov_pp * cov_tt == 0:
            return Score(number=0.0, explanation="undefined (one class only on a side): 0")
        return Score(
            number=float(cov_tp / np.sqrt(cov_tt * cov_pp)), explanation=f"{fmt(n)} records"
        )


class CohenKappa(LabelMetric):
    """Cohen's kappa between predicted and reference labels (weights: none, linear, quadratic)."""

    def __init__(self, *, weights: Literal["none", "linear", "quadratic"] = "none") -> None:
        check_choice("cohen-kappa", "weights", weights, ("none", "linear", "quadratic"))
        self.weights = weights

    def from_confusion(self, classes: list[str], c: F64) -> Score:
        k = c.shape[0]
        expected = np.outer(c.sum(axis=0), c.sum(axis=1)) / c.sum()
        idx = np.arange(k)
        gap = np.abs(idx[:, None] - idx[None, :]).astype(np.float64)
        w = {"none": (gap > 0).astype(np.float64), "linear": gap, "quadratic": gap**2}[self.weights]
        den = float((w * expected).sum())
        if den == 0:
            raise ValueError(
                "Cohen's kappa is undefined: chance disagreement is 0 "
                "(reference and predictions use one label only)"
            )
        return Score(
            number=1.0 - float((w * c).sum()) / den,
            explanation=f"weights={self.weights}, labels in sorted order",
        )


class ConfusionMatrix(LabelMetric):
    """The confusion matrix: rows are reference labels, columns predicted labels (sorted).

    Counts are integers; with fractional weights they are the weighted counts.
    """

    def from_confusion(self, classes: list[str], c: F64) -> Score:
        whole = bool(np.all(c == np.round(c)))
        matrix = c.astype(np.int64).tolist() if whole else c.tolist()
        return Score(
            structured={"labels": list(classes), "matrix": matrix},
            explanation="rows: reference label, columns: predicted label, labels sorted",
        )
