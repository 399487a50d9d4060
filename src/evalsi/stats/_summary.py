"""Descriptive statistics and the one rule that picks an interval for a metric."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from evalsi.core import Interval
from evalsi.stats._arrays import Values, as_values, check_level
from evalsi.stats._bootstrap import BootstrapMethod, bootstrap_interval
from evalsi.stats._intervals import cluster_wilson, clustered_interval, t_interval, wilson

SummaryKind = Literal["passed", "number"]


@dataclass(frozen=True, slots=True)
class Summary:
    """n, mean, standard deviation and a confidence interval of one metric's values.

    Attributes:
        n: Number of values.
        mean: Their mean; None when ``n == 0``.
        std: Sample standard deviation (ddof=1); None when ``n < 2``.
        interval: The confidence interval for the mean, with the method that produced it.
        clusters: Number of distinct cluster keys when clusters were given, else None.
    """

    n: int
    mean: float | None
    std: float | None
    interval: Interval
    clusters: int | None


def with_wilson(interval: Interval, successes: int, n: int) -> Interval:
    """A pass rate's interval widened to contain Wilson's at the same level (method kept).

    The boundary rule for bootstrap intervals of 0/1 data: resampling s successes out of n
    can only produce what was seen, so at s = 0 or n it gives a point, and near the edges it is
    too narrow (at n = 5 and a rate of 2% it covers the truth 90% of the time). Wilson's
    interval (cautious at the edges) has the coverage the bootstrap lacks there.

    Example:
        >>> with_wilson(Interval(None, None, "bootstrap-percentile"), 10, 10).low > 0.6
        True
    """
    found = wilson(successes, n, interval.level)
    if found.low is None or found.high is None:  # n == 0: nothing to widen with
        return interval
    low = found.low if interval.low is None else min(interval.low, found.low)
    high = found.high if interval.high is None else max(interval.high, found.high)
    return Interval(low, high, interval.method, interval.level)


def describe(values: Values) -> tuple[int, float | None, float | None]:
    """Count, mean and sample standard deviation (ddof=1), None where undefined.

    Args:
        values: The observations (finite numbers).

    Returns:
        ``(n, mean, std)``: mean is None when there are no values, std when there are fewer
        than two.

    Raises:
        ValueError: If a value is not finite.

    Example:
        >>> describe([1.0, 2.0, 3.0])
        (3, 2.0, 1.0)
    """
    x = as_values(values)
    n = int(x.size)
    mean = float(np.mean(x)) if n else None
    std = float(np.std(x, ddof=1)) if n >= 2 else None
    return n, mean, std


def summarize(
    values: Values,
    *,
    kind: SummaryKind,
    clusters: Sequence[Hashable] | None = None,
    bootstrap: BootstrapMethod | None = None,
    seed: int = 0,
    level: float = 0.95,
) -> Summary:
    """Summarise one metric: n, mean, std and the interval its kind calls for.

    The interval is chosen by one rule, in order: a bootstrap interval if ``bootstrap`` is
    requested; else, if ``clusters`` are given (values sharing a key are correlated),
    ``cluster_wilson`` for ``kind="passed"`` and the cluster-robust t interval for
    ``kind="number"``; else Wilson for ``kind="passed"`` and Student t for ``kind="number"``.
    A pass rate's bootstrap interval is widened to contain Wilson's (``with_wilson``): the
    bootstrap of a 0/1 mean undercovers at small n and near 0 or 1, and is a point when every
    value is equal.

    Args:
        values: The metric's values; 0/1 (or booleans) for ``kind="passed"``.
        kind: ``"passed"`` for pass/fail metrics, ``"number"`` for numeric ones.
        clusters: Optional cluster key per value, e.g. the sample id when trials repeat.
        bootstrap: ``"percentile"`` or ``"bca"`` to request a bootstrap interval.
        seed: Seed for the bootstrap.
        level: Confidence level, strictly between 0 and 1.

    Returns:
        The summary; ``clusters`` counts the distinct keys when they were given.

    Raises:
        ValueError: If ``kind`` is unknown, ``kind="passed"`` values are not 0/1, a value is
            not finite, or ``clusters`` differs in length from ``values``.

    Example:
        >>> s = summarize([1, 1, 0, 1], kind="passed")
        >>> s.n, s.mean, s.interval.method
        (4, 0.75, 'wilson')
    """
    if kind not in ("passed", "number"):
        raise ValueError(f"kind must be 'passed' or 'number', got {kind!r}")
    level = check_level(level)
    x = as_values(values)
    if kind == "passed" and not np.all((x == 0.0) | (x == 1.0)):
        raise ValueError("values of a 'passed' metric must be 0 or 1")
    if clusters is not None and len(clusters) != x.size:
        raise ValueError(
            f"values and clusters must have the same length, got {x.size} and {len(clusters)}"
        )
    n, mean, std = describe(x)
    n_clusters = len(set(clusters)) if clusters is not None else None

    interval: Interval
    if bootstrap is not None:
        interval = bootstrap_interval(x, method=bootstrap, seed=seed, level=level)
        if kind == "passed":
            interval = with_wilson(interval, int(np.count_nonzero(x)), n)
    elif clusters is not None:
        if kind == "passed":
            interval = cluster_wilson(x, clusters, level=level)
        else:
            interval = clustered_interval(x, clusters, level=level)
    elif kind == "passed":
        interval = wilson(int(np.count_nonzero(x)), n, level=level)
    else:
        interval = t_interval(x, level=level)
    if kind == "passed" and interval.low is not None and interval.high is not None:
        # A t-based interval on a proportion can cross 0 or 1; no rate lies outside [0, 1].
        interval = Interval(
            max(interval.low, 0.0), min(interval.high, 1.0), interval.method, interval.level
        )
    return Summary(n, mean, std, interval, n_clusters)
