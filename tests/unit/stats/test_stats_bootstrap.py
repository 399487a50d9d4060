"""Bootstrap intervals against scipy.stats.bootstrap (with a resampling tolerance)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from evalsi.core import Interval
from evalsi.stats import BootstrapMethod, _bootstrap, bootstrap_interval, summarize, wilson

_DATA = {
    "skewed": np.random.default_rng(11).exponential(size=40),
    "normal": np.random.default_rng(12).normal(5.0, 2.0, size=80),
    "binary": (np.random.default_rng(13).random(60) < 0.3).astype(float),
}


def _median(x: Any, axis: int = -1) -> Any:
    return np.median(x, axis=axis)


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("name", sorted(_DATA))
def test_matches_scipy_within_resampling_error(name: str, method: BootstrapMethod) -> None:
    data = _DATA[name]
    resamples = 20_000
    ref = scipy_stats.bootstrap(
        (data,),
        np.mean,
        method="BCa" if method == "bca" else "percentile",
        n_resamples=resamples,
        rng=np.random.default_rng(1),
    )
    ci = bootstrap_interval(data, method=method, n_resamples=resamples, seed=2)
    assert ci.method == f"bootstrap-{method}"
    assert ci.level == 0.95
    # Different resamples, so compare in units of the bootstrap standard error: the Monte Carlo
    # error of a 2.5% quantile with 20 000 resamples is about 0.03 of it. The mean of 0/1 data
    # only takes values k/n, so there a quantile may also land one step of 1/n away.
    tolerance = 0.15 * float(ref.standard_error)
    if name == "binary":
        tolerance += 1.0 / data.size
    assert ci.low == pytest.approx(ref.confidence_interval.low, abs=tolerance)
    assert ci.high == pytest.approx(ref.confidence_interval.high, abs=tolerance)


def test_bca_with_median_matches_scipy() -> None:
    data = _DATA["skewed"]
    ref = scipy_stats.bootstrap(
        (data,), np.median, method="BCa", n_resamples=20_000, rng=np.random.default_rng(1)
    )
    ci = bootstrap_interval(data, method="bca", n_resamples=20_000, seed=2, statistic=_median)
    tolerance = 0.2 * float(ref.standard_error)
    assert ci.low == pytest.approx(ref.confidence_interval.low, abs=tolerance)
    assert ci.high == pytest.approx(ref.confidence_interval.high, abs=tolerance)


def test_level_is_honoured() -> None:
    data = _DATA["normal"]
    ref = scipy_stats.bootstrap(
        (data,),
        np.mean,
        method="percentile",
        confidence_level=0.8,
        n_resamples=20_000,
        rng=np.random.default_rng(1),
    )
    ci = bootstrap_interval(data, level=0.8, n_resamples=20_000)
    tolerance = 0.15 * float(ref.standard_error)
    assert ci.level == 0.8
    assert ci.low == pytest.approx(ref.confidence_interval.low, abs=tolerance)
    assert ci.high == pytest.approx(ref.confidence_interval.high, abs=tolerance)


def test_bca_corrects_for_skew() -> None:
    # For a right-skewed sample BCa shifts the interval up relative to the percentile method.
    data = _DATA["skewed"]
    pct = bootstrap_interval(data, method="percentile", seed=5)
    bca = bootstrap_interval(data, method="bca", seed=5)
    assert pct.low is not None
    assert bca.low is not None
    assert pct.high is not None
    assert bca.high is not None
    assert bca.low > pct.low
    assert bca.high > pct.high


def test_same_seed_same_interval_and_seed_matters() -> None:
    data = _DATA["normal"]
    assert bootstrap_interval(data, seed=3) == bootstrap_interval(data, seed=3)
    assert bootstrap_interval(data, seed=3) != bootstrap_interval(data, seed=4)


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("values", [[], [1.5]])
def test_fewer_than_two_values_is_undefined(method: BootstrapMethod, values: list[float]) -> None:
    ci = bootstrap_interval(values, method=method)
    assert ci == Interval(None, None, f"bootstrap-{method}", 0.95)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_all_equal_values_have_no_interval(method: BootstrapMethod) -> None:
    # Every resample is the same: resampling says nothing about spread, never [0.25, 0.25].
    ci = bootstrap_interval([0.25] * 10, method=method)
    assert ci == Interval(None, None, f"bootstrap-{method}", 0.95)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_all_passed_is_never_one_one(method: BootstrapMethod) -> None:
    # Plain bootstrap: no interval; as a pass rate (summarize) it is widened to Wilson's.
    assert bootstrap_interval([1, 1, 1, 1], method=method).low is None
    s = summarize([1] * 10, kind="passed", bootstrap=method)
    assert s.interval.method == f"bootstrap-{method}"
    assert s.interval.high == 1.0
    assert s.interval.low == pytest.approx(0.025 ** (1 / 10), abs=1e-12)  # Clopper-Pearson


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_pass_rate_bootstrap_is_never_narrower_than_wilson(method: BootstrapMethod) -> None:
    for successes, n in [(1, 5), (0, 5), (19, 20), (50, 100), (3, 40)]:
        values = [1] * successes + [0] * (n - successes)
        got = summarize(values, kind="passed", bootstrap=method).interval
        plain = bootstrap_interval(values, method=method)
        edge = wilson(successes, n)
        assert got.low is not None
        assert got.high is not None
        assert edge.low is not None
        assert edge.high is not None
        assert got.low <= edge.low
        assert got.high >= edge.high
        if plain.low is not None and plain.high is not None:
            assert got.low <= plain.low
            assert got.high >= plain.high


def test_batching_keeps_results_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _DATA["skewed"]
    whole = bootstrap_interval(data, method="bca", n_resamples=20_000, seed=9)
    # Force many small batches of resamples and jackknife rows.
    monkeypatch.setattr(_bootstrap, "_MAX_BATCH_ELEMENTS", 7 * data.size)
    batched = bootstrap_interval(data, method="bca", n_resamples=20_000, seed=9)
    se = float(np.std(data, ddof=1) / np.sqrt(data.size))
    assert batched.low == pytest.approx(whole.low, abs=0.15 * se)
    assert batched.high == pytest.approx(whole.high, abs=0.15 * se)


def test_jackknife_batches_match_the_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _DATA["normal"][:13]
    expected = np.array([np.delete(data, i).mean() for i in range(data.size)])
    np.testing.assert_allclose(_bootstrap._jackknife(data, np.mean), expected, rtol=1e-12)
    monkeypatch.setattr(_bootstrap, "_MAX_BATCH_ELEMENTS", 30)
    np.testing.assert_allclose(_bootstrap._jackknife(data, np.mean), expected, rtol=1e-12)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="method"):
        bootstrap_interval([1.0, 2.0], method="basic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_interval([1.0, 2.0], n_resamples=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_interval([1.0, 2.0], level=1.0)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_interval([1.0, float("nan")])


def test_rejects_statistic_that_does_not_reduce_rows() -> None:
    def identity(x: Any, axis: int = -1) -> Any:
        return x

    with pytest.raises(ValueError, match="one value per row"):
        bootstrap_interval([1.0, 2.0, 3.0], statistic=identity)


def test_rejects_statistic_returning_nan() -> None:
    def broken(x: Any, axis: int = -1) -> Any:
        return np.full(x.shape[0], np.nan)

    with pytest.raises(ValueError, match="non-finite"):
        bootstrap_interval([1.0, 2.0, 3.0], statistic=broken)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False), min_size=2, max_size=30),
    st.sampled_from(["percentile", "bca"]),
)
def test_interval_contains_mean(values: list[float], method: BootstrapMethod) -> None:
    assume(np.ptp(values) > 1e-6)  # all equal: no interval (tested above)
    ci = bootstrap_interval(values, method=method, n_resamples=500)
    mean = float(np.mean(values))
    assert ci.low is not None
    assert ci.high is not None
    assert ci.low <= mean + 1e-9 <= ci.high + 2e-9
