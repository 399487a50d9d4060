"""pass@k and pass^k against their combinatorial definitions and the HumanEval formula."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalsi.stats import pass_at_k, pass_hat_k


def _brute_force(n: int, c: int, k: int) -> tuple[float, float]:
    """Over all k-subsets of n trials (the first c passing): share with any pass, with all pass."""
    any_pass = all_pass = total = 0
    for subset in itertools.combinations(range(n), k):
        passes = sum(i < c for i in subset)
        any_pass += passes > 0
        all_pass += passes == k
        total += 1
    return any_pass / total, all_pass / total


def _humaneval(n: int, c: int, k: int) -> float:
    # The estimator as published with HumanEval (Chen et al. 2021, "Evaluating Large Language
    # Models Trained on Code", Fig. 3), written here from the paper's formula.
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


small_cases = [(n, c, k) for n in range(1, 9) for c in range(n + 1) for k in range(1, n + 1)]


@pytest.mark.parametrize(("n", "c", "k"), small_cases)
def test_matches_brute_force(n: int, c: int, k: int) -> None:
    any_pass, all_pass = _brute_force(n, c, k)
    assert pass_at_k(n, c, k) == pytest.approx(any_pass, abs=1e-12)
    assert pass_hat_k(n, c, k) == pytest.approx(all_pass, abs=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(200, 0, 1), (200, 13, 1), (200, 13, 10), (200, 13, 100), (1000, 1, 500), (50, 49, 2)],
)
def test_matches_exact_binomials_at_scale(n: int, c: int, k: int) -> None:
    at_k = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    hat_k = Fraction(math.comb(c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(at_k), rel=1e-12, abs=1e-15)
    assert pass_hat_k(n, c, k) == pytest.approx(float(hat_k), rel=1e-12, abs=1e-300)


@given(n=st.integers(1, 2000), data=st.data())
def test_matches_humaneval_formula(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    assert pass_at_k(n, c, k) == pytest.approx(_humaneval(n, c, k), rel=1e-12, abs=1e-15)


@given(n=st.integers(1, 300), data=st.data())
def test_monotone_in_k(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    if k < n:
        assert pass_at_k(n, c, k + 1) >= pass_at_k(n, c, k) - 1e-12
        assert pass_hat_k(n, c, k + 1) <= pass_hat_k(n, c, k) + 1e-12


@given(n=st.integers(1, 300), data=st.data())
def test_monotone_in_c(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    if c < n:
        assert pass_at_k(n, c + 1, k) >= pass_at_k(n, c, k) - 1e-12
        assert pass_hat_k(n, c + 1, k) >= pass_hat_k(n, c, k) - 1e-12


@given(n=st.integers(1, 300), data=st.data())
def test_pass_hat_k_at_most_pass_at_k_and_both_in_unit_interval(
    n: int, data: st.DataObject
) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    at_k, hat_k = pass_at_k(n, c, k), pass_hat_k(n, c, k)
    assert 0.0 <= hat_k <= at_k + 1e-12
    assert at_k <= 1.0


@given(n=st.integers(1, 500), data=st.data())
def test_k_equal_one_is_the_pass_rate(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)
    assert pass_hat_k(n, c, 1) == pytest.approx(c / n)


def test_accepts_numpy_integers() -> None:
    assert pass_at_k(np.int64(10), np.int32(3), np.int64(2)) == pass_at_k(10, 3, 2)  # type: ignore[arg-type]
    assert pass_hat_k(np.int64(10), np.int32(8), np.int64(3)) == pass_hat_k(10, 8, 3)  # type: ignore[arg-type]


def test_edges() -> None:
    assert pass_at_k(1, 1, 1) == 1.0
    assert pass_at_k(1, 0, 1) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_hat_k(5, 5, 5) == 1.0
    assert pass_hat_k(5, 4, 5) == 0.0
    assert pass_at_k(10, 2, 9) == 1.0


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(5, 2, 6), (5, 2, 0), (5, 2, -1), (5, 6, 1), (5, -1, 1), (0, 0, 0), (0, 0, 1)],
)
def test_rejects_out_of_range(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match=r"need|n must"):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError, match=r"need|n must"):
        pass_hat_k(n, c, k)


@pytest.mark.parametrize(
    ("n", "c", "k"), [(5.0, 2, 1), (5, True, 1), (5, 2, "1"), (5, np.bool_(True), 1)]
)
def test_rejects_non_integers(n: object, c: object, k: object) -> None:
    with pytest.raises(ValueError, match="must be an int"):
        pass_at_k(n, c, k)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be an int"):
        pass_hat_k(n, c, k)  # type: ignore[arg-type]
