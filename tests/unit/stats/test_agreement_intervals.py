"""The bootstrap intervals of kappa, alpha and Spearman's rho: the vectorised resampling gives
exactly what the reference implementation computes on each resample of the same indexes."""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pytest
from scipy import stats as scipy_stats
from sklearn.datasets import load_diabetes, load_wine
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import cross_val_predict
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from evalsi.stats import (
    AlphaLevel,
    alpha_interval,
    cohen_kappa,
    kappa_interval,
    krippendorff_alpha,
    spearman,
)
from evalsi.stats._alpha import MAX_ORDINAL_VALUES

RESAMPLES = 300
SEED = 5


def _indexes(n: int) -> np.ndarray:
    """The resamples ``_index_bootstrap`` draws: one batch, as ``bootstrap_distribution`` does."""
    return np.random.default_rng(SEED).integers(0, n, size=(RESAMPLES, n))


def _percentiles(values: list[float]) -> tuple[float, float]:
    finite = np.array([v for v in values if np.isfinite(v)])
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)


@pytest.fixture(scope="module")
def wine() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, y = load_wine(return_X_y=True)
    nb = cross_val_predict(GaussianNB(), x, y, cv=5)
    tree = cross_val_predict(DecisionTreeClassifier(max_depth=2, random_state=0), x, y, cv=5)
    return y, nb, tree


@pytest.mark.parametrize("weights", [None, "quadratic"])
def test_kappa_interval_is_sklearn_on_each_resample(
    wine: tuple[np.ndarray, ...], weights: str | None
) -> None:
    truth, nb, _ = wine
    a, b = truth.tolist(), nb.tolist()
    expected = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for idx in _indexes(len(a)):
            expected.append(cohen_kappa_score(truth[idx], nb[idx], weights=weights))
    ci = kappa_interval(a, b, weights=weights, n_resamples=RESAMPLES, seed=SEED)  # type: ignore[arg-type]
    assert (ci.low, ci.high) == pytest.approx(_percentiles(expected), abs=1e-12)
    assert ci.method == "bootstrap-percentile"
    value = cohen_kappa(a, b, weights=weights)  # type: ignore[arg-type]
    assert value is not None
    assert ci.low is not None
    assert ci.high is not None
    assert ci.low <= value <= ci.high


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_interval_is_the_package_on_each_resample_of_units(
    wine: tuple[np.ndarray, ...], level: AlphaLevel
) -> None:
    data = np.vstack(wine).astype(float)
    data[np.random.default_rng(3).random(data.shape) < 0.3] = np.nan
    pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]  # units rated at least twice
    expected = [
        krippendorff.alpha(reliability_data=pairable[:, idx], level_of_measurement=level)
        for idx in _indexes(pairable.shape[1])
    ]
    ci = alpha_interval(data, level=level, n_resamples=RESAMPLES, seed=SEED)
    assert (ci.low, ci.high) == pytest.approx(_percentiles(expected), abs=1e-9)
    value = krippendorff_alpha(data, level=level)
    assert value is not None
    assert ci.low is not None
    assert ci.high is not None
    assert ci.low <= value <= ci.high


def test_spearman_interval_is_scipy_on_each_resample() -> None:
    x, y = load_diabetes(return_X_y=True)
    a, b = x[:120, 1], y[:120]  # sex (two values: heavy ties) against progression
    expected = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for idx in _indexes(a.size):
            expected.append(scipy_stats.spearmanr(a[idx], b[idx]).statistic)
    ci = spearman(a, b, n_resamples=RESAMPLES, seed=SEED).ci
    assert (ci.low, ci.high) == pytest.approx(_percentiles(expected), abs=1e-12)


def test_intervals_are_reproducible_and_degenerate_cases_have_none() -> None:
    a = ["y", "n", "y", "y", "n", "y", "n", "n"]
    b = ["y", "n", "n", "y", "n", "y", "y", "n"]
    assert kappa_interval(a, b, seed=1) == kappa_interval(a, b, seed=1)
    assert kappa_interval(a, b, seed=1) != kappa_interval(a, b, seed=2)
    one = kappa_interval(["y"], ["y"])
    assert (one.low, one.high) == (None, None)
    always = kappa_interval(["y"] * 5, ["y"] * 5)  # undefined on every resample
    assert (always.low, always.high) == (None, None)
    with pytest.raises(ValueError, match="n_resamples"):
        kappa_interval(a, b, n_resamples=0)


def test_ordinal_bootstrap_over_too_many_values_is_refused() -> None:
    values = np.arange(MAX_ORDINAL_VALUES + 1, dtype=float)
    data = np.vstack([values, values + 1])
    with pytest.raises(ValueError, match="ordinal bootstrap"):
        alpha_interval(data, level="ordinal")
    assert alpha_interval(data, level="interval").low is not None


def test_interval_bootstrap_of_continuous_scores_needs_no_value_matrix() -> None:
    rng = np.random.default_rng(0)
    truth = rng.normal(size=3000)
    data = np.vstack([truth + rng.normal(scale=s, size=truth.size) for s in (0.3, 0.5, 0.8)])
    ci = alpha_interval(data, level="interval", n_resamples=200)  # 9000 distinct values
    value = krippendorff_alpha(data, level="interval")
    assert value is not None
    assert ci.low is not None
    assert ci.high is not None
    assert ci.low < value < ci.high
    assert ci.high - ci.low < 0.05
    with pytest.raises(ValueError, match="nominal bootstrap over 9000 distinct values"):
        alpha_interval(data, level="nominal")
