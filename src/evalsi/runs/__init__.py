"""Ways in that produce runs. Today: Score (grade records that already hold outputs)."""

from evalsi.runs._compare import compare_runs
from evalsi.runs._comparison import Comparison, MetricComparison, Unmatched
from evalsi.runs._gate_results import GATE_COLUMNS, GateResult, gate_rows, gates_exit_code
from evalsi.runs._gate_syntax import EvaluatorMetrics
from evalsi.runs._gates import Gate, evaluate_gates, parse_gates
from evalsi.runs._plan import EvaluatorLike, bind_all
from evalsi.runs._result import (
    TABLE_COLUMNS,
    ScoreResult,
    format_ci,
    format_number,
    metric_rows,
    render_markdown,
    render_plain,
)
from evalsi.runs._score import Progress, open_store, score_async
from evalsi.runs._summaries import summaries_from_dicts, summary_from_dict

__all__ = [
    "GATE_COLUMNS",
    "TABLE_COLUMNS",
    "Comparison",
    "EvaluatorLike",
    "EvaluatorMetrics",
    "Gate",
    "GateResult",
    "MetricComparison",
    "Progress",
    "ScoreResult",
    "Unmatched",
    "bind_all",
    "compare_runs",
    "evaluate_gates",
    "format_ci",
    "format_number",
    "gate_rows",
    "gates_exit_code",
    "metric_rows",
    "open_store",
    "parse_gates",
    "render_markdown",
    "render_plain",
    "score_async",
    "summaries_from_dicts",
    "summary_from_dict",
]
