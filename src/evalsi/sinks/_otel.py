"""Scores back into OpenTelemetry as GenAI ``gen_ai.evaluation.result`` events.

The GenAI semantic conventions model an evaluation result as a log-based event parented to
the span it evaluated, with ``gen_ai.evaluation.name`` (required), ``.score.value`` and
``.score.label`` (when they apply) and ``.explanation``. We emit exactly that through the
OpenTelemetry SDK's OTLP log exporter (batched, in its own thread), so dashboards on the
user's existing observability stack see online scores next to the traces they grade.
Needs the ``otel-export`` extra (the SDK and the OTLP/HTTP exporter).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalsi.core import Score, UserError

EVENT_NAME = "gen_ai.evaluation.result"
MAX_EXPLANATION = 4096


def evaluation_attributes(name: str, score: Score) -> dict[str, str | float]:
    """The event's attributes for one score (``name``: the evaluator instance or metric)."""
    attrs: dict[str, str | float] = {"gen_ai.evaluation.name": name}
    if score.number is not None:
        attrs["gen_ai.evaluation.score.value"] = float(score.number)
    elif score.passed is not None:
        attrs["gen_ai.evaluation.score.value"] = 1.0 if score.passed else 0.0
    if score.label:
        attrs["gen_ai.evaluation.score.label"] = score.label
    elif score.passed is not None:
        attrs["gen_ai.evaluation.score.label"] = "pass" if score.passed else "fail"
    if score.explanation:
        attrs["gen_ai.evaluation.explanation"] = score.explanation[:MAX_EXPLANATION]
    return attrs


class OtelScoreExporter:
    """Sends one event per score to an OTLP/HTTP logs endpoint (``.../v1/logs``).

    Example:
        >>> exporter = OtelScoreExporter("http://127.0.0.1:4318/v1/logs")  # doctest: +SKIP
        >>> exporter.export("ab" * 16, "cd" * 8, "pii", Score(passed=True))  # doctest: +SKIP
        >>> exporter.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        service_name: str = "evalsi",
        timeout_s: float = 10.0,
    ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise UserError(
                f"OTLP logs endpoint: expected an http(s) URL such as "
                f"http://collector:4318/v1/logs, got {endpoint!r}"
            )
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import Resource
        except ImportError as e:
            raise UserError(
                f"exporting scores to OpenTelemetry needs the OpenTelemetry SDK ({e.name})",
                hint="pip install 'evalsi[otel-export]'",
            ) from None
        self._provider = LoggerProvider(resource=Resource.create({"service.name": service_name}))
        exporter = OTLPLogExporter(
            endpoint=endpoint, headers=dict(headers or {}), timeout=timeout_s
        )
        self._provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
        self._logger = self._provider.get_logger("evalsi.sinks.otel")

    def export(self, trace_id: str, span_id: str, name: str, score: Score) -> None:
        """Queues the event for ``score`` on span ``span_id`` of trace ``trace_id`` (hex)."""
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        context: Any = None
        if trace_id and span_id:
            parent = SpanContext(
                int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(1)
            )
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        self._logger.emit(
            context=context,
            event_name=EVENT_NAME,
            body=None,
            attributes=evaluation_attributes(name, score),
        )

    def flush(self, timeout_ms: int = 10_000) -> bool:
        return bool(self._provider.force_flush(timeout_ms))

    def close(self) -> None:
        self._provider.shutdown()
