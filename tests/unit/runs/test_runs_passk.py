"""pass@k / pass^k over trials, checked against a brute-force enumeration of k-subsets."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from evalsi.runs._trials import TrialStats


def _brute(trials: list[list[int]], k: int) -> tuple[float, float]:
    """Average over samples of P(some / all of a uniformly drawn k-subset of trials pass)."""
    at = hat = 0.0
    for values in trials:
        subsets = list(itertools.combinations(values, k))
        at += sum(any(s) for s in subsets) / len(subsets)
        hat += sum(all(s) for s in subsets) / len(subsets)
    return at / len(trials), hat / len(trials)


@pytest.mark.parametrize("seed", range(20))
def test_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 7)
    trials = [[int(rng.random() < 0.5) for _ in range(n)] for _ in range(rng.randint(1, 15))]
    stats = TrialStats(trials=n)
    for values in trials:
        stats.add([float(v) for v in values])
    for k in range(1, n + 1):
        at, hat = _brute(trials, k)
        assert stats.pass_at_k()[str(k)] == pytest.approx(at)
        assert stats.pass_hat_k()[str(k)] == pytest.approx(hat)
    assert set(stats.pass_at_k()) == {str(k) for k in range(1, n + 1)}


def test_short_samples_are_excluded_and_counted() -> None:
    stats = TrialStats(trials=3)
    stats.add([1.0, 1.0, 0.0])
    stats.add([1.0, 0.0])  # one trial lost to infra: biased, so left out
    assert stats.samples == 1
    assert stats.excluded == 1
    assert stats.pass_at_k()["3"] == 1.0
    assert stats.pass_hat_k()["2"] == pytest.approx(1 / 3)


def test_trial_variance_is_mean_sample_variance() -> None:
    stats = TrialStats(trials=3)
    stats.add([1.0, 0.0, 1.0])
    stats.add([0.0, 0.0, 0.0])
    expected = (sum((v - 2 / 3) ** 2 for v in (1, 0, 1)) / 2 + 0.0) / 2
    assert stats.trial_variance == pytest.approx(expected)


def test_numbers_give_variance_but_no_pass_k() -> None:
    stats = TrialStats(trials=2)
    stats.add([0.2, 0.4])
    assert stats.pass_at_k() == {}
    assert stats.pass_hat_k() == {}
    assert stats.trial_variance is not None
    assert math.isclose(stats.trial_variance, 0.02)
