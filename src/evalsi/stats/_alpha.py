"""Krippendorff's alpha: agreement of any number of raters, with missing ratings, at four levels.

alpha = 1 - D_o / D_e, the disagreement observed within units over the disagreement expected by
chance, from the coincidences of pairable values (Krippendorff 2011, "Computing Krippendorff's
alpha-reliability"). It equals the ``krippendorff`` package (tested, with the paper's example).

Two computations, chosen by level:

- **interval** (the default, and the one numeric scores use): the squared difference decomposes
  into per-unit sums (count, sum, sum of squares about the unit's mean), so nothing grows with
  the number of distinct values; continuous scores on thousands of records stay cheap.
- **nominal, ordinal, ratio**: a units x values count matrix and a values x values distance
  matrix (ordinal distances depend on the value frequencies, hence a coincidence matrix per
  resample). Meant for categories and short scales: the bootstrap refuses more than
  ``MAX_VALUES`` distinct values (``MAX_ORDINAL_VALUES`` for ordinal).

Both take unit weights, one row per bootstrap resample (how many times it holds each unit), so
the interval resamples units for a whole batch of resamples at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from evalsi.core import Interval
from evalsi.stats._arrays import FloatArray
from evalsi.stats._bootstrap import index_bootstrap

AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
ALPHA_LEVELS: tuple[AlphaLevel, ...] = ("nominal", "ordinal", "interval", "ratio")

MAX_VALUES = 1000
"""Distinct values beyond which a nominal or ratio alpha gets no bootstrap interval (each
resample multiplies by a values x values matrix); interval alpha has no such limit."""

MAX_ORDINAL_VALUES = 64
"""The same for ordinal alpha, whose resamples each need a values x values coincidence matrix."""

_FLAT = 1e-12
"""Relative spread below which interval data count as a single value (alpha undefined)."""

Rows = Callable[[FloatArray], FloatArray]
"""Alpha for each row of unit weights; NaN where it is undefined."""


def _prepare(data: ArrayLike, level: AlphaLevel) -> tuple[int, Rows, int]:
    """Pairable units, alpha per row of unit weights, and distinct values (0 for interval)."""
    if level not in ALPHA_LEVELS:
        raise ValueError(f"level must be one of {', '.join(ALPHA_LEVELS)}, got {level!r}")
    matrix = np.asarray(data, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"reliability data must be raters x units (2-D), got {matrix.shape}")
    if np.isinf(matrix).any():
        raise ValueError("reliability data must be finite numbers (NaN marks a missing value)")
    return (*_interval(matrix), 0) if level == "interval" else _categorical(matrix, level)


def _interval(matrix: FloatArray) -> tuple[int, Rows]:
    present = ~np.isnan(matrix)
    keep = present.sum(axis=0) >= 2  # a unit rated once has no pair to (dis)agree on
    p = present[:, keep]
    m = p.sum(axis=0).astype(np.float64)
    x = np.where(p, matrix[:, keep], 0.0)
    if m.size:  # alpha does not depend on location; centring keeps the sums below accurate
        x = np.where(p, x - x.sum() / m.sum(), 0.0)
    total = x.sum(axis=0)
    squares = (x * x).sum(axis=0)
    within = (np.where(p, x - total / np.maximum(m, 1.0), 0.0) ** 2).sum(axis=0)
    # Within a unit, the sum over ordered pairs of (v_i - v_j)^2 is 2 m (sum of squares about
    # the unit's mean); over every pairable value it is 2 n (spread about the overall mean).
    observed_per_unit = 2.0 * m * within / np.maximum(m - 1.0, 1.0)

    def rows(weights: FloatArray) -> FloatArray:
        n = weights @ m
        s1, s2 = weights @ total, weights @ squares
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = s2 - s1 * s1 / n
            expected = 2.0 * n * spread
            alpha = 1.0 - (n - 1.0) * (weights @ observed_per_unit) / expected
        return np.where((n > 0) & (spread > _FLAT * s2), alpha, np.nan)

    return int(m.size), rows


def _counts(matrix: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(pairable units, values): how many raters gave each value to the unit; the values,
    sorted."""
    present = ~np.isnan(matrix)
    values, codes = np.unique(matrix[present], return_inverse=True)
    counts = np.zeros((matrix.shape[1], values.size))
    np.add.at(counts, (np.nonzero(present)[1], codes), 1.0)
    return counts[counts.sum(axis=1) >= 2], values


def _distances(values: FloatArray, level: AlphaLevel) -> FloatArray:
    """delta^2 between values for the nominal and ratio levels."""
    diff: FloatArray = np.subtract.outer(values, values)
    if level == "nominal":
        return np.asarray(diff != 0, dtype=np.float64)
    total = np.add.outer(values, values)
    ratio = np.divide(diff, total, out=np.zeros_like(diff), where=total != 0)
    return ratio**2


def _ordinal(marginals: FloatArray) -> FloatArray:
    """Ordinal delta^2 per row of marginals (rows, values): (the sum of n_g for g from c to k,
    minus half of n_c + n_k) squared, which depends on the data's own value frequencies."""
    cum = np.cumsum(marginals, axis=-1)
    index = np.arange(marginals.shape[1])
    # for c <= k, sum_{g=c..k} n_g = cum[k] - cum[c] + n_c (and symmetrically for c > k)
    first = np.where(index[:, None] <= index[None, :], marginals[:, :, None], marginals[:, None, :])
    span = np.abs(cum[:, None, :] - cum[:, :, None]) + first
    half = (marginals[:, :, None] + marginals[:, None, :]) / 2.0
    out: FloatArray = (span - half) ** 2
    return out


def _categorical(matrix: FloatArray, level: AlphaLevel) -> tuple[int, Rows, int]:
    c, values = _counts(matrix)
    m = c.sum(axis=1)
    v = c.shape[1]
    fixed = None if level == "ordinal" else _distances(values, level)

    def rows(weights: FloatArray) -> FloatArray:
        marginals = weights @ c  # n_c per row
        n = marginals.sum(axis=1)
        if fixed is None:
            # coincidences per unit, (outer(c, c) - diag(c)) / (m - 1), summed with the weights
            pairs = c[:, :, None] * c[:, None, :] - np.eye(v)[None] * c[:, :, None]
            per_unit = (pairs / (m - 1.0)[:, None, None]).reshape(c.shape[0], v * v)
            coincidences = (weights @ per_unit).reshape(-1, v, v)
            delta = _ordinal(marginals)
            observed = (coincidences * delta).sum(axis=(1, 2))
            expected = np.einsum("rc,rck,rk->r", marginals, delta, marginals)
        else:
            observed = weights @ (((c @ fixed) * c).sum(axis=1) / (m - 1.0))  # diag(delta) = 0
            expected = ((marginals @ fixed) * marginals).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(expected > 0, 1.0 - (n - 1.0) * observed / expected, np.nan)

    return c.shape[0], rows, v


def krippendorff_alpha(data: ArrayLike, *, level: AlphaLevel = "interval") -> float | None:
    """Krippendorff's alpha of reliability data (= the ``krippendorff`` package).

    ``data`` is raters x units with NaN for a missing rating (any number of raters, missing
    values allowed). Categories must be numbers: code labels as integers for ``"nominal"``.
    Units rated fewer than twice are left out (they hold no pair). None when the pairable data
    hold a single value (no expected disagreement: alpha is 0/0).

    Example (Krippendorff 2011, "Computing Krippendorff's alpha-reliability", 4 observers,
    12 units):
        >>> nan = float("nan")
        >>> data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        ...         [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        ...         [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        ...         [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
        >>> round(krippendorff_alpha(data, level="nominal"), 3)
        0.743
    """
    count, rows, _ = _prepare(data, level)
    if not count:
        return None
    value = float(rows(np.ones((1, count)))[0])
    return None if math.isnan(value) else value


def alpha_interval(
    data: ArrayLike,
    *,
    level: AlphaLevel = "interval",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """A percentile bootstrap interval for ``krippendorff_alpha``, resampling pairable units.

    Raises:
        ValueError: For nominal or ratio data with more than ``MAX_VALUES`` distinct values,
            or ordinal data with more than ``MAX_ORDINAL_VALUES``.
    """
    count, rows, distinct = _prepare(data, level)
    limit = MAX_ORDINAL_VALUES if level == "ordinal" else MAX_VALUES
    if distinct > limit:  # never for interval data (0 distinct values counted)
        raise ValueError(
            f"a {level} bootstrap over {distinct} distinct values is not offered (at most "
            f"{limit}); use the interval level for fine-grained scores"
        )

    def statistic(resamples: FloatArray) -> FloatArray:
        idx = resamples.astype(np.int64)
        shifted = idx + (np.arange(idx.shape[0]) * count)[:, None]
        weights = np.bincount(shifted.ravel(), minlength=idx.shape[0] * count)
        return rows(weights.reshape(-1, count).astype(np.float64))

    return index_bootstrap(count, statistic, confidence, n_resamples, seed)
