"""Unbiased estimators of pass@k and pass^k from n trials of which c passed."""

from __future__ import annotations

import math
import operator

import numpy as np


def _check(n: int, c: int, k: int) -> tuple[int, int, int]:
    """Validate the counts and return them as Python ints (numpy integers are accepted)."""
    out: list[int] = []
    for name, value in (("n", n), ("c", c), ("k", k)):
        # operator.index accepts int and numpy integers and rejects floats; a bool is an int to
        # Python but almost surely a mistake here.
        if isinstance(value, bool | np.bool_):
            raise ValueError(f"{name} must be an int, got bool")
        try:
            out.append(operator.index(value))
        except TypeError:
            raise ValueError(f"{name} must be an int, got {type(value).__name__}") from None
    n, c, k = out
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    return n, c, k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k, the chance that at least one of k trials passes.

    Computes ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021) as the product
    ``1 - Π_{i=n-c+1}^{n} (1 - k/i)``: the binomial coefficients overflow a float long before
    realistic n, the product of terms in (0, 1] does not.

    Args:
        n: Trials run for the sample, at least 1.
        c: Trials that passed, ``0 <= c <= n``.
        k: Trials in the hypothetical budget, ``1 <= k <= n``.

    Returns:
        The estimate in [0, 1].

    Raises:
        ValueError: If an argument is not an int or is out of range (including ``k > n``).

    Example:
        >>> round(pass_at_k(n=10, c=3, k=2), 4)
        0.5333
    """
    n, c, k = _check(n, c, k)
    if n - c < k:
        # Every k-subset contains a passing trial.
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k, the chance that k independent trials all pass.

    Computes ``C(c, k) / C(n, k)`` as the product ``Π_{i=0}^{k-1} (c-i)/(n-i)``, which stays in
    range where the coefficients would overflow. pass^k measures reliability (an agent that must
    succeed every time), where pass@k measures capability under retries; pass^k <= pass@k.

    Args:
        n: Trials run for the sample, at least 1.
        c: Trials that passed, ``0 <= c <= n``.
        k: Trials that must all pass, ``1 <= k <= n``.

    Returns:
        The estimate in [0, 1].

    Raises:
        ValueError: If an argument is not an int or is out of range (including ``k > n``).

    Example:
        >>> round(pass_hat_k(n=10, c=8, k=3), 4)
        0.4667
    """
    n, c, k = _check(n, c, k)
    return 0.0 if c < k else math.prod((c - i) / (n - i) for i in range(k))
