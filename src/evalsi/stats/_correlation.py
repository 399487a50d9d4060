"""Correlation of two raters' scores: Pearson's r and Spearman's rho, as scipy computes them.

``pearson`` gives scipy's exact p-value (from the null Beta distribution of r) and its Fisher z
interval; ``spearman`` the t-distribution p-value of ``scipy.stats.spearmanr`` and a percentile
bootstrap interval over pairs, with the ranks of every resample computed at once. A correlation
with a constant input is None, never NaN (see ``_agreement``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from evalsi.core import Interval, lazy_module
from evalsi.stats._arrays import FloatArray, Values, as_values, check_level
from evalsi.stats._bootstrap import BOOTSTRAP, index_bootstrap
from evalsi.stats._intervals import normal_quantile

sc = lazy_module("scipy.special")  # imported at first use: a Score run starts without it


@dataclass(frozen=True, slots=True)
class Correlation:
    """A correlation coefficient with its two-sided p-value (no correlation) and interval."""

    value: float | None
    p_value: float | None
    ci: Interval
    n: int


def _pair_values(x: Values, y: Values) -> tuple[FloatArray, FloatArray]:
    xa, ya = as_values(x, "x"), as_values(y, "y")
    if xa.size != ya.size:
        raise ValueError(f"x and y must have the same length: {xa.size} != {ya.size}")
    if xa.size < 2:
        raise ValueError("a correlation needs at least two pairs")
    return xa, ya


def _r(x: FloatArray, y: FloatArray) -> float | None:
    """Pearson's r as scipy computes it (scaled norms, clipped); None for a constant input."""
    if np.all(x == x[0]) or np.all(y == y[0]):
        return None
    xm, ym = x - x.mean(), y - y.mean()
    xmax, ymax = np.abs(xm).max(), np.abs(ym).max()
    normx = xmax * np.linalg.norm(xm / xmax)
    normy = ymax * np.linalg.norm(ym / ymax)
    return float(np.clip(np.dot(xm / normx, ym / normy), -1.0, 1.0))


def pearson(x: Values, y: Values, *, level: float = 0.95) -> Correlation:
    """Pearson's r with scipy's p-value (exact, from the null Beta distribution of r) and its
    Fisher z interval (``pearsonr(x, y).confidence_interval()``; needs n > 3).

    Example:
        >>> c = pearson([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
        >>> round(c.value, 3), round(c.p_value, 4)
        (0.8, 0.1041)
    """
    xa, ya = _pair_values(x, y)
    level = check_level(level)
    n = xa.size
    r = _r(xa, ya)
    none = Interval(None, None, "fisher-z", level)
    if r is None:
        return Correlation(None, None, none, n)
    if n == 2:
        return Correlation(float(round(r)), 1.0, none, n)
    a = n / 2.0 - 1.0
    p = float(min(1.0, 2.0 * sc.betaincc(a, a, (abs(r) + 1.0) / 2.0)))
    if n <= 3:
        return Correlation(r, p, none, n)
    with np.errstate(divide="ignore"):
        z = float(np.arctanh(r))
    h = normal_quantile(0.5 + level / 2.0) * math.sqrt(1.0 / (n - 3))
    ci = Interval(float(np.tanh(z - h)), float(np.tanh(z + h)), "fisher-z", level)
    return Correlation(r, p, ci, n)


def average_ranks(values: Values) -> FloatArray:
    """1-based ranks, ties sharing their average rank (``scipy.stats.rankdata``'s default)."""
    x = as_values(values)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mean_rank = ends - (counts - 1) / 2.0
    out: FloatArray = mean_rank[inverse].astype(np.float64)
    return out


def _rank_rows(codes: NDArray[np.int64], distinct: int) -> FloatArray:
    """Average ranks within each row of ``codes`` (dense value codes 0..distinct-1)."""
    rows = codes.shape[0]
    shifted = codes + (np.arange(rows) * distinct)[:, None]
    counts = np.bincount(shifted.ravel(), minlength=rows * distinct).reshape(rows, distinct)
    ends = np.cumsum(counts, axis=1)
    mean_rank = ends - (counts - 1) / 2.0
    out: FloatArray = np.take_along_axis(mean_rank, codes, axis=1)
    return out


def _r_rows(x: FloatArray, y: FloatArray) -> FloatArray:
    """Pearson's r of each row pair; NaN where a row is constant."""
    xm = x - x.mean(axis=1, keepdims=True)
    ym = y - y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xm * ym).sum(axis=1) / np.sqrt((xm**2).sum(axis=1) * (ym**2).sum(axis=1))
    clipped: FloatArray = np.clip(r, -1.0, 1.0)
    return clipped


def spearman(
    x: Values, y: Values, *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> Correlation:
    """Spearman's rho (Pearson's r of the average ranks) with scipy's t-distribution p-value
    (``spearmanr``) and a percentile bootstrap interval over pairs.

    Example:
        >>> round(spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]).value, 3)
        0.8
    """
    xa, ya = _pair_values(x, y)
    level = check_level(level)
    n = xa.size
    rho = _r(average_ranks(xa), average_ranks(ya))
    if rho is None:
        return Correlation(None, None, Interval(None, None, BOOTSTRAP, level), n)
    dof = n - 2
    p: float | None = None  # undefined with two pairs (scipy gives NaN)
    if dof > 0 and abs(rho) >= 1.0:
        p = 0.0
    elif dof > 0:
        t = rho * math.sqrt(max(dof / ((rho + 1.0) * (1.0 - rho)), 0.0))
        p = float(2.0 * sc.stdtr(dof, -abs(t)))
    _, cx = np.unique(xa, return_inverse=True)
    _, cy = np.unique(ya, return_inverse=True)
    dx, dy = int(cx.max()) + 1, int(cy.max()) + 1

    def statistic(rows: FloatArray) -> FloatArray:
        idx = rows.astype(np.int64)
        return _r_rows(_rank_rows(cx[idx], dx), _rank_rows(cy[idx], dy))

    return Correlation(rho, p, index_bootstrap(n, statistic, level, n_resamples, seed), n)
