"""Statistics for evaluation results: intervals, paired comparisons, pass@k and pass^k.

Pure functions over plain sequences and numpy arrays. Every interval records its method and
level, so an aggregate can always say how its uncertainty was computed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.stats._agreement import KappaWeights, cohen_kappa, kappa_interval
    from evalsi.stats._alpha import ALPHA_LEVELS, AlphaLevel, alpha_interval, krippendorff_alpha
    from evalsi.stats._bootstrap import BootstrapMethod, Statistic, bootstrap_interval, degenerate
    from evalsi.stats._correlation import Correlation, average_ranks, pearson, spearman
    from evalsi.stats._intervals import (
        cluster_wilson,
        cluster_wilson_bounds,
        cluster_wilson_from_sums,
        clustered_interval,
        clustered_interval_from_sums,
        proportion_bounds,
        t_interval,
        t_interval_from_moments,
        wilson,
    )
    from evalsi.stats._paired import (
        McNemar,
        PairedDelta,
        mcnemar,
        newcombe_interval,
        paired_bootstrap,
    )
    from evalsi.stats._passk import pass_at_k, pass_hat_k
    from evalsi.stats._streaming import Moments
    from evalsi.stats._summary import Summary, SummaryKind, describe, summarize, with_wilson


__all__ = [
    "ALPHA_LEVELS",
    "AlphaLevel",
    "BootstrapMethod",
    "Correlation",
    "KappaWeights",
    "McNemar",
    "Moments",
    "PairedDelta",
    "Statistic",
    "Summary",
    "SummaryKind",
    "alpha_interval",
    "average_ranks",
    "bootstrap_interval",
    "cluster_wilson",
    "cluster_wilson_bounds",
    "cluster_wilson_from_sums",
    "clustered_interval",
    "clustered_interval_from_sums",
    "cohen_kappa",
    "degenerate",
    "describe",
    "kappa_interval",
    "krippendorff_alpha",
    "mcnemar",
    "newcombe_interval",
    "paired_bootstrap",
    "pass_at_k",
    "pass_hat_k",
    "pearson",
    "proportion_bounds",
    "spearman",
    "summarize",
    "t_interval",
    "t_interval_from_moments",
    "wilson",
    "with_wilson",
]

# Exports are imported on first use (core/_lazy.py): a command imports only what it needs.
__getattr__ = lazy_exports(__name__, __file__)
