"""Wilson, t and cluster-robust intervals against statsmodels and scipy, plus properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.regression.linear_model import OLS  # type: ignore[import-untyped]
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from evalsi.core import Interval
from evalsi.stats import clustered_interval, t_interval, t_interval_from_moments, wilson

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


# --- Wilson ---------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize(
    ("successes", "n"),
    [
        *[(0, 1), (1, 1), (0, 10), (3, 10), (4, 10), (10, 10), (7, 10), (6, 10), (1, 2), (2, 5)],
        *[(37, 100), (99, 100), (89, 100), (90, 100), (10, 1000), (11, 1000), (512, 1000)],
    ],
)
def test_wilson_matches_statsmodels(successes: int, n: int, level: float) -> None:
    low, high = proportion_confint(successes, n, alpha=1 - level, method="wilson")
    ci = wilson(successes, n, level=level, edges=False)
    assert ci.method == "wilson"
    assert ci.level == level
    assert ci.low == pytest.approx(float(low), abs=1e-12)
    assert ci.high == pytest.approx(float(high), abs=1e-12)


@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
@pytest.mark.parametrize(
    ("successes", "n"),
    [
        (0, 1),
        (1, 1),
        (0, 10),
        (3, 10),
        (4, 10),
        (10, 10),
        (7, 10),
        (6, 10),
        (1, 2),
        (2, 5),
        (37, 100),
        (99, 100),
        (96, 100),
        (97, 100),
        (3, 1000),
        (4, 1000),
        (512, 1000),
    ],
)
def test_wilson_with_edges_is_statsmodels_wilson_widened_to_clopper_pearson(
    successes: int, n: int, level: float
) -> None:
    """With at most 10 successes or failures: the hull of Wilson and Clopper-Pearson ("beta")."""
    wl, wh = proportion_confint(successes, n, alpha=1 - level, method="wilson")
    bl, bh = proportion_confint(successes, n, alpha=1 - level, method="beta")
    edge = min(successes, n - successes) <= 10
    low, high = (min(wl, bl), max(wh, bh)) if edge else (wl, wh)
    ci = wilson(successes, n, level=level)
    assert ci.low == pytest.approx(float(low), abs=1e-12)
    assert ci.high == pytest.approx(float(high), abs=1e-12)
    assert ci.low <= wl + 1e-12
    assert ci.high >= wh - 1e-12


def test_wilson_all_equal_is_never_a_point() -> None:
    # The issue: 10 of 10 passing must not read as certainty; Clopper-Pearson's 0.025^(1/10).
    ci = wilson(10, 10)
    assert (ci.low, ci.high) == (pytest.approx(0.025 ** (1 / 10), abs=1e-12), 1.0)
    # 0 of 60 (the other case): Wilson's z²/(n + z²) is the wider bound here.
    ci = wilson(0, 60)
    z2 = 1.959963984540054**2
    assert (ci.low, ci.high) == (0.0, pytest.approx(z2 / (60 + z2), abs=1e-12))
    assert ci.high > 1 - 0.025 ** (1 / 60)


def test_wilson_n_zero_is_undefined() -> None:
    assert wilson(0, 0) == Interval(None, None, "wilson", 0.95)


def test_wilson_all_passed_touches_one() -> None:
    ci = wilson(20, 20)
    assert ci.high == 1.0
    assert ci.low is not None
    assert 0.8 < ci.low < 1.0


def test_wilson_none_passed_touches_zero() -> None:
    ci = wilson(0, 20)
    assert ci.low == 0.0
    assert ci.high is not None
    assert 0.0 < ci.high < 0.2


@pytest.mark.parametrize(("successes", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_bad_counts(successes: int, n: int) -> None:
    with pytest.raises(ValueError, match="successes"):
        wilson(successes, n)


@pytest.mark.parametrize("level", [0.0, 1.0, -0.5, 95.0])
def test_wilson_rejects_bad_level(level: float) -> None:
    with pytest.raises(ValueError, match="level"):
        wilson(1, 2, level=level)


@given(n=st.integers(1, 10_000), data=st.data(), level=st.floats(0.5, 0.999))
def test_wilson_within_unit_interval_and_contains_estimate(
    n: int, data: st.DataObject, level: float
) -> None:
    successes = data.draw(st.integers(0, n))
    ci = wilson(successes, n, level=level)
    assert ci.low is not None
    assert ci.high is not None
    assert 0.0 <= ci.low <= successes / n <= ci.high <= 1.0


@given(n=st.integers(1, 500), data=st.data())
def test_wilson_higher_level_is_wider(n: int, data: st.DataObject) -> None:
    successes = data.draw(st.integers(0, n))
    narrow, wide = wilson(successes, n, level=0.9), wilson(successes, n, level=0.99)
    assert narrow.low is not None
    assert narrow.high is not None
    assert wide.low is not None
    assert wide.high is not None
    assert wide.low <= narrow.low
    assert wide.high >= narrow.high


def _covers(p: float, n: int, edges: bool = True) -> np.ndarray:
    """For each count 0..n, whether the 95% Wilson interval covers p."""
    flags = []
    for x in range(n + 1):
        ci = wilson(x, n, edges=edges)
        assert ci.low is not None
        assert ci.high is not None
        flags.append(ci.low <= p <= ci.high)
    return np.array(flags)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_wilson_coverage_simulation(p: float) -> None:
    # The true coverage at n=100 is 0.936 for p=0.1 and 0.9, 0.943 for p=0.5, so 2000 draws
    # (sd 0.0055) sit too close to the 0.93 bound to be robust; 20000 draws (sd 0.0017) are.
    n, draws = 100, 20_000
    counts = np.random.default_rng(0).binomial(n, p, size=draws)
    coverage = float(_covers(p, n)[counts].mean())
    assert 0.93 <= coverage <= 0.97


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_wilson_exact_coverage(p: float) -> None:
    # Noise-free counterpart of the simulation: sum the binomial probabilities of the counts
    # whose interval covers p.
    n = 100
    pmf = scipy_stats.binom.pmf(np.arange(n + 1), n, p)
    coverage = float(pmf[_covers(p, n)].sum())
    assert 0.93 <= coverage <= 0.97


# --- t ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
@pytest.mark.parametrize("size", [2, 3, 10, 250])
def test_t_interval_matches_scipy(size: int, level: float) -> None:
    x = np.random.default_rng(size).normal(3.0, 2.0, size=size)
    low, high = scipy_stats.t.interval(level, df=size - 1, loc=x.mean(), scale=scipy_stats.sem(x))
    ci = t_interval(x, level=level)
    assert ci.method == "t"
    assert ci.low == pytest.approx(low, rel=1e-10, abs=1e-12)
    assert ci.high == pytest.approx(high, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("values", [[], [4.2]])
def test_t_interval_needs_two_values(values: list[float]) -> None:
    assert t_interval(values) == Interval(None, None, "t", 0.95)


def test_t_interval_all_equal_has_no_interval() -> None:
    # No spread: a [2.5, 2.5] interval would claim certainty; the t method has no answer.
    assert t_interval([2.5, 2.5, 2.5]) == Interval(None, None, "t", 0.95)
    assert t_interval_from_moments(3, 2.5, 0.0) == Interval(None, None, "t", 0.95)


def test_t_interval_accepts_ints_and_bools() -> None:
    assert t_interval([0, 1, 1, 1]) == t_interval([False, True, True, True])


@pytest.mark.parametrize("bad", [[1.0, math.nan], [math.inf, 1.0], [[1.0, 2.0]]])
def test_t_interval_rejects_non_finite_or_nested(bad: list[object]) -> None:
    with pytest.raises(ValueError, match="values"):
        t_interval(bad)  # type: ignore[arg-type]


@given(st.lists(finite, min_size=2, max_size=50).filter(lambda v: np.ptp(v) > 1e-6))
def test_t_interval_contains_mean(values: list[float]) -> None:
    ci = t_interval(values)
    mean = float(np.mean(values))
    assert ci.low is not None
    assert ci.high is not None
    assert ci.low <= mean + 1e-9 * (1 + abs(mean))
    assert mean - 1e-9 * (1 + abs(mean)) <= ci.high


# --- cluster-robust t -------------------------------------------------------------------------


def _statsmodels_cluster(values: np.ndarray, groups: np.ndarray, level: float) -> np.ndarray:
    # use_t=True: t with G-1 degrees of freedom, which is what we implement (statsmodels'
    # default for cov_type="cluster" is the normal quantile).
    fit = OLS(values, np.ones_like(values)).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
    )
    bounds: np.ndarray = np.asarray(fit.conf_int(alpha=1 - level))[0]
    return bounds


@pytest.mark.parametrize("level", [0.9, 0.95])
@pytest.mark.parametrize(("size", "n_groups"), [(6, 2), (20, 3), (50, 7), (300, 40)])
def test_clustered_interval_matches_statsmodels(size: int, n_groups: int, level: float) -> None:
    rng = np.random.default_rng(size * 31 + n_groups)
    groups = np.concatenate([np.arange(n_groups), rng.integers(0, n_groups, size - n_groups)])
    effects = rng.normal(0.0, 1.0, n_groups)
    values = effects[groups] + rng.normal(0.0, 0.5, size)
    low, high = _statsmodels_cluster(values, groups, level)
    ci = clustered_interval(values, [f"sample-{g}" for g in groups], level=level)
    assert ci.method == "cluster-t"
    assert ci.low == pytest.approx(low, rel=1e-9, abs=1e-12)
    assert ci.high == pytest.approx(high, rel=1e-9, abs=1e-12)


def test_clustered_interval_matches_statsmodels_on_binary_values() -> None:
    rng = np.random.default_rng(7)
    groups = np.repeat(np.arange(15), 4)
    values = (rng.random(60) < np.repeat(rng.random(15), 4)).astype(float)
    low, high = _statsmodels_cluster(values, groups, 0.95)
    ci = clustered_interval(values, groups.tolist())
    assert ci.low == pytest.approx(low, rel=1e-9)
    assert ci.high == pytest.approx(high, rel=1e-9)


@given(st.lists(finite, min_size=2, max_size=40).filter(lambda v: np.ptp(v) > 1e-6))
def test_singleton_clusters_reduce_to_t_interval(values: list[float]) -> None:
    clustered = clustered_interval(values, list(range(len(values))))
    plain = t_interval(values)
    assert clustered.low is not None
    assert plain.low is not None
    assert clustered.high is not None
    assert plain.high is not None
    scale = 1e-9 * (1 + max(abs(v) for v in values))
    assert clustered.low == pytest.approx(plain.low, rel=1e-7, abs=scale)
    assert clustered.high == pytest.approx(plain.high, rel=1e-7, abs=scale)


@given(st.lists(st.tuples(finite, st.integers(0, 5)), min_size=2, max_size=40))
def test_clustered_interval_contains_mean(pairs: list[tuple[float, int]]) -> None:
    values = [v for v, _ in pairs]
    clusters = [g for _, g in pairs]
    ci = clustered_interval(values, clusters)
    if len(set(clusters)) < 2 or _flat(values, clusters, 1e-13):
        assert ci.low is None
        assert ci.high is None
        return
    if ci.low is None and _flat(values, clusters, 1e-6):
        return  # cluster means a hair apart: no interval is as right as a tiny one
    mean = float(np.mean(values))
    assert ci.low is not None
    assert ci.high is not None
    assert ci.low <= mean + 1e-9 * (1 + abs(mean))
    assert mean - 1e-9 * (1 + abs(mean)) <= ci.high


@pytest.mark.parametrize(("values", "clusters"), [([], []), ([1.0], ["a"]), ([1.0, 2.0], [1, 1])])
def test_clustered_interval_needs_two_clusters(values: list[float], clusters: list[object]) -> None:
    assert clustered_interval(values, clusters) == Interval(None, None, "cluster-t", 0.95)


def _flat(values: list[float], clusters: list[int], tolerance: float) -> bool:
    """All cluster means equal up to ``tolerance`` of the values' scale (at least 1): below
    1e-13 the cluster-robust variance is rounding; by 1e-6 an interval may or may not be."""
    means = [
        np.mean([v for v, c in zip(values, clusters, strict=True) if c == g]) for g in set(clusters)
    ]
    return bool(np.ptp(means) <= tolerance * max(1.0, max(abs(v) for v in values)))


def test_clustered_interval_all_equal_has_no_interval() -> None:
    # The case: cluster-t on [1]*6 was Interval(1.0, 1.0); with no spread it has no
    # answer (a pass rate goes to cluster_wilson, which has one).
    none = Interval(None, None, "cluster-t")
    assert clustered_interval([1.0] * 6, [1, 1, 2, 2, 3, 3]) == none
    # Spread within clusters but equal cluster means: CR1 variance 0, same thing.
    assert clustered_interval([0.0, 1.0, 1.0, 0.0, 0.5, 0.5], [1, 1, 2, 2, 3, 3]) == none


def test_clustered_interval_rejects_length_mismatch() -> None:
    with pytest.raises(ValueError, match="same length"):
        clustered_interval([1.0, 2.0, 3.0], ["a", "b"])


@settings(max_examples=50)
@given(st.lists(finite, min_size=4, max_size=30), st.integers(0, 2**32 - 1))
def test_clustered_interval_ignores_cluster_labels_and_order(
    values: list[float], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    clusters = [i % 3 for i in range(len(values))]
    assume(not _flat(values, clusters, 1e-6))
    perm = rng.permutation(len(values))
    relabelled = [("g", (c + 1) % 3) for c in clusters]
    a = clustered_interval(values, clusters)
    b = clustered_interval([values[i] for i in perm], [relabelled[i] for i in perm])
    assert a.low is not None
    assert b.low is not None
    assert a.high is not None
    assert b.high is not None
    scale = 1e-9 * (1 + max(abs(v) for v in values))
    assert b.low == pytest.approx(a.low, rel=1e-9, abs=scale)
    assert b.high == pytest.approx(a.high, rel=1e-9, abs=scale)
