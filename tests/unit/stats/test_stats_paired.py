"""Paired bootstrap and McNemar's test against scipy and statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import (  # type: ignore[import-untyped]
    mcnemar as sm_mcnemar,
)
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from evalsi.core import Interval
from evalsi.stats import McNemar, PairedDelta, mcnemar, newcombe_interval, paired_bootstrap


def _pairs(b01: int, b10: int, both: int = 3, neither: int = 2) -> tuple[list[bool], list[bool]]:
    a = [False] * b01 + [True] * b10 + [True] * both + [False] * neither
    b = [True] * b01 + [False] * b10 + [True] * both + [False] * neither
    return a, b


# --- McNemar ----------------------------------------------------------------------------------

_TABLES = [(0, 1), (1, 0), (1, 1), (2, 7), (7, 2), (5, 5), (0, 12), (12, 13), (10, 30), (40, 40)]


@pytest.mark.parametrize(("b01", "b10"), _TABLES)
@pytest.mark.parametrize("exact", [True, False])
def test_mcnemar_matches_statsmodels(b01: int, b10: int, exact: bool) -> None:
    a, b = _pairs(b01, b10)
    # statsmodels' table: rows are a (pass, fail), columns are b (pass, fail).
    table = [[3, b10], [b01, 2]]
    ref = sm_mcnemar(table, exact=exact, correction=True)
    r = mcnemar(a, b, exact=exact)
    assert (r.b01, r.b10) == (b01, b10)
    assert r.method == ("exact" if exact else "chi2")
    assert r.statistic == pytest.approx(float(ref.statistic), rel=1e-12)
    assert r.p_value == pytest.approx(float(ref.pvalue), rel=1e-10, abs=1e-15)


@pytest.mark.parametrize(
    ("b01", "b10", "method"), [(13, 12, "chi2"), (12, 12, "exact"), (0, 0, "exact")]
)
def test_mcnemar_default_switches_at_25_discordant_pairs(b01: int, b10: int, method: str) -> None:
    assert mcnemar(*_pairs(b01, b10)).method == method


def test_mcnemar_no_discordant_pairs() -> None:
    a, b = _pairs(0, 0)
    assert mcnemar(a, b) == McNemar(0, 0, 0.0, 1.0, "exact")
    assert mcnemar(a, b, exact=False) == McNemar(0, 0, 0.0, 1.0, "chi2")
    assert mcnemar([], []) == McNemar(0, 0, 0.0, 1.0, "exact")


def test_mcnemar_accepts_zero_one_and_numpy() -> None:
    a, b = _pairs(3, 9)
    expected = mcnemar(a, b)
    assert mcnemar([int(x) for x in a], [int(x) for x in b]) == expected  # type: ignore[misc]
    assert mcnemar(np.array(a), np.array(b)) == expected  # type: ignore[arg-type]


def test_mcnemar_direction() -> None:
    r = mcnemar(*_pairs(0, 12))
    assert (r.b01, r.b10) == (0, 12)
    assert r.p_value < 0.001


def test_mcnemar_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="same length"):
        mcnemar([True, False], [True])
    with pytest.raises(ValueError, match="booleans"):
        mcnemar([0.5, 1.0], [1.0, 1.0])  # type: ignore[list-item]


@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_symmetric_and_p_in_unit_interval(b01: int, b10: int) -> None:
    ab, ba = mcnemar(*_pairs(b01, b10)), mcnemar(*_pairs(b10, b01))
    assert ab.p_value == ba.p_value
    assert ab.statistic == ba.statistic
    assert 0.0 <= ab.p_value <= 1.0


# --- paired bootstrap -------------------------------------------------------------------------


def _scores(seed: int, size: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0.0, 1.0, size)
    a = difficulty + rng.normal(0.0, 0.3, size)
    b = difficulty + shift + rng.normal(0.0, 0.3, size)
    return a, b


@pytest.mark.parametrize("shift", [0.0, 0.1, 0.5])
def test_paired_bootstrap_matches_scipy(shift: float) -> None:
    a, b = _scores(1, 60, shift)

    def mean_delta(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(np.mean(y - x, axis=axis))

    ref = scipy_stats.bootstrap(
        (a, b),
        mean_delta,
        paired=True,
        method="percentile",
        n_resamples=20_000,
        rng=np.random.default_rng(1),
    )
    r = paired_bootstrap(a, b, n_resamples=20_000, seed=2)
    assert r.n == 60
    assert r.delta == pytest.approx(float(np.mean(b - a)), rel=1e-12)
    assert r.interval.method == "paired-bootstrap-percentile"
    tolerance = 0.15 * float(ref.standard_error)
    assert r.interval.low == pytest.approx(ref.confidence_interval.low, abs=tolerance)
    assert r.interval.high == pytest.approx(ref.confidence_interval.high, abs=tolerance)


def test_paired_bootstrap_detects_a_real_shift() -> None:
    a, b = _scores(2, 100, 0.3)
    r = paired_bootstrap(a, b)
    assert r.interval.low is not None
    assert r.interval.low > 0.0
    # No resample crosses zero, so the p-value is the smallest it can be: 2/(R+1).
    assert r.p_value == pytest.approx(2 / 2001)


def test_paired_bootstrap_p_value_agrees_with_interval() -> None:
    for seed in range(10):
        a, b = _scores(seed, 40, 0.08)
        r = paired_bootstrap(a, b, seed=seed)
        assert r.interval.low is not None
        assert r.interval.high is not None
        assert r.p_value is not None
        excludes_zero = r.interval.low > 0.0 or r.interval.high < 0.0
        if excludes_zero:
            assert r.p_value <= 0.05 + 2 / 2001
        else:
            assert r.p_value >= 0.05 - 2 / 2001


def test_paired_bootstrap_identical_runs_have_no_interval() -> None:
    # Every pair differs by 0: resampling has no spread, and [0, 0] would claim certainty.
    a = [0.1, 0.5, 0.9, 0.3]
    assert paired_bootstrap(a, a) == PairedDelta(
        0.0, Interval(None, None, "paired-bootstrap-percentile"), None, 4
    )


def test_paired_bootstrap_binary_all_flipped_has_no_interval() -> None:
    r = paired_bootstrap([0, 0, 0, 0, 0], [1, 1, 1, 1, 1])
    assert r.delta == 1.0
    assert (r.interval.low, r.interval.high, r.p_value) == (None, None, None)


def _newcombe_by_hand(both: int, only_a: int, only_b: int, neither: int) -> tuple[float, float]:
    """Newcombe (1998) method 10 from statsmodels' Wilson bounds, written out separately."""
    n = both + only_a + only_b + neither
    pa, pb = (both + only_a) / n, (both + only_b) / n
    la, ua = proportion_confint(both + only_a, n, method="wilson")
    lb, ub = proportion_confint(both + only_b, n, method="wilson")
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    cross = both * neither - only_a * only_b
    cross = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0)
    phi = cross / math.sqrt(margins) if margins else 0.0
    low = pb - pa - math.sqrt((pb - lb) ** 2 - 2 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2)
    high = pb - pa + math.sqrt((ub - pb) ** 2 - 2 * phi * (ub - pb) * (pa - la) + (pa - la) ** 2)
    return max(low, -1.0), min(high, 1.0)


@pytest.mark.parametrize(
    "table",
    [(20, 0, 0, 0), (0, 0, 0, 20), (0, 10, 0, 0), (0, 0, 10, 0), (7, 3, 1, 9), (30, 2, 9, 1)],
)
def test_newcombe_interval_matches_the_formula(table: tuple[int, int, int, int]) -> None:
    both, only_a, only_b, neither = table
    a = [True] * (both + only_a) + [False] * (only_b + neither)
    b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
    ci = newcombe_interval(a, b)
    low, high = _newcombe_by_hand(*table)
    assert ci.method == "paired-newcombe"
    assert (ci.low, ci.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert ci.low is not None
    assert ci.high is not None
    assert ci.high - ci.low > 0.05


def test_newcombe_interval_covers_at_the_boundary() -> None:
    """Both runs near 100%: the degenerate case the bootstrap cannot handle, by simulation."""
    rng = np.random.default_rng(16)
    for n, (p_both, p_a, p_b) in [(10, (0.97, 0.01, 0.01)), (30, (0.9, 0.0, 0.05))]:
        truth = p_b - p_a
        cells = rng.multinomial(n, [p_both, p_a, p_b, 1 - p_both - p_a - p_b], size=2000)
        cache: dict[tuple[int, ...], bool] = {}
        hits = 0
        for row in map(tuple, cells.tolist()):
            if row not in cache:
                both, only_a, only_b, neither = row
                a = [True] * (both + only_a) + [False] * (only_b + neither)
                b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
                ci = newcombe_interval(a, b)
                assert ci.low is not None
                assert ci.high is not None
                assert ci.high > ci.low
                cache[row] = ci.low <= truth <= ci.high
            hits += cache[row]
        assert hits / 2000 >= 0.93


def test_paired_bootstrap_too_few_pairs() -> None:
    method = "paired-bootstrap-percentile"
    assert paired_bootstrap([], []) == PairedDelta(None, Interval(None, None, method), None, 0)
    assert paired_bootstrap([1.0], [3.0]) == PairedDelta(2.0, Interval(None, None, method), None, 1)


def test_paired_bootstrap_is_seeded() -> None:
    a, b = _scores(3, 30, 0.1)
    assert paired_bootstrap(a, b, seed=5) == paired_bootstrap(a, b, seed=5)
    assert paired_bootstrap(a, b, seed=5) != paired_bootstrap(a, b, seed=6)


def test_paired_bootstrap_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="n_resamples"):
        paired_bootstrap([1.0, 2.0], [1.0, 2.0], n_resamples=0)
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap([1.0, 2.0], [1.0, 2.0], level=0.0)
    with pytest.raises(ValueError, match="finite"):
        paired_bootstrap([1.0, float("inf")], [1.0, 2.0])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(-100, 100), st.floats(-100, 100)), min_size=2, max_size=30))
def test_paired_bootstrap_interval_contains_delta(pairs: list[tuple[float, float]]) -> None:
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    assume(np.ptp(np.subtract(b, a)) > 1e-6)  # one shared difference: no interval (above)
    r = paired_bootstrap(a, b, n_resamples=500)
    assert r.delta is not None
    assert r.p_value is not None
    assert r.interval.low is not None
    assert r.interval.high is not None
    assert r.interval.low - 1e-9 <= r.delta <= r.interval.high + 1e-9
    assert 0.0 < r.p_value <= 1.0
