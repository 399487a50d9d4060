"""``ks``: the two-sample Kolmogorov-Smirnov test per numerical feature, equal to
``scipy.stats.ks_2samp`` (two-sided, param ``method`` as scipy's, default ``auto``).

A feature drifts when the p-value < ``alpha`` (0.05). KS compares numerical distributions:
categorical features are listed as not judged. The main number is the largest statistic;
``p-value[<feature>]`` gives each p-value.

Weighted protocol: the statistic is the largest gap between the reference's empirical CDF and
the current rows' weighted one, evaluated at every value of either sample, which is what
``ks_2samp`` computes on the rows repeated by their weights. Its result depends only on that
gap and the two sample sizes, so statistic and p-value come from ``ks_2samp`` itself, run on a
two-point pair of samples with those sizes and that gap, cached per (sizes, gap).

Resampled rows repeat values, which the test's p-value assumes away, so read its interval as a
rough guide only. Exact p-values for unequal samples of a few thousand rows are slow to
recompute per replicate: ``method=asymp`` makes the bootstrap fast there.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from evalsi.core import Score
from evalsi.evaluators import WeightedReduce
from evalsi.packs._declare import check_choice
from evalsi.packs.ml_monitoring._base import (
    Bools,
    Ints,
    check_range,
    count,
    per_name,
    weights_of,
)
from evalsi.packs.ml_monitoring._drift import DriftBase, Values
from evalsi.packs.ml_monitoring._fields import as_numbers, is_missing
from evalsi.packs.ml_monitoring._reference import Column

Method = Literal["auto", "exact", "asymp"]

_CATEGORICAL = "categorical: KS compares numerical distributions (use psi or js-distance)"


@dataclass(frozen=True, slots=True)
class Ecdf:
    """One feature, prepared once: the sorted union of both samples' values, how many
    reference values lie at or below each, and where each current row falls in it."""

    column: Column
    reference_at: Ints  # reference values <= each point
    position: Ints  # each current row's point, -1 where missing or not a number
    missing: Bools
    invalid: Bools


class Ks(DriftBase, WeightedReduce[list[Ecdf], list[Score]]):
    """Two-sample Kolmogorov-Smirnov statistic and p-value per numerical feature."""

    metric: ClassVar[str] = "ks"
    # Each replicate calls scipy's exact/asymptotic KS per feature: cap the bootstrap's cost.
    max_resamples: ClassVar[int] = 200

    def __init__(
        self,
        *,
        baseline: str,
        features: list[str] | None = None,
        categorical: list[str] | None = None,
        alpha: float = 0.05,
        method: Method = "auto",
    ) -> None:
        check_range(self.metric, "alpha", alpha, 0.0, 1.0)
        check_choice(self.metric, "method", method, ("auto", "exact", "asymp"))
        self.alpha, self.method = alpha, method
        self._cache: dict[tuple[int, int, float], tuple[float, float]] = {}
        self._setup(baseline, features, categorical)

    def prepare(self, values: Sequence[Values]) -> list[Ecdf]:
        out = []
        for j, column in enumerate(self.reference.columns):
            raw = [v[j] for v in values]
            missing = np.array([is_missing(v) for v in raw], dtype=bool)
            x = as_numbers(raw) if column.kind == "numerical" else np.full(len(raw), np.nan)
            ok = ~np.isnan(x)
            points = np.unique(np.concatenate([column.numbers, x[ok]]))
            position = np.full(len(raw), -1, dtype=np.intp)
            position[ok] = np.searchsorted(points, x[ok])
            below = np.searchsorted(column.numbers, points, side="right").astype(np.intp)
            invalid = ~missing & ~ok if column.kind == "numerical" else np.zeros(len(raw), bool)
            out.append(Ecdf(column, below, position, missing, invalid))
        return out

    def reduce_weighted(self, prepared: list[Ecdf], weights: Any) -> list[Score]:
        n = int(prepared[0].position.size) if prepared else 0
        w = weights_of(weights, n)
        if not np.array_equal(w, np.floor(w)):
            raise ValueError("ks needs whole-number weights (resample counts)")
        found: dict[str, float] = {}
        pvalues: dict[str, float] = {}
        detail = self._detail(alpha=self.alpha, method=self.method)
        for e in prepared:
            column = e.column
            valid = e.position >= 0
            at = np.cumsum(
                np.bincount(e.position[valid], weights=w[valid], minlength=e.reference_at.size)
            )
            size = float(at[-1]) if at.size else 0.0
            entry = self._entry(detail, column, w, e.missing, e.invalid, size, "p_value")
            if column.kind == "categorical":
                entry.update(reason=_CATEGORICAL, current=count(float(w[~e.missing].sum())))
            if entry["reason"]:
                continue
            stat, p = self._test(e.reference_at, at, column.numbers.size, int(size))
            found[column.name], pvalues[column.name] = stat, p
            entry.update(judged=True, value=stat, p_value=p, drifted=p < self.alpha)
        scores = self._scores(found, detail, f"p-value < {self.alpha:g}")
        return scores[:-1] + per_name("p-value", pvalues) + scores[-1:]

    def _test(self, ref_at: Ints, cur_at: Any, n1: int, n2: int) -> tuple[float, float]:
        """(statistic, p-value) as ks_2samp computes them on the two samples."""
        gaps = ref_at / n1 - cur_at / n2
        hi, lo = int(np.argmax(gaps)), int(np.argmin(gaps))
        k = lo if -gaps[lo] > gaps[hi] else hi  # ks_2samp prefers the positive side on a tie
        key = (n1, n2, float(abs(gaps[k])))
        if key not in self._cache:
            self._cache[key] = self._two_point(n1, n2, int(ref_at[k]), int(cur_at[k]))
        return self._cache[key]

    def _two_point(self, n1: int, n2: int, a: int, b: int) -> tuple[float, float]:
        """ks_2samp on samples of sizes n1, n2 whose CDFs differ by a/n1 - b/n2 (its exact
        method rounds the gap to the lattice of the sizes, so the statistic comes from it too)."""
        from scipy.stats import ks_2samp

        first = np.repeat([0.0, 2.0], [a, n1 - a])
        second = np.repeat([0.0, 2.0], [b, n2 - b])
        with warnings.catch_warnings():  # "exact calculation unsuccessful": scipy falls back
            warnings.simplefilter("ignore", RuntimeWarning)
            result = ks_2samp(first, second, method=self.method)
        return float(result.statistic), float(result.pvalue)
