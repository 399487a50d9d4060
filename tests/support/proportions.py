"""The reference for evalsi's pass-rate interval, built from statsmodels alone.

evalsi's ``wilson`` is the Wilson score interval, except that with at most 10 successes or
failures it is the hull of Wilson and Clopper-Pearson (``docs/guides/statistics.md``): plain
Wilson undercovers there. Tests compare against this, never against evalsi's own output.
"""

from __future__ import annotations

from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

EDGE_COUNT = 10


def wilson_reference(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """statsmodels' Wilson bounds, widened to its Clopper-Pearson ("beta") ones at the edges."""
    low, high = proportion_confint(successes, n, alpha=alpha, method="wilson")
    if min(successes, n - successes) > EDGE_COUNT:
        return float(low), float(high)
    exact_low, exact_high = proportion_confint(successes, n, alpha=alpha, method="beta")
    return float(min(low, exact_low)), float(max(high, exact_high))
