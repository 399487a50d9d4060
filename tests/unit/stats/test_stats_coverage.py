"""Pass-rate intervals hold their coverage at the boundary, and the clustered one's maths.

The simulation (``bench/interval_coverage.py``) draws correlated binary clusters for every
cell of ICC x rate x clusters x trials and checks, for every interval method the CLI can print
for a pass rate, that the 95% interval covers the true rate in at least 93% of 2000 draws and
is never zero-width. The design-effect arithmetic of ``cluster_wilson`` is checked by hand
against statsmodels' Wilson and Clopper-Pearson ("beta") bounds.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from evalsi.core import Interval
from evalsi.stats import cluster_wilson, cluster_wilson_bounds, cluster_wilson_from_sums


def _load_bench() -> ModuleType:
    """``bench/interval_coverage.py``, the one simulation the docs' table comes from."""
    path = Path(__file__).resolve().parents[3] / "bench" / "interval_coverage.py"
    spec = importlib.util.spec_from_file_location("interval_coverage", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


sim = _load_bench()
Z = 1.959963984540054


@pytest.mark.slow
def test_every_pass_rate_interval_covers_at_least_93_percent_and_is_never_a_point() -> None:
    cells = list(sim.simulate())
    grid = len(sim.ICCS) * len(sim.RATES) * len(sim.CLUSTERS) * len(sim.TRIALS)
    independent = len(sim.RATES) * len(sim.CLUSTERS) * (len(sim.ICCS) + len(sim.TRIALS) - 1)
    by_method = {m: [c for c in cells if c.method == m] for m in sim.METHODS}
    assert len(by_method["cluster-wilson"]) == grid == 225
    for method in sim.RECORD_LEVEL:
        assert len(by_method[method]) == independent == 105
    low = [c for c in cells if c.coverage < 0.93]
    assert not low, low
    assert all(c.zero_width == 0 for c in cells), [c for c in cells if c.zero_width]
    # The data really are what the cells say: the shock correlates records of a cluster.
    sums = sim.draw_sums(0.5, 0.5, 100, 5, 2000)
    assert float(sums.mean()) / 5 == pytest.approx(0.5, abs=0.01)
    # Var(S_g) = m p(1-p) (1 + (m-1) ICC) for a beta-binomial with intra-cluster correlation ICC
    assert float(sums.var()) == pytest.approx(5 * 0.25 * (1 + 4 * 0.5), rel=0.05)


def test_vectorised_bounds_are_what_the_scalar_function_returns() -> None:
    sums = sim.draw_sums(0.2, 0.02, 20, 3, 50)
    low, high = cluster_wilson_bounds(np.full(sums.shape, 3), sums)
    for row, lo, hi in zip(sums, low, high, strict=True):
        ci = cluster_wilson_from_sums([3] * 20, row.tolist())
        _same(ci, lo, hi, 1e-15)
        values = list(itertools.chain.from_iterable([1] * s + [0] * (3 - s) for s in row))
        assert cluster_wilson(values, [g for g in range(20) for _ in range(3)]) == ci


def _same(ci: Interval, low: float, high: float, tol: float) -> None:
    assert ci.low == pytest.approx(low, abs=tol)
    assert ci.high == pytest.approx(high, abs=tol)


def _hull(x: float, n: float) -> tuple[float, float]:
    wl, wh = proportion_confint(x, n, method="wilson")
    bl, bh = proportion_confint(x, n, method="beta")
    return min(wl, bl), max(wh, bh)


def test_design_effect_by_hand() -> None:
    # 10 clusters of 3 records, 15 of 30 passed; both outcomes in at least 5 clusters.
    sums = [3, 3, 3, 0, 0, 0, 1, 2, 3, 0]
    residual2 = 8 * 1.5**2 + 2 * 0.5**2  # Σ (S_g - 3·0.5)²
    robust = 10 / 9 * residual2 / 30**2  # CR1 variance of the mean
    binomial = 0.5 * 0.5 / 30
    deff = robust / binomial  # 2.74, under the cap Σn²/N = 3
    assert 1 < deff < 3
    shrink = (Z / 2.2621571627409915) ** 2  # t(0.975, 9 df)
    n_eff = 30 / deff * shrink
    low, high = _hull(0.5 * n_eff, n_eff)  # 4.1 effective successes: at the edge
    ci = cluster_wilson_from_sums([3] * 10, sums)
    assert ci.method == "cluster-wilson"
    _same(ci, low, high, 1e-9)


def test_design_effect_is_floored_at_one() -> None:
    # Clusters less alike than chance (every cluster 1 of 2): the robust variance is below the
    # binomial one, but the interval is never narrower than for independent records.
    ci = cluster_wilson_from_sums([2] * 8, [1] * 8)
    n_eff = 16 * (Z / 2.3646242510102993) ** 2  # deff 1; t(0.975, 7 df)
    low, high = _hull(0.5 * n_eff, n_eff)
    _same(ci, low, high, 1e-9)


@pytest.mark.parametrize("value", [0, 1])
def test_all_equal_takes_the_largest_design_effect(value: int) -> None:
    # The issue: 10 of 10 passing, one topic each, gave cluster-t [1, 1]. With no variance the
    # data cannot tell the correlation: every cluster counts once (n_eff = G), t with G-1 df.
    ci = cluster_wilson([value] * 10, [f"topic-{i}" for i in range(10)])
    n_eff = 10 * (Z / 2.2621571627409915) ** 2
    low, high = _hull(value * n_eff, n_eff)
    _same(ci, low, high, 1e-9)
    assert ci.high is not None
    assert ci.low is not None
    assert ci.high - ci.low > 0.3
    # 6 records in 3 clusters of 2: n_eff = 3 clusters, not 6 records.
    two = cluster_wilson([1] * 6, ["a", "a", "b", "b", "c", "c"])
    assert two.low is not None
    assert two.low < 0.1


def test_few_clusters_with_an_outcome_take_the_largest_design_effect() -> None:
    # 2 single failures among 20 clusters of 5: they look independent, but two clusters
    # cannot show it; the interval is the one for 20 clusters, not for 100 records.
    sums = [5] * 18 + [4, 4]
    ci = cluster_wilson_from_sums([5] * 20, sums)
    n_eff = 20 * (Z / 2.093024054408263) ** 2  # deff = Σn²/N = 5
    low, high = _hull(0.98 * n_eff, n_eff)
    _same(ci, low, high, 1e-9)


def test_cluster_wilson_needs_two_clusters_and_rejects_bad_input() -> None:
    assert cluster_wilson([1, 0, 1], ["a", "a", "a"]) == Interval(None, None, "cluster-wilson")
    assert cluster_wilson([], []) == Interval(None, None, "cluster-wilson")
    with pytest.raises(ValueError, match="0 or 1"):
        cluster_wilson([0.5, 1.0], ["a", "b"])
    with pytest.raises(ValueError, match="same length"):
        cluster_wilson([1, 0], ["a"])
    with pytest.raises(ValueError, match="level"):
        cluster_wilson([1, 0], ["a", "b"], level=1.5)


def test_unequal_cluster_sizes_cap_the_design_effect_at_its_largest_value() -> None:
    # One big cluster all-pass, four small ones all-fail: at most Σn²/N.
    sizes, sums = [20, 2, 2, 2, 2], [20, 0, 0, 0, 0]
    ci = cluster_wilson_from_sums(sizes, sums)
    most = sum(n * n for n in sizes) / 28
    n_eff = 28 / most * (Z / 2.7764451051977987) ** 2
    low, high = _hull(20 / 28 * n_eff, n_eff)
    _same(ci, low, high, 1e-9)
    assert not math.isnan(low)
