"""Turn mapped records into numpy arrays: encoded labels, a confusion matrix, a probability matrix.

This is the only place that walks the per-record values (to unpack them); the metrics
themselves are whole-array numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from evalsi.packs.ml_classic._extract import Mapped

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class Labels:
    """True and predicted labels encoded against ``classes`` (sorted, like scikit-learn)."""

    classes: list[str]
    truth: Ints
    pred: Ints

    def confusion(self) -> npt.NDArray[np.int64]:
        """Rows are true labels, columns predicted labels."""
        k = len(self.classes)
        flat = np.bincount(self.truth * k + self.pred, minlength=k * k)
        return flat.reshape(k, k).astype(np.int64)


@dataclass(frozen=True, slots=True)
class Probs:
    """True labels and a (records x classes) probability matrix over sorted ``classes``."""

    classes: list[str]
    truth: Ints
    matrix: Floats


def labels(values: Sequence[Mapped]) -> Labels:
    """Encoded labels; a record without a predicted label predicts its most probable class
    (ties: the first in sorted order, as numpy's argmax)."""
    truth = np.array([v[0] for v in values], dtype=str)
    pred = np.array(["" if v[1] is None else v[1] for v in values], dtype=object)
    unlabelled = np.array([v[1] is None for v in values], dtype=bool)
    if unlabelled.any():
        p = probs(values)
        best = np.array(p.classes, dtype=object)[p.matrix.argmax(axis=1)]
        pred[unlabelled] = best[unlabelled]
    pred = pred.astype(str)
    classes, inverse = np.unique(np.concatenate([truth, pred]), return_inverse=True)
    n = len(truth)
    return Labels([str(c) for c in classes], inverse[:n], inverse[n:])


def default_positive(classes: list[str], positive: str | None) -> str:
    """The positive label: the param, else ``"1"`` when present, else the greatest label."""
    if positive is not None:
        return positive
    return "1" if "1" in classes else classes[-1]


def probs(values: Sequence[Mapped]) -> Probs:
    """The probability matrix; a class a record leaves out gets the remaining mass when it is
    the only one left out (binary outputs often give just p(positive)), else 0."""
    truth = np.array([v[0] for v in values], dtype=str)
    keys = [k for v in values for k in (v[2] or {})]
    given = np.array([p for v in values for p in (v[2] or {}).values()], dtype=np.float64)
    if np.isnan(given).any():
        bad = int(np.isnan(given).sum())
        raise ValueError(f"{bad} probabilities are NaN; every probability must be a number")
    if given.size and (given.min() < 0 or given.max() > 1):
        raise ValueError(
            f"probabilities must lie in [0, 1], got values from {given.min()} to {given.max()}"
        )
    classes, inverse = np.unique(
        np.concatenate([truth, np.array(keys, dtype=str)]), return_inverse=True
    )
    n, k = len(truth), len(classes)
    rows = np.repeat(np.arange(n), [len(v[2] or {}) for v in values])
    cols = inverse[n:]
    matrix = np.zeros((n, k), dtype=np.float64)
    present = np.zeros((n, k), dtype=bool)
    matrix[rows, cols] = given
    present[rows, cols] = True
    one_left = (k - present.sum(axis=1)) == 1
    if one_left.any():
        rest = np.maximum(0.0, 1.0 - matrix.sum(axis=1))
        fill = one_left[:, None] & ~present
        matrix[fill] = np.broadcast_to(rest[:, None], (n, k))[fill]
    return Probs([str(c) for c in classes], inverse[:n], matrix)
