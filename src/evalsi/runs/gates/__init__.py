"""CEL gates over a run's metrics: the syntax and its checks (``_syntax``), parsing and judging
(``_gates``), and the verdicts as rows and an exit code (``_results``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.runs.gates._data import GateData
    from evalsi.runs.gates._gates import Gate, evaluate_gates, parse_gates
    from evalsi.runs.gates._results import GATE_COLUMNS, GateResult, gate_rows, gates_exit_code
    from evalsi.runs.gates._syntax import EvaluatorMetrics

__all__ = [
    "GATE_COLUMNS",
    "EvaluatorMetrics",
    "Gate",
    "GateData",
    "GateResult",
    "evaluate_gates",
    "gate_rows",
    "gates_exit_code",
    "parse_gates",
]

# Imported on first use (core/_lazy.py).
__getattr__ = lazy_exports(__name__, __file__)
