"""Streaming summaries: n, mean and variance (and per-cluster sums) without keeping the values.

A run over millions of records must not hold every value to report a mean and an interval.
Batches are folded in with Chan et al.'s pairwise update, which keeps the variance as exact as
a two-pass computation. Memory is O(1), or O(clusters) when clustering.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from evalsi.core import Interval
from evalsi.stats._intervals import (
    cluster_wilson_from_sums,
    clustered_interval_from_sums,
    t_interval_from_moments,
    wilson,
)
from evalsi.stats._summary import Summary, SummaryKind

_SMALL = 16


class Moments:
    """Running n, mean and sum of squared deviations of a stream of numbers.

    Example:
        >>> m = Moments()
        >>> m.add([1.0, 2.0]); m.add([3.0, 4.0])
        >>> m.n, m.mean, round(m.std or 0, 6)
        (4, 2.5, 1.290994)
    """

    __slots__ = ("_m2", "_running_mean", "_total", "cluster_n", "cluster_sum", "n")

    def __init__(self) -> None:
        self.n = 0
        self._total = 0.0  # exact for 0/1 values: the mean of a pass rate is successes / n
        self._running_mean = 0.0
        self._m2 = 0.0
        self.cluster_n: dict[Hashable, int] = {}
        self.cluster_sum: dict[Hashable, float] = {}

    def add(self, values: Sequence[float], clusters: Sequence[Hashable] | None = None) -> None:
        """Fold in a batch of finite values (with one cluster key each, when clustering)."""
        nb = len(values)
        if nb == 0:
            return
        if nb <= _SMALL:  # numpy's fixed cost per call dwarfs a handful of values
            if not all(math.isfinite(v) for v in values):
                raise ValueError("values must be finite")
            mb = math.fsum(values) / nb
            m2b = math.fsum((v - mb) * (v - mb) for v in values)
        else:
            x = np.asarray(values, dtype=float)
            if not np.all(np.isfinite(x)):
                raise ValueError("values must be finite")
            mb = float(x.mean())
            m2b = float(np.square(x - mb).sum())
        n = self.n + nb
        delta = mb - self._running_mean
        self._running_mean += delta * nb / n
        self._m2 += m2b + delta * delta * self.n * nb / n
        self._total = math.fsum((self._total, math.fsum(values)))
        self.n = n
        if clusters is not None:
            counts, sums = self.cluster_n, self.cluster_sum
            for key, value in zip(clusters, values, strict=True):
                counts[key] = counts.get(key, 0) + 1
                sums[key] = sums.get(key, 0.0) + value

    @property
    def mean(self) -> float:
        """The mean (0.0 before any value)."""
        return self._total / self.n if self.n else 0.0

    @property
    def std(self) -> float | None:
        """Sample standard deviation (ddof=1); None below two values."""
        return None if self.n < 2 else math.sqrt(max(self._m2, 0.0) / (self.n - 1))

    def summary(
        self, kind: SummaryKind, *, clustered: bool = False, level: float = 0.95
    ) -> Summary:
        """The same summary ``summarize`` gives for these values (Wilson, t, cluster-wilson or
        cluster-t)."""
        n = self.n
        mean = self.mean if n else None
        interval: Interval
        if clustered:
            sizes, sums = list(self.cluster_n.values()), list(self.cluster_sum.values())
            if kind == "passed":
                interval = cluster_wilson_from_sums(sizes, sums, level)
            else:
                interval = clustered_interval_from_sums(sizes, sums, level)
        elif kind == "passed":
            interval = wilson(round(self.mean * n), n, level)
        else:
            std = self.std
            interval = (
                t_interval_from_moments(n, self.mean, std, level)
                if std is not None
                else Interval(None, None, "t", level)
            )
        return Summary(n, mean, self.std, interval, len(self.cluster_n) if clustered else None)
