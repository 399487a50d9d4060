"""Where results go besides the store: OpenTelemetry (``gen_ai.evaluation.result`` events for
scores, OTLP spans for a run's tasks), and a stored run's results sent to the tools teams
already read — MLflow, an S3 bucket (Parquet), Weights & Biases, a signed webhook
(``open_sink``; ``runs.export_run`` feeds them from the store). Names are imported on first
use (core/_lazy.py): a run that sends nothing loads none of their libraries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.sinks._open import SINK_KINDS, TRACE_SINK_KINDS, open_sink, open_trace_sink
    from evalsi.sinks._otel import (
        EVENT_NAME,
        ExportCounts,
        OtelScoreExporter,
        evaluation_attributes,
    )
    from evalsi.sinks._sink import (
        RESULT_COLUMNS,
        Receipt,
        ResultRow,
        RunHeader,
        Sink,
        TraceScore,
        TraceSink,
        result_rows,
    )
    from evalsi.sinks._spans import OtlpSpanExporter, traces_url

__all__ = [
    "EVENT_NAME",
    "RESULT_COLUMNS",
    "SINK_KINDS",
    "TRACE_SINK_KINDS",
    "ExportCounts",
    "OtelScoreExporter",
    "OtlpSpanExporter",
    "Receipt",
    "ResultRow",
    "RunHeader",
    "Sink",
    "TraceScore",
    "TraceSink",
    "evaluation_attributes",
    "open_sink",
    "open_trace_sink",
    "result_rows",
    "traces_url",
]

__getattr__ = lazy_exports(__name__, __file__)
