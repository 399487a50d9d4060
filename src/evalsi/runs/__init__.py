"""Ways in that produce runs. Today: Score (grade records that already hold outputs)."""

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
    "TABLE_COLUMNS",
    "EvaluatorLike",
    "Progress",
    "ScoreResult",
    "bind_all",
    "format_ci",
    "format_number",
    "metric_rows",
    "open_store",
    "render_markdown",
    "render_plain",
    "score_async",
    "summaries_from_dicts",
    "summary_from_dict",
]
