"""Paired comparisons of two runs on the same samples: paired bootstrap and McNemar's test."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from evalsi.core import Interval, lazy_module
from evalsi.stats._arrays import Values, as_values, check_level
from evalsi.stats._bootstrap import bootstrap_distribution, degenerate
from evalsi.stats._intervals import wilson

sc = lazy_module("scipy.special")  # imported at first use: a Score run starts without it

# Below this many discordant pairs the chi-square approximation is poor; statsmodels and most
# textbooks switch to the exact binomial test there.
_EXACT_BELOW = 25


@dataclass(frozen=True, slots=True)
class PairedDelta:
    """The paired difference ``mean(b - a)`` of two runs over the same samples.

    Attributes:
        delta: ``mean(b - a)``; None when there are no pairs.
        interval: Percentile bootstrap interval for ``delta`` (method
            ``"paired-bootstrap-percentile"``).
        p_value: Two-sided bootstrap p-value for ``delta == 0``; None with fewer than two pairs.
        n: Number of pairs.
    """

    delta: float | None
    interval: Interval
    p_value: float | None
    n: int


@dataclass(frozen=True, slots=True)
class McNemar:
    """McNemar's test on paired pass/fail outcomes.

    Attributes:
        b01: Pairs where ``a`` failed and ``b`` passed.
        b10: Pairs where ``a`` passed and ``b`` failed.
        statistic: ``min(b01, b10)`` for the exact test; the continuity-corrected chi-square
            statistic ``(|b01 - b10| - 1)² / (b01 + b10)`` otherwise.
        p_value: Two-sided p-value for "a and b pass equally often".
        method: ``"exact"`` (binomial) or ``"chi2"``.
    """

    b01: int
    b10: int
    statistic: float
    p_value: float
    method: Literal["exact", "chi2"]


def paired_bootstrap(
    a: Values, b: Values, *, n_resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> PairedDelta:
    """Paired bootstrap for the mean difference between two runs on the same samples.

    Resampling the pairs, not each run on its own, keeps the per-sample correlation between the
    runs (an easy sample is easy for both), which makes the comparison far tighter than
    comparing two independent intervals.

    The p-value inverts the percentile interval: twice the smaller share of resampled deltas on
    either side of zero, with the usual +1 in numerator and denominator so that it is never
    exactly 0. It is below ``1 - level`` when (up to that +1) the interval excludes zero.

    Args:
        a: Per-sample values of the baseline run.
        b: Per-sample values of the candidate run, in the same sample order.
        n_resamples: Number of bootstrap resamples, at least 1.
        seed: Seed for ``np.random.default_rng``.
        level: Confidence level, strictly between 0 and 1.

    Returns:
        The delta ``mean(b - a)``, its interval, p-value and the number of pairs. With fewer
        than two pairs, or when every pair differs by the same amount (every resample gives
        the same delta, so resampling says nothing about spread), the interval bounds and the
        p-value are None; for pass/fail pairs ``newcombe_interval`` has an answer there.

    Raises:
        ValueError: If ``a`` and ``b`` differ in length, hold a non-finite value, or an option
            is out of range.

    Example:
        >>> r = paired_bootstrap([0, 0, 1, 0, 1, 0], [1, 0, 1, 1, 1, 1], seed=3)
        >>> round(r.delta, 4), r.n, r.interval.low >= 0.0
        (0.5, 6, True)
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    level = check_level(level)
    method = "paired-bootstrap-percentile"
    xa, xb = as_values(a, "a"), as_values(b, "b")
    if xa.size != xb.size:
        raise ValueError(f"a and b must have the same length, got {xa.size} and {xb.size}")
    d = xb - xa
    n = d.size
    if n == 0:
        return PairedDelta(None, Interval(None, None, method, level), None, 0)
    delta = float(np.mean(d))
    if n < 2:
        return PairedDelta(delta, Interval(None, None, method, level), None, n)

    boot = bootstrap_distribution(d, np.mean, n_resamples, np.random.default_rng(seed))
    if degenerate(boot):
        return PairedDelta(delta, Interval(None, None, method, level), None, n)
    low, high = np.percentile(boot, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    side = min(np.count_nonzero(boot <= 0.0), np.count_nonzero(boot >= 0.0))
    p_value = min(1.0, 2.0 * float(side + 1) / (n_resamples + 1))
    return PairedDelta(delta, Interval(float(low), float(high), method, level), p_value, n)


Bools = np.ndarray[tuple[int], np.dtype[np.bool_]]


def _paired_bools(a_passed: Sequence[bool], b_passed: Sequence[bool]) -> tuple[Bools, Bools]:
    """Both runs' pass/fail as boolean arrays of one length."""
    arrays: list[Bools] = []
    for name, values in (("a_passed", a_passed), ("b_passed", b_passed)):
        array = np.asarray(values)
        if array.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
        if array.size and not np.all((array == 0) | (array == 1)):
            raise ValueError(f"{name} must hold booleans (or 0/1)")
        arrays.append(array.astype(np.bool_).reshape(-1))
    xa, xb = arrays
    if xa.size != xb.size:
        raise ValueError(
            f"a_passed and b_passed must have the same length, got {xa.size} and {xb.size}"
        )
    return xa, xb


def mcnemar(
    a_passed: Sequence[bool], b_passed: Sequence[bool], *, exact: bool | None = None
) -> McNemar:
    """McNemar's test: do two runs on the same samples pass equally often?

    Only discordant pairs carry information. Matches
    ``statsmodels.stats.contingency_tables.mcnemar`` (with its default continuity correction)
    in statistic and p-value, except that with no discordant pair the chi-square variant
    returns statistic 0 and p-value 1 where statsmodels divides by zero.

    Args:
        a_passed: Pass/fail of the baseline run per sample.
        b_passed: Pass/fail of the candidate run, in the same sample order.
        exact: Use the exact binomial test (True) or the continuity-corrected chi-square (False).
            None picks exact when there are fewer than 25 discordant pairs.

    Returns:
        The discordant counts, statistic, two-sided p-value and method.

    Raises:
        ValueError: If the inputs differ in length or hold something other than booleans.

    Example:
        >>> r = mcnemar([True, True, False, False, True], [True, False, True, True, True])
        >>> r.b01, r.b10, r.method, r.p_value
        (2, 1, 'exact', 1.0)
    """
    xa, xb = _paired_bools(a_passed, b_passed)
    b01 = int(np.count_nonzero(~xa & xb))
    b10 = int(np.count_nonzero(xa & ~xb))
    discordant = b01 + b10
    if exact is None:
        exact = discordant < _EXACT_BELOW
    if exact:
        low = min(b01, b10)
        # Two-sided exact binomial test with p = 1/2: double the smaller tail, capped at 1
        # (the cap binds when b01 == b10).
        p_value = min(1.0, 2.0 * float(sc.bdtr(low, discordant, 0.5)))
        return McNemar(b01, b10, float(low), p_value, "exact")
    if discordant == 0:
        return McNemar(b01, b10, 0.0, 1.0, "chi2")
    # Not clamped at zero, to match statsmodels: with b01 == b10 this gives 1/(b01 + b10).
    statistic = (abs(b01 - b10) - 1.0) ** 2 / discordant
    return McNemar(b01, b10, statistic, float(sc.chdtrc(1, statistic)), "chi2")


def newcombe_interval(
    a_passed: Sequence[bool], b_passed: Sequence[bool], *, level: float = 0.95
) -> Interval:
    """Newcombe's hybrid score interval for the paired difference of pass rates ``b - a``.

    Method 10 of Newcombe (1998): it combines the Wilson intervals of both pass rates with
    the phi correlation of the pairs. Unlike a bootstrap it has an honest width when every
    pair agrees (both runs pass everything: not ``[0, 0]``) or every pair flips the same way.

    Args:
        a_passed: Pass/fail of the baseline run per sample.
        b_passed: Pass/fail of the candidate run, in the same sample order.
        level: Confidence level, strictly between 0 and 1.

    Returns:
        The interval with method ``"paired-newcombe"``; both bounds None without pairs.

    Raises:
        ValueError: If the inputs differ in length or hold something other than booleans.

    Example:
        >>> ci = newcombe_interval([True] * 20, [True] * 20)
        >>> ci.low < 0.0 < ci.high
        True
    """
    level = check_level(level)
    xa, xb = _paired_bools(a_passed, b_passed)
    n = int(xa.size)
    method = "paired-newcombe"
    if n == 0:
        return Interval(None, None, method, level)
    both = int(np.count_nonzero(xa & xb))
    only_a = int(np.count_nonzero(xa & ~xb))
    only_b = int(np.count_nonzero(~xa & xb))
    neither = n - both - only_a - only_b
    pa, pb = (both + only_a) / n, (both + only_b) / n
    # Plain Wilson, as published; the method's own coverage does not need the edge rule.
    ca = wilson(both + only_a, n, level, edges=False)
    cb = wilson(both + only_b, n, level, edges=False)
    la, ua, lb, ub = (float(v) for v in (ca.low, ca.high, cb.low, cb.high))  # type: ignore[arg-type]
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    # Newcombe's phi with his continuity correction (a positive association shrinks by N/2),
    # and 0 when a margin is empty: the correlation is then undefined.
    cross: float = both * neither - only_a * only_b
    cross = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = cross / math.sqrt(margins) if margins else 0.0
    delta = pb - pa
    down = math.sqrt(max((pb - lb) ** 2 - 2.0 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2, 0.0))
    up = math.sqrt(max((ub - pb) ** 2 - 2.0 * phi * (ub - pb) * (pa - la) + (pa - la) ** 2, 0.0))
    return Interval(max(delta - down, -1.0), min(delta + up, 1.0), method, level)
