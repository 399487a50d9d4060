"""The public surface of evalsi.stats, and the examples in its docstrings."""

from __future__ import annotations

import doctest
import importlib

import pytest

import evalsi.stats

_MODULES = [
    "_agreement",
    "_alpha",
    "_arrays",
    "_bootstrap",
    "_correlation",
    "_intervals",
    "_paired",
    "_passk",
    "_summary",
]


def test_public_names_are_pinned() -> None:
    assert sorted(evalsi.stats.__all__) == [
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
    for name in evalsi.stats.__all__:
        assert hasattr(evalsi.stats, name)


@pytest.mark.parametrize("module", _MODULES)
def test_docstring_examples_run(module: str) -> None:
    mod = importlib.import_module(f"evalsi.stats.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
