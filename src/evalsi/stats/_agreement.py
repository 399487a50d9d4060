"""Agreement between two raters' labels: Cohen's kappa (see also ``_alpha``, ``_correlation``).

Judge calibration compares a judge model with human raters, so these statistics must be the
ones reviewers already trust: each equals its reference implementation (scikit-learn's
``cohen_kappa_score``, the ``krippendorff`` package, ``scipy.stats.pearsonr`` and ``spearmanr``),
which the tests check on published examples and real data. Only ``scipy.special`` is used here
(see docs/decisions/0002): ``scipy.stats`` costs a second import.

A statistic that is undefined on its data (kappa when both raters use one same label, a
correlation with a constant input, alpha when the data hold a single value) is ``None``, never
NaN: a caller must say why there is no number, not average it in.

Intervals: kappa, alpha and Spearman's rho get a percentile bootstrap over records (for alpha,
over units), each resample's statistic computed at once for a whole batch of resamples
(``index_bootstrap``, on ``bootstrap_distribution``). Resamples on which the statistic is
undefined are left out.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from evalsi.core import Interval
from evalsi.stats._arrays import FloatArray
from evalsi.stats._bootstrap import index_bootstrap

KappaWeights = Literal["linear", "quadratic"] | None


def _categories(*columns: Sequence[Hashable]) -> tuple[list[NDArray[np.int64]], int]:
    """Integer codes in the sorted order of the labels (the order weighted kappa depends on)."""
    labels = sorted({v for column in columns for v in column})  # type: ignore[type-var]
    index = {v: i for i, v in enumerate(labels)}
    return [np.fromiter((index[v] for v in c), np.int64, len(c)) for c in columns], len(labels)


def _weights(k: int, weights: KappaWeights) -> FloatArray:
    grid = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(np.float64)
    if weights is None:
        return (grid > 0).astype(np.float64)
    if weights == "linear":
        return grid
    if weights == "quadratic":
        return grid**2
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def _kappa_rows(confusion: FloatArray, w: FloatArray) -> FloatArray:
    """Kappa of each (rows, k, k) confusion matrix; NaN where it is undefined."""
    total = confusion.sum(axis=(1, 2))
    expected = confusion.sum(axis=2)[:, :, None] * confusion.sum(axis=1)[:, None, :]
    observed = (confusion * w).sum(axis=(1, 2))
    chance = (expected * w).sum(axis=(1, 2)) / np.where(total > 0, total, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(chance > 0, 1.0 - observed / chance, np.nan)


def _pair_check(a: Sequence[Any], b: Sequence[Any]) -> int:
    if len(a) != len(b):
        raise ValueError(f"the two raters must rate the same items: {len(a)} != {len(b)} values")
    if not len(a):
        raise ValueError("no items to compare")
    return len(a)


def cohen_kappa(
    a: Sequence[Hashable], b: Sequence[Hashable], *, weights: KappaWeights = None
) -> float | None:
    """Cohen's kappa of two raters' labels on the same items (= sklearn ``cohen_kappa_score``).

    ``weights`` ``"linear"`` or ``"quadratic"`` weigh disagreements by their distance in the
    sorted order of the labels (for ordered labels). None when chance agreement is total (both
    raters gave every item one same label), where kappa is 0/0.

    Example:
        >>> round(cohen_kappa(["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15,
        ...                   ["y"] * 25 + ["n"] * 25), 3)
        0.4
    """
    _pair_check(a, b)
    (ca, cb), k = _categories(a, b)
    confusion = np.bincount(ca * k + cb, minlength=k * k).reshape(1, k, k).astype(np.float64)
    value = float(_kappa_rows(confusion, _weights(k, weights))[0])
    return None if math.isnan(value) else value


def kappa_interval(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    *,
    weights: KappaWeights = None,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """A percentile bootstrap interval for ``cohen_kappa``, resampling items with replacement."""
    n = _pair_check(a, b)
    (ca, cb), k = _categories(a, b)
    pairs = ca * k + cb
    w = _weights(k, weights)

    def statistic(rows: FloatArray) -> FloatArray:
        idx = rows.astype(np.int64)
        shifted = pairs[idx] + (np.arange(idx.shape[0]) * k * k)[:, None]
        counts = np.bincount(shifted.ravel(), minlength=idx.shape[0] * k * k)
        return _kappa_rows(counts.reshape(-1, k, k).astype(np.float64), w)

    return index_bootstrap(n, statistic, level, n_resamples, seed)
