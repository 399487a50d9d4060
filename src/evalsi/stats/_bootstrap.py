"""Nonparametric bootstrap intervals (percentile and BCa), vectorised over resamples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike

from evalsi.core import Interval, lazy_module
from evalsi.stats._arrays import FloatArray, Values, as_values, check_level
from evalsi.stats._intervals import normal_quantile

sc = lazy_module("scipy.special")  # imported at first use: a Score run starts without it

BootstrapMethod = Literal["percentile", "bca"]
BOOTSTRAP = "bootstrap-percentile"

# Upper bound on the elements of one resample (or jackknife) matrix held at once, so that a
# large input costs time, not memory: 2000 resamples of 100 000 values would be 1.6 GB.
_MAX_BATCH_ELEMENTS = 4_000_000


class Statistic(Protocol):
    """A statistic computed along an axis, like ``np.mean`` or ``np.median``.

    It is called with a 2-D array (one row per resample) and ``axis=-1``, and returns one value
    per row. Vectorising over rows is what makes thousands of resamples cheap.
    """

    def __call__(self, x: FloatArray, /, *, axis: int) -> ArrayLike: ...


def _apply(statistic: Statistic, rows: FloatArray) -> FloatArray:
    out = np.asarray(statistic(rows, axis=-1), dtype=np.float64).reshape(-1)
    if out.size != rows.shape[0]:
        raise ValueError(
            f"statistic must return one value per row, got {out.size} for {rows.shape[0]} rows"
        )
    return out


def bootstrap_distribution(
    x: FloatArray, statistic: Statistic, n_resamples: int, rng: np.random.Generator
) -> FloatArray:
    """The statistic on ``n_resamples`` resamples of ``x`` drawn with replacement."""
    n = x.size
    batch = max(1, _MAX_BATCH_ELEMENTS // n)
    parts: list[FloatArray] = []
    for start in range(0, n_resamples, batch):
        rows = min(batch, n_resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        parts.append(_apply(statistic, x[idx]))
    return np.concatenate(parts)


def degenerate(replicates: FloatArray) -> bool:
    """True when resampling found no spread at all: every replicate equal, up to rounding."""
    if replicates.size == 0:
        return True
    low, high = float(replicates.min()), float(replicates.max())
    return high - low <= 1e-12 * max(abs(low), abs(high), 1.0)


def _jackknife(x: FloatArray, statistic: Statistic) -> FloatArray:
    """The statistic on each leave-one-out sample of ``x``."""
    n = x.size
    # Row i of `keep` lists every index but i: arange(n-1) shifted by one from column i on.
    cols = np.arange(n - 1)
    batch = max(1, _MAX_BATCH_ELEMENTS // max(n - 1, 1))
    parts: list[FloatArray] = []
    for start in range(0, n, batch):
        drop = np.arange(start, min(start + batch, n))[:, None]
        keep = cols[None, :] + (cols[None, :] >= drop)
        parts.append(_apply(statistic, x[keep]))
    return np.concatenate(parts)


def _bca_levels(
    x: FloatArray, statistic: Statistic, theta_hat: float, boot: FloatArray, level: float
) -> tuple[float, float]:
    """The bias- and skew-corrected tail probabilities at which to read the bootstrap quantiles."""
    b = boot.size
    # Mid-rank proportion below the estimate: ties (common with 0/1 data) count half, so a
    # symmetric discrete distribution gives no spurious bias correction.
    twice_below = np.count_nonzero(boot < theta_hat) + np.count_nonzero(boot <= theta_hat)
    below = float(twice_below) / (2 * b)
    # Keep z0 finite when every resample lies on one side of the estimate.
    below = min(max(below, 0.5 / b), 1.0 - 0.5 / b)
    z0 = normal_quantile(below)

    jack = _jackknife(x, statistic)
    dev = jack.mean() - jack
    denom = 6.0 * float(np.sum(dev**2)) ** 1.5
    # No spread among jackknife values (e.g. constant data): there is no skew to correct.
    accel = float(np.sum(dev**3)) / denom if denom > 0 else 0.0

    def adjust(q: float) -> float:
        z = z0 + normal_quantile(q)
        return float(sc.ndtr(z0 + z / (1.0 - accel * z)))

    tail = (1.0 - level) / 2
    return adjust(tail), adjust(1.0 - tail)


def bootstrap_interval(
    values: Values,
    *,
    method: BootstrapMethod = "percentile",
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    statistic: Statistic = np.mean,
) -> Interval:
    """Bootstrap confidence interval for a statistic of independent values.

    ``"percentile"`` reads the interval off the quantiles of the bootstrap distribution.
    ``"bca"`` (bias-corrected and accelerated, Efron 1987) shifts those quantiles to correct
    for median bias and for skew, estimated by the jackknife; it has better coverage for skewed
    statistics at the cost of n extra evaluations of the statistic.

    Args:
        values: The observations (finite numbers).
        method: ``"percentile"`` or ``"bca"``.
        n_resamples: Number of bootstrap resamples.
        seed: Seed for ``np.random.default_rng``; the same inputs and seed give the same interval.
        level: Confidence level, strictly between 0 and 1.
        statistic: Called as ``statistic(rows, axis=-1)`` on a 2-D array of resamples and
            returning one value per row; ``np.mean`` by default.

    Returns:
        The interval with method ``"bootstrap-percentile"`` or ``"bootstrap-bca"``; both bounds
        are None with fewer than two values or when every resample gives the same value (all
        values equal): resampling then says nothing about spread, and a zero-width interval
        would claim a certainty the data do not give.

    Raises:
        ValueError: On a non-finite value, an unknown method, ``n_resamples < 1``, a level out
            of range, or a statistic that does not return one finite value per resample.

    Example:
        >>> ci = bootstrap_interval([1.0, 2.0, 3.0, 4.0, 10.0], method="bca", seed=1)
        >>> ci.method, ci.low < 4.0 < ci.high
        ('bootstrap-bca', True)
    """
    if method not in ("percentile", "bca"):
        raise ValueError(f"method must be 'percentile' or 'bca', got {method!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    level = check_level(level)
    name = f"bootstrap-{method}"
    x = as_values(values)
    if x.size < 2:
        return Interval(None, None, name, level)

    boot = bootstrap_distribution(x, statistic, n_resamples, np.random.default_rng(seed))
    if not np.all(np.isfinite(boot)):
        raise ValueError("statistic returned a non-finite value on a resample")
    if degenerate(boot):
        return Interval(None, None, name, level)
    if method == "bca":
        theta_hat = float(_apply(statistic, x[None, :])[0])
        q_low, q_high = _bca_levels(x, statistic, theta_hat, boot, level)
    else:
        q_low, q_high = (1.0 - level) / 2, (1.0 + level) / 2
    low, high = np.percentile(boot, [100.0 * q_low, 100.0 * q_high])
    return Interval(float(low), float(high), name, level)


def index_bootstrap(
    n: int, statistic: Callable[[FloatArray], FloatArray], level: float, n_resamples: int, seed: int
) -> Interval:
    """Percentile interval of ``statistic`` over resamples of the indexes 0..n-1 (each row of
    its argument is one resample), ignoring resamples where it is undefined (NaN): the
    bootstrap of the agreement statistics (kappa, alpha, Spearman's rho)."""
    level = check_level(level)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    if n < 2:
        return Interval(None, None, BOOTSTRAP, level)

    def rows_statistic(rows: FloatArray, *, axis: int) -> FloatArray:
        return statistic(rows)

    boot = bootstrap_distribution(
        np.arange(n, dtype=np.float64), rows_statistic, n_resamples, np.random.default_rng(seed)
    )
    boot = boot[np.isfinite(boot)]
    if not boot.size:
        return Interval(None, None, BOOTSTRAP, level)
    low, high = np.percentile(boot, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return Interval(float(low), float(high), BOOTSTRAP, level)
