"""describe() and the interval-selection rule of summarize()."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalsi.core import Interval
from evalsi.stats import (
    Summary,
    bootstrap_interval,
    cluster_wilson,
    clustered_interval,
    describe,
    summarize,
    t_interval,
    wilson,
)


def test_describe_matches_numpy() -> None:
    x = np.random.default_rng(0).normal(size=25)
    n, mean, std = describe(x)
    assert n == 25
    assert mean == pytest.approx(float(np.mean(x)))
    assert std == pytest.approx(float(np.std(x, ddof=1)))


def test_describe_edges() -> None:
    assert describe([]) == (0, None, None)
    assert describe([3.0]) == (1, 3.0, None)
    assert describe([2.0, 2.0, 2.0]) == (3, 2.0, 0.0)
    assert describe([True, True]) == (2, 1.0, 0.0)


def test_describe_returns_python_floats() -> None:
    _, mean, std = describe(np.array([1, 2, 4]))
    assert type(mean) is float
    assert type(std) is float


@given(st.lists(st.floats(-1e6, 1e6), max_size=40))
def test_describe_mean_within_range(values: list[float]) -> None:
    n, mean, std = describe(values)
    assert n == len(values)
    if values:
        assert mean is not None
        assert min(values) - 1e-6 <= mean <= max(values) + 1e-6
    if len(values) >= 2:
        assert std is not None
        assert std >= 0.0


def test_passed_uses_wilson() -> None:
    s = summarize([1, 0, 1, 1, 1], kind="passed")
    assert (s.n, s.mean, s.interval, s.clusters) == (5, 0.8, wilson(4, 5), None)
    assert s.std == pytest.approx(0.4472135955)


def test_passed_accepts_booleans() -> None:
    assert summarize([True, False, True], kind="passed") == summarize([1, 0, 1], kind="passed")


def test_number_uses_t() -> None:
    values = [0.2, 0.4, 0.9, 0.5]
    s = summarize(values, kind="number", level=0.9)
    assert s.interval == t_interval(values, level=0.9)
    assert s.clusters is None


def test_clusters_use_cluster_t_for_numbers_and_cluster_wilson_for_pass_rates() -> None:
    values = [1, 0, 1, 1, 0, 0, 1, 1]
    clusters = ["q1", "q1", "q2", "q2", "q3", "q3", "q4", "q4"]
    raw = clustered_interval(values, clusters)
    s = summarize(values, kind="number", clusters=clusters)
    assert s.interval == raw
    assert s.clusters == 4
    s = summarize(values, kind="passed", clusters=clusters)
    assert s.interval == cluster_wilson(values, clusters)
    assert s.interval.method == "cluster-wilson"
    assert s.clusters == 4


def test_passed_interval_never_leaves_unit_range() -> None:
    values = [1, 1, 1, 0, 1, 1, 1, 1]
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d"]
    s = summarize(values, kind="passed", clusters=clusters)
    assert s.interval.low is not None
    assert s.interval.high is not None
    assert 0.0 <= s.interval.low <= s.interval.high <= 1.0


def test_bootstrap_wins_over_clusters() -> None:
    values = [0.1, 0.5, 0.3, 0.8, 0.6]
    s = summarize(values, kind="number", clusters=[1, 1, 2, 2, 3], bootstrap="bca", seed=4)
    assert s.interval == bootstrap_interval(values, method="bca", seed=4)
    assert s.clusters == 3


def test_all_passed() -> None:
    s = summarize([1] * 30, kind="passed")
    assert (s.n, s.mean, s.std) == (30, 1.0, 0.0)
    assert s.interval.high == 1.0
    assert s.interval.low is not None
    assert s.interval.low > 0.88


@pytest.mark.parametrize("kind", ["passed", "number"])
def test_empty(kind: str) -> None:
    s = summarize([], kind=kind)  # type: ignore[arg-type]
    assert (s.n, s.mean, s.std) == (0, None, None)
    assert (s.interval.low, s.interval.high) == (None, None)


def test_single_value() -> None:
    assert summarize([1], kind="passed") == Summary(1, 1.0, None, wilson(1, 1), None)
    assert summarize([0.7], kind="number") == Summary(1, 0.7, None, Interval(None, None, "t"), None)


def test_all_equal_numbers_have_no_interval() -> None:
    s = summarize(np.full(5, 0.3), kind="number")
    assert s.interval == Interval(None, None, "t")
    assert s.std == 0.0


@pytest.mark.parametrize("clustered", [False, True])
@pytest.mark.parametrize("value", [0, 1])
def test_all_equal_pass_rates_are_never_a_point(value: int, clustered: bool) -> None:
    values = [value] * 10
    clusters = [f"topic-{i}" for i in range(10)] if clustered else None
    s = summarize(values, kind="passed", clusters=clusters)
    assert s.interval.low is not None
    assert s.interval.high is not None
    assert s.interval.high - s.interval.low > 0.2
    assert s.interval.low <= value <= s.interval.high


def test_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="0 or 1"):
        summarize([0.5, 1.0], kind="passed")
    with pytest.raises(ValueError, match="kind"):
        summarize([0.5], kind="label")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same length"):
        summarize([1.0, 2.0], kind="number", clusters=["a"])
    with pytest.raises(ValueError, match="level"):
        summarize([1.0, 2.0], kind="number", level=2.0)
