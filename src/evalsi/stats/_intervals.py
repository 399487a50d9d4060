"""Closed-form confidence intervals: Wilson for proportions, t for means, cluster-robust t."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
import scipy.special as sc

from evalsi.core import Interval
from evalsi.stats._arrays import Values, as_values, check_level


def normal_quantile(p: float) -> float:
    """The standard normal quantile (inverse CDF) at ``p``."""
    return float(sc.ndtri(p))


def t_quantile(p: float, df: float) -> float:
    """The Student t quantile (inverse CDF) at ``p`` with ``df`` degrees of freedom."""
    return float(sc.stdtrit(df, p))


def wilson(successes: int, n: int, level: float = 0.95) -> Interval:
    """Wilson score interval for a binomial proportion.

    Preferred over the normal (Wald) interval because it keeps close to nominal coverage for
    small ``n`` and for proportions near 0 or 1, and never leaves [0, 1].

    Args:
        successes: Number of successes, ``0 <= successes <= n``.
        n: Number of trials. With ``n == 0`` the interval is undefined and both bounds are None.
        level: Confidence level, strictly between 0 and 1.

    Returns:
        The interval with method ``"wilson"``.

    Raises:
        ValueError: If the counts or the level are out of range.

    Example:
        >>> ci = wilson(8, 10)
        >>> round(ci.low, 4), round(ci.high, 4)
        (0.4902, 0.9433)
    """
    level = check_level(level)
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return Interval(None, None, "wilson", level)
    z = normal_quantile(0.5 + level / 2)
    z2 = z * z
    p = successes / n
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # At p=0 (p=1) the lower (upper) bound is exactly 0 (1) mathematically; rounding would leave
    # it a hair inside, so that "all passed" would not reach 1. Elsewhere clip rounding noise.
    low = 0.0 if successes == 0 else min(max(center - half, 0.0), 1.0)
    high = 1.0 if successes == n else min(max(center + half, 0.0), 1.0)
    return Interval(low, high, "wilson", level)


def t_interval(values: Values, level: float = 0.95) -> Interval:
    """Student t interval for the mean of independent values.

    Args:
        values: The observations (finite numbers).
        level: Confidence level, strictly between 0 and 1.

    Returns:
        The interval with method ``"t"``: both bounds None with fewer than two values, and
        ``[mean, mean]`` when all values are equal.

    Raises:
        ValueError: If a value is not finite or the level is out of range.

    Example:
        >>> ci = t_interval([1.0, 2.0, 3.0, 4.0])
        >>> round(ci.low, 4), round(ci.high, 4)
        (0.4457, 4.5543)
    """
    level = check_level(level)
    x = as_values(values)
    n = x.size
    if n < 2:
        return Interval(None, None, "t", level)
    return t_interval_from_moments(n, float(np.mean(x)), float(np.std(x, ddof=1)), level)


def t_interval_from_moments(n: int, mean: float, std: float, level: float = 0.95) -> Interval:
    """The t interval from ``n``, the mean and the sample standard deviation (ddof=1).

    What a streaming summary uses, so values need not be kept.

    Example:
        >>> ci = t_interval_from_moments(4, 2.5, 1.2909944487358056)
        >>> round(ci.low, 4), round(ci.high, 4)
        (0.4457, 4.5543)
    """
    level = check_level(level)
    if n < 2:
        return Interval(None, None, "t", level)
    half = t_quantile(0.5 + level / 2, n - 1) * std / math.sqrt(n)
    return Interval(mean - half, mean + half, "t", level)


def clustered_interval(
    values: Values, clusters: Sequence[Hashable], level: float = 0.95
) -> Interval:
    """t interval for the mean with a cluster-robust (CR1) standard error.

    Use it when observations share a cluster key (several trials of one sample, several
    questions about one document): they are correlated, and the plain t interval would be too
    narrow. The variance of the mean is

        V = G/(G-1) · (N-1)/(N-K) · Σ_g (Σ_{i∈g} (x_i - x̄))² / N²,   with K = 1,

    which is the variance statsmodels reports for OLS on a constant with
    ``cov_type="cluster"``. The quantile is Student t with G-1 degrees of freedom, as statsmodels
    does when fitted with ``use_t=True``; statsmodels' own default (``use_t=False``) uses the
    normal quantile, which is too narrow when there are few clusters.

    Args:
        values: The observations (finite numbers).
        clusters: One cluster key per observation, any hashable value.
        level: Confidence level, strictly between 0 and 1.

    Returns:
        The interval with method ``"cluster-t"``; both bounds are None with fewer than two
        clusters.

    Raises:
        ValueError: If ``values`` and ``clusters`` differ in length, a value is not finite, or
            the level is out of range.

    Example:
        >>> ci = clustered_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], ["a", "a", "b", "b", "c", "c"])
        >>> round(ci.low, 4), round(ci.high, 4)
        (-1.4683, 8.4683)
    """
    level = check_level(level)
    x = as_values(values)
    if len(clusters) != x.size:
        raise ValueError(
            f"values and clusters must have the same length, got {x.size} and {len(clusters)}"
        )
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), np.intp, x.size)
    g = len(index)
    if g < 2:
        return Interval(None, None, "cluster-t", level)
    sizes = np.bincount(codes, minlength=g)
    sums = np.bincount(codes, weights=x, minlength=g)
    return clustered_interval_from_sums(sizes, sums, level)


def clustered_interval_from_sums(sizes: Values, sums: Values, level: float = 0.95) -> Interval:
    """``clustered_interval`` from each cluster's size and sum, so values need not be kept.

    The CR1 variance only needs, per cluster g, Σ_{i∈g}(x_i - x̄) = S_g - n_g·x̄.

    Example:
        >>> ci = clustered_interval_from_sums([2, 2, 2], [3.0, 7.0, 11.0])
        >>> round(ci.low, 4), round(ci.high, 4)
        (-1.4683, 8.4683)
    """
    level = check_level(level)
    n_g = np.asarray(sizes, dtype=float)
    s_g = np.asarray(sums, dtype=float)
    g = n_g.size
    if g < 2:
        return Interval(None, None, "cluster-t", level)
    n = float(n_g.sum())
    mean = float(s_g.sum()) / n
    residual_sums = s_g - n_g * mean
    # (N-1)/(N-K) is 1 for K=1; kept out of the product on purpose.
    variance = g / (g - 1) * float(np.sum(residual_sums**2)) / (n * n)
    half = t_quantile(0.5 + level / 2, g - 1) * math.sqrt(variance)
    return Interval(mean - half, mean + half, "cluster-t", level)
