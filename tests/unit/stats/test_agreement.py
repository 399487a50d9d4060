"""Agreement statistics against their reference implementations: scikit-learn's
``cohen_kappa_score``, the ``krippendorff`` package, ``scipy.stats.pearsonr`` / ``spearmanr``,
on published examples and on real data (scikit-learn's bundled datasets), plus properties."""

from __future__ import annotations

import warnings
from typing import Any

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import cross_val_predict
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from evalsi.stats import (
    ALPHA_LEVELS,
    AlphaLevel,
    KappaWeights,
    average_ranks,
    cohen_kappa,
    krippendorff_alpha,
    pearson,
    spearman,
)

NAN = float("nan")

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers,
# twelve units, values 1-5, missing values; the paper gives the alphas below to 3 decimals.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]
PUBLISHED = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}


def _raters(loader: Any) -> list[np.ndarray]:
    """Three classifiers' out-of-fold predictions on a real dataset: three 'raters'."""
    x, y = loader(return_X_y=True)
    models = [
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
        GaussianNB(),
        DecisionTreeClassifier(max_depth=3, random_state=0),
        KNeighborsClassifier(n_neighbors=15),
    ]
    return [y, *(cross_val_predict(m, x, y, cv=5) for m in models)]


@pytest.fixture(scope="module")
def wine_raters() -> list[np.ndarray]:
    return _raters(load_wine)


# ---------------------------------------------------------------------------------------------
# Cohen's kappa


def test_kappa_of_the_textbook_example_is_0_4() -> None:
    # 50 grant proposals: both say yes 20, A yes / B no 5, A no / B yes 10, both no 15
    a = ["yes"] * 20 + ["yes"] * 5 + ["no"] * 10 + ["no"] * 15
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("loader", [load_iris, load_wine, load_breast_cancer])
def test_kappa_equals_sklearn_on_classifier_raters(loader: Any, weights: KappaWeights) -> None:
    raters = _raters(loader)
    for i in range(len(raters)):
        for j in range(i + 1, len(raters)):
            a, b = raters[i].tolist(), raters[j].tolist()
            expected = cohen_kappa_score(a, b, weights=weights)
            assert cohen_kappa(a, b, weights=weights) == pytest.approx(expected, abs=1e-12)


def test_kappa_with_string_and_boolean_labels_equals_sklearn(wine_raters: list[Any]) -> None:
    names = np.array(["barolo", "grignolino", "barbera"])
    a, b = names[wine_raters[0]].tolist(), names[wine_raters[2]].tolist()
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    # weighted kappa orders labels alphabetically, as sklearn does
    for weights in ("linear", "quadratic"):
        expected = cohen_kappa_score(a, b, weights=weights)
        assert cohen_kappa(a, b, weights=weights) == pytest.approx(expected, abs=1e-12)
    x, y = (wine_raters[0] == 0).tolist(), (wine_raters[3] == 0).tolist()
    assert cohen_kappa(x, y) == pytest.approx(cohen_kappa_score(x, y), abs=1e-12)


def test_kappa_edge_cases() -> None:
    assert cohen_kappa(["a", "a", "a"], ["a", "a", "a"]) is None  # 0/0: undefined, not NaN
    # both constant but different: no agreement beyond chance, kappa 0 (sklearn agrees)
    assert cohen_kappa(["a", "a"], ["b", "b"]) == pytest.approx(0.0)
    assert cohen_kappa(["a", "b"], ["b", "a"]) == pytest.approx(
        cohen_kappa_score(["a", "b"], ["b", "a"])
    )
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="no items"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa(["a", "b"], ["a", "b"], weights="cubic")  # type: ignore[arg-type]


labels = st.lists(st.sampled_from(["pass", "fail", "unsure"]), min_size=2, max_size=60)


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_kappa_is_symmetric_bounded_and_equals_sklearn(data: st.DataObject) -> None:
    a = data.draw(labels)
    b = data.draw(
        st.lists(st.sampled_from(["pass", "fail", "unsure"]), min_size=len(a), max_size=len(a))
    )
    for weights in (None, "linear", "quadratic"):
        k = cohen_kappa(a, b, weights=weights)
        assert k == cohen_kappa(b, a, weights=weights) or (
            k is not None and k == pytest.approx(cohen_kappa(b, a, weights=weights), abs=1e-12)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn warns (and gives NaN) where kappa is 0/0
            expected = cohen_kappa_score(a, b, weights=weights)
        if k is None:
            assert np.isnan(expected)
        else:
            assert k == pytest.approx(expected, abs=1e-12)
            assert k <= 1.0 + 1e-12


@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=40))
def test_kappa_of_identical_raters_is_one(a: list[str]) -> None:
    k = cohen_kappa(a, list(a))
    assert (k is None) if len(set(a)) == 1 else (k == pytest.approx(1.0))


# ---------------------------------------------------------------------------------------------
# Krippendorff's alpha


@pytest.mark.parametrize("level", ALPHA_LEVELS)
def test_alpha_reproduces_krippendorffs_published_example(level: AlphaLevel) -> None:
    value = krippendorff_alpha(KRIPPENDORFF_2011, level=level)
    assert value == pytest.approx(PUBLISHED[level], abs=5e-4)
    reference = krippendorff.alpha(reliability_data=KRIPPENDORFF_2011, level_of_measurement=level)
    assert value == pytest.approx(reference, abs=1e-12)


@pytest.mark.parametrize("level", ALPHA_LEVELS)
def test_alpha_equals_the_package_on_classifier_raters_with_gaps(
    wine_raters: list[np.ndarray], level: AlphaLevel
) -> None:
    data = np.vstack(wine_raters).astype(float) + 1.0  # classes 1..3 (ratio needs no zeros)
    rng = np.random.default_rng(7)
    data[rng.random(data.shape) < 0.25] = NAN  # raters skip a quarter of the wines
    reference = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    assert krippendorff_alpha(data, level=level) == pytest.approx(reference, abs=1e-12)


def test_alpha_on_diabetes_scores_at_interval_and_ratio_levels() -> None:
    x, y = load_diabetes(return_X_y=True)
    # three "raters" of disease progression: the truth and two linear fits on one feature each
    fits = [np.polyval(np.polyfit(x[:, k], y, 1), x[:, k]) for k in (2, 8)]
    data = np.vstack([y, *fits])[:, :200]  # the package is slow on many distinct values
    for level in ("interval", "ratio"):
        reference = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert krippendorff_alpha(data, level=level) == pytest.approx(reference, abs=1e-9)


def test_alpha_edge_cases() -> None:
    assert krippendorff_alpha([[1, 1, 1], [1, 1, 1]], level="nominal") is None  # one value
    assert krippendorff_alpha([[1, NAN], [NAN, 2]]) is None  # no unit rated twice
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha([[1, 2], [1, 2]], level="cardinal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2-D"):
        krippendorff_alpha([1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        krippendorff_alpha([[1, float("inf")], [1, 2]])


matrices = st.integers(2, 5).flatmap(
    lambda raters: st.lists(
        st.lists(st.one_of(st.none(), st.integers(1, 5)), min_size=raters, max_size=raters),
        min_size=2,
        max_size=25,
    )
)


def _matrix(units: list[list[int | None]]) -> np.ndarray:
    return np.array([[NAN if v is None else v for v in u] for u in units], dtype=float).T


@given(matrices, st.sampled_from(ALPHA_LEVELS))
@settings(max_examples=150, deadline=None)
def test_alpha_equals_the_package_and_ignores_order(units: list[Any], level: AlphaLevel) -> None:
    data = _matrix(units)
    value = krippendorff_alpha(data, level=level)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    except ValueError:  # the package refuses data with fewer than two values
        reference = NAN
    if value is None:
        assert np.isnan(reference) or not np.isfinite(reference)
        return
    assert value == pytest.approx(reference, abs=1e-9)
    shuffled = data[::-1, ::-1]  # raters and units in another order
    assert krippendorff_alpha(shuffled, level=level) == pytest.approx(value, abs=1e-9)


@given(
    st.lists(st.integers(1, 5), min_size=2, max_size=30).filter(lambda v: len(set(v)) > 1),
    st.integers(2, 5),
    st.sampled_from(ALPHA_LEVELS),
)
def test_alpha_is_one_when_every_rater_agrees(
    values: list[int], raters: int, level: AlphaLevel
) -> None:
    data = np.tile(np.array(values, dtype=float), (raters, 1))
    assert krippendorff_alpha(data, level=level) == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# Correlations


DIABETES_PAIRS = [(2, None), (8, None), (1, None), (2, 3)]  # bmi, s5, sex (ties), bmi vs bp


@pytest.mark.parametrize(("i", "j"), DIABETES_PAIRS)
def test_pearson_equals_scipy_with_p_value_and_interval(i: int, j: int | None) -> None:
    x, target = load_diabetes(return_X_y=True)
    a, b = x[:, i], (target if j is None else x[:, j])
    ours = pearson(a, b)
    ref = scipy_stats.pearsonr(a, b)
    ci = ref.confidence_interval()
    assert ours.value == pytest.approx(ref.statistic, abs=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
    assert (ours.ci.low, ours.ci.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert ours.ci.method == "fisher-z"
    assert ours.n == a.size


@pytest.mark.parametrize(("i", "j"), DIABETES_PAIRS)
def test_spearman_equals_scipy_with_ties(i: int, j: int | None) -> None:
    x, target = load_diabetes(return_X_y=True)
    a, b = x[:, i], (target if j is None else x[:, j])
    ours, ref = spearman(a, b), scipy_stats.spearmanr(a, b)
    assert ours.value == pytest.approx(ref.statistic, abs=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
    assert ours.ci.low is not None
    assert ours.ci.high is not None
    assert ours.ci.low <= ours.value <= ours.ci.high


def test_average_ranks_equal_scipy_rankdata() -> None:
    sex = load_diabetes(return_X_y=True)[0][:, 1]  # two values: massive ties
    assert average_ranks(sex) == pytest.approx(scipy_stats.rankdata(sex))


def test_correlation_edge_cases() -> None:
    constant = pearson([1, 2, 3], [4, 4, 4])
    assert (constant.value, constant.p_value, constant.ci.low) == (None, None, None)
    assert spearman([1, 1, 1], [1, 2, 3]).value is None
    two = pearson([1, 2], [3, 1])
    assert (two.value, two.p_value, two.ci.low) == (-1.0, 1.0, None)
    three = pearson([1, 2, 3], [1, 3, 2])  # scipy gives no interval at n = 3 either
    assert three.value == pytest.approx(0.5)
    assert three.ci.low is None
    perfect = spearman([1, 2, 3, 4], [10, 20, 30, 40])
    assert (perfect.value, perfect.p_value) == (pytest.approx(1.0), 0.0)
    with pytest.raises(ValueError, match="same length"):
        pearson([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="two pairs"):
        spearman([1], [1])


pairs = st.lists(
    st.tuples(st.integers(-50, 50), st.integers(-50, 50)), min_size=4, max_size=60
).filter(lambda p: len({a for a, _ in p}) > 1 and len({b for _, b in p}) > 1)


@given(pairs)
@settings(max_examples=150, deadline=None)
def test_correlations_equal_scipy_and_are_symmetric(p: list[tuple[int, int]]) -> None:
    x = np.array([a for a, _ in p], dtype=float)
    y = np.array([b for _, b in p], dtype=float)
    r, rho = pearson(x, y), spearman(x, y)
    assert r.value == pytest.approx(scipy_stats.pearsonr(x, y).statistic, abs=1e-9)
    ref = scipy_stats.spearmanr(x, y)
    assert rho.value == pytest.approx(ref.statistic, abs=1e-9)
    assert rho.p_value == pytest.approx(ref.pvalue, abs=1e-9)
    assert pearson(y, x).value == pytest.approx(r.value, abs=1e-12)
    assert pearson(3 * x + 7, y).value == pytest.approx(r.value, abs=1e-9)  # affine invariance


def test_interval_alpha_is_accurate_far_from_zero_and_none_when_flat() -> None:
    x, y = load_diabetes(return_X_y=True)
    fit = np.polyval(np.polyfit(x[:, 2], y, 1), x[:, 2])
    data = (np.vstack([y, fit]) + 1e6)[:, :200]  # large offset, small spread: no cancellation
    reference = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    assert krippendorff_alpha(data, level="interval") == pytest.approx(reference, rel=1e-9)
    flat = np.full((3, 20), 0.1)
    flat[0, 3] = NAN
    assert krippendorff_alpha(flat, level="interval") is None
    assert krippendorff_alpha(flat, level="nominal") is None
