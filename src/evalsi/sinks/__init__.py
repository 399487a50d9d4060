"""Where scores go besides the store: OpenTelemetry (``gen_ai.evaluation.result`` events)."""

from __future__ import annotations

from evalsi.sinks._otel import EVENT_NAME, OtelScoreExporter, evaluation_attributes

__all__ = ["EVENT_NAME", "ExportCounts", "OtelScoreExporter", "evaluation_attributes"]
