"""Two runs compared metric by metric: paired where the records match (``_compare``), and the
comparison as data and text (``_comparison``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.runs.compare._compare import compare_runs
    from evalsi.runs.compare._comparison import (
        CompareKind,
        Comparison,
        MetricComparison,
        Unmatched,
        Verdict,
    )

__all__ = [
    "CompareKind",
    "Comparison",
    "MetricComparison",
    "Unmatched",
    "Verdict",
    "compare_runs",
]

# Imported on first use (core/_lazy.py).
__getattr__ = lazy_exports(__name__, __file__)
