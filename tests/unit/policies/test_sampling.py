"""Sampling by trace id, the result key, and the P² percentile estimate."""

from __future__ import annotations

import math
import secrets

import numpy as np
import pytest
from scipy import stats

from evalsi.policies._sampling import P2Quantile, result_key, sample_point, sampled


def test_the_decision_is_a_function_of_the_trace_id_alone() -> None:
    tid = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert sample_point(tid) == sample_point(tid.upper()) == sample_point(f" {tid} ")
    assert 0.0 <= sample_point(tid) < 1.0
    assert [sampled(tid, 0.3) for _ in range(5)] == [sampled(tid, 0.3)] * 5
    assert sampled(tid, 1.0)
    assert not sampled(tid, 0.0)


@pytest.mark.parametrize("rate", [0.01, 0.05, 0.5])
def test_the_sampled_share_is_within_binomial_bounds(rate: float) -> None:
    n = 40_000
    ids = [f"{i:032x}" for i in range(n)]  # sequential ids: the worst case for a naive reading
    k = sum(sampled(t, rate) for t in ids)
    lo, hi = stats.binom.ppf([1e-6, 1 - 1e-6], n, rate)
    assert lo <= k <= hi


def test_rates_give_nested_samples() -> None:
    ids = [secrets.token_hex(16) for _ in range(5000)]
    low = {t for t in ids if sampled(t, 0.05)}
    high = {t for t in ids if sampled(t, 0.2)}
    assert low <= high
    assert len(high) > len(low)


def test_result_keys_fit_31_bits_and_are_stable() -> None:
    keys = {result_key(f"{i:032x}") for i in range(20_000)}
    assert len(keys) == 20_000
    assert all(0 <= s < 2**31 and 0 <= t < 2**31 for s, t in keys)
    assert result_key("AB" * 16) == result_key("ab" * 16)


@pytest.mark.parametrize("p", [0.5, 0.9, 0.99])
@pytest.mark.parametrize("dist", ["lognormal", "exponential", "normal"])
def test_p2_tracks_numpy_quantile(p: float, dist: str) -> None:
    rng = np.random.default_rng(7)
    sample = {
        "lognormal": lambda: rng.lognormal(3.0, 1.0, 30_000),
        "exponential": lambda: rng.exponential(100.0, 30_000),
        "normal": lambda: rng.normal(50.0, 5.0, 30_000),
    }[dist]()
    q = P2Quantile(p)
    for x in sample:
        q.add(float(x))
    exact = float(np.quantile(sample, p))
    value = q.value()
    assert value is not None
    assert q.count == 30_000
    # P² is an estimate: within 3% of the exact sample quantile on smooth distributions
    assert math.isclose(value, exact, rel_tol=0.03)


def test_p2_is_exact_for_the_first_five() -> None:
    q = P2Quantile(0.9)
    assert q.value() is None
    for x in (5.0, 1.0, 4.0):
        q.add(x)
    assert q.value() == pytest.approx(float(np.quantile([5.0, 1.0, 4.0], 0.9)))
    q.add(float("nan"))  # ignored
    assert q.count == 3
    with pytest.raises(ValueError, match="between 0 and 1"):
        P2Quantile(1.0)
