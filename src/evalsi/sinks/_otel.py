"""Scores back into OpenTelemetry as GenAI ``gen_ai.evaluation.result`` events.

The GenAI semantic conventions model an evaluation result as a log-based event parented to
the span it evaluated, with ``gen_ai.evaluation.name`` (required), ``.score.value`` and
``.score.label`` (when they apply) and ``.explanation``. We emit exactly that through the
OpenTelemetry SDK's OTLP log exporter (batched, in its own thread), so dashboards on the
user's existing observability stack see online scores next to the traces they grade.
Needs the ``otel-export`` extra (the SDK and the OTLP/HTTP exporter).

An online policy engine calls the exporter (``__call__``, the engine's ``on_scores`` hook)
with each trace's results: emitting only queues the event, the SDK's batch processor sends it
from its thread, and what failed to send is logged and counted (``counts``), never raised.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.core import EvaluationResult, Outcome, Score, UserError

EVENT_NAME = "gen_ai.evaluation.result"
MAX_EXPLANATION = 4096

log = logging.getLogger("evalsi.sinks")


@dataclass(slots=True)
class ExportCounts:
    """Events since the exporter started: queued, sent (the collector accepted them), failed
    (export errors after the exporter's retries), dropped (could not even be queued)."""

    queued: int = 0
    sent: int = 0
    failed: int = 0
    dropped: int = 0


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
        self.counts = ExportCounts()
        self._counts_lock = threading.Lock()
        self._provider = LoggerProvider(resource=Resource.create({"service.name": service_name}))
        exporter = OTLPLogExporter(
            endpoint=endpoint, headers=dict(headers or {}), timeout=timeout_s
        )
        counting: Any = _Counting(exporter, self)
        self._provider.add_log_record_processor(BatchLogRecordProcessor(counting))
        self._logger = self._provider.get_logger("evalsi.sinks.otel")

    def _count(self, field: str, n: int) -> None:
        with self._counts_lock:
            setattr(self.counts, field, getattr(self.counts, field) + n)

    def __call__(
        self,
        *,
        project: str,
        policy: str,
        run_id: str,
        trace_id: str,
        span_id: str,
        results: Sequence[EvaluationResult],
    ) -> None:
        """One event per score of each SCORED result (skips and errors are not evaluations),
        named after the score's metric, tagged ``evalsi.*`` with where it came from."""
        for result in results:
            if result.outcome is not Outcome.SCORED:
                continue
            for score in result.scores:
                extra = {
                    "evalsi.project": project,
                    "evalsi.policy": policy,
                    "evalsi.run_id": run_id,
                    "evalsi.evaluator": result.evaluator,
                    "evalsi.evaluator_ref": result.evaluator_ref,
                }
                name = score.name or result.evaluator
                try:
                    self.export(trace_id, span_id, name, score, extra)
                except Exception:  # a malformed id, a full queue: this event only
                    log.exception("cannot queue the score event of trace %s", trace_id)
                    self._count("dropped", 1)

    def export(
        self,
        trace_id: str,
        span_id: str,
        name: str,
        score: Score,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        """Queues the event for ``score`` on span ``span_id`` of trace ``trace_id`` (hex);
        ``extra`` attributes are added to the GenAI ones."""
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        context: Any = None
        if trace_id and span_id:
            parent = SpanContext(
                int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(1)
            )
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        attributes: dict[str, str | float] = {**(extra or {}), **evaluation_attributes(name, score)}
        self._logger.emit(context=context, event_name=EVENT_NAME, body=None, attributes=attributes)
        self._count("queued", 1)

    def flush(self, timeout_ms: int = 10_000) -> bool:
        return bool(self._provider.force_flush(timeout_ms))

    def close(self) -> None:
        self._provider.shutdown()


class _Counting:
    """The OTLP exporter as the batch processor sees it, counting what it sent and failed."""

    def __init__(self, inner: Any, owner: OtelScoreExporter) -> None:
        self._inner = inner
        self._owner = owner

    def export(self, batch: Sequence[Any]) -> Any:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        try:
            result = self._inner.export(batch)
        except Exception:
            log.exception("exporting %d score events failed", len(batch))
            self._owner._count("failed", len(batch))
            return LogRecordExportResult.FAILURE
        if result == LogRecordExportResult.SUCCESS:
            self._owner._count("sent", len(batch))
        else:
            log.warning("the collector did not take %d score events", len(batch))
            self._owner._count("failed", len(batch))
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._inner.force_flush(timeout_millis))

    def shutdown(self) -> None:
        self._inner.shutdown()
