"""Where results go besides the store: OpenTelemetry (``gen_ai.evaluation.result`` events for
scores, OTLP spans for a run's tasks)."""

from __future__ import annotations

from evalsi.sinks._otel import EVENT_NAME, ExportCounts, OtelScoreExporter, evaluation_attributes
from evalsi.sinks._spans import OtlpSpanExporter, traces_url

__all__ = [
    "EVENT_NAME",
    "ExportCounts",
    "OtelScoreExporter",
    "OtlpSpanExporter",
    "evaluation_attributes",
    "traces_url",
]
