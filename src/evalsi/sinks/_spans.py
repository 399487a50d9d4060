"""Spans out: ``core.Span`` values (a run's projection of its tasks) sent over OTLP.

The spans are built elsewhere (``evalsi.runs``, from each task's recorded trajectory); this
module only replays them through a private OpenTelemetry ``TracerProvider`` — never the
global one, so an application's own tracing is untouched — with the planned trace and span
ids and times, into a ``BatchSpanProcessor`` (bounded queue, its own thread) and an OTLP
exporter. ``close`` flushes and shuts down; what failed to send is counted, never raised.

Only what the spec names is used: for ``http/protobuf`` the spans are encoded with the SDK's
OTLP encoder and POSTed (gzip) by this module, so ``OTEL_EXPORTER_OTLP_*`` variables meant for
another application (endpoint, headers, certificates) never reach this export; ``grpc`` uses
the SDK's gRPC exporter (the ``grpc`` extra of the exporter).
"""

from __future__ import annotations

import gzip
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from evalsi.core import STATUS_ERROR, Span, UserError
from evalsi.sinks._otel import ExportCounts

TRACES_PATH = "/v1/traces"
MAX_QUEUE = 8192
"""Spans waiting to be sent; past it the SDK drops new ones (a run never waits on export)."""
BATCH = 512

log = logging.getLogger("evalsi.sinks")


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of ``endpoint``: a base URL (``http://collector:4318``, an
    ``evalsi serve`` URL) gets ``/v1/traces``; a URL already ending with it is kept."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


class OtlpSpanExporter:
    """Sends ``core.Span`` trees to an OTLP endpoint through the OpenTelemetry SDK.

    Example:
        >>> exporter = OtlpSpanExporter("http://127.0.0.1:4318")  # doctest: +SKIP
        >>> exporter.export(spans)  # doctest: +SKIP
        >>> exporter.close().failed  # doctest: +SKIP
        0
    """

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        protocol: str = "http/protobuf",
        timeout_s: float = 10.0,
        service_name: str = "evalsi",
    ) -> None:
        if urlsplit(endpoint).scheme not in ("http", "https"):
            raise UserError(f"OTLP endpoint: expected an http(s) URL, got {endpoint!r}")
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.sdk.trace.sampling import ALWAYS_ON
        except ImportError as e:
            raise UserError(
                f"exporting a run's spans needs the OpenTelemetry SDK ({e.name})",
                hint="pip install 'evalsi[otel-export]'",
            ) from None
        self.endpoint = endpoint
        self.counts = ExportCounts()
        self._counts_lock = threading.Lock()
        self._plan_lock = threading.Lock()
        inner = self._exporter(endpoint, dict(headers or {}), protocol, timeout_s)
        self._ids = _PlannedIds()
        ids: Any = self._ids  # duck-typed: the SDK's classes load only when a run exports
        counting: Any = _Counting(inner, self)
        # Explicit resource and sampler: OTEL_TRACES_SAMPLER set for another application must
        # not thin out a run's record.
        self._provider = TracerProvider(
            resource=Resource({"service.name": service_name}),
            id_generator=ids,
            sampler=ALWAYS_ON,
        )
        self._provider.add_span_processor(
            BatchSpanProcessor(
                counting,
                max_queue_size=MAX_QUEUE,
                max_export_batch_size=BATCH,
                schedule_delay_millis=1000,
                export_timeout_millis=timeout_s * 1000,
            )
        )
        self._tracer = self._provider.get_tracer("evalsi.runs")

    @staticmethod
    def _exporter(endpoint: str, headers: dict[str, str], protocol: str, timeout_s: float) -> Any:
        if protocol == "grpc":
            try:
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError as e:
                raise UserError(
                    f"spec.telemetry.otlp.protocol grpc needs the OTLP gRPC exporter ({e.name})",
                    hint="pip install opentelemetry-exporter-otlp-proto-grpc, or use http/protobuf",
                ) from None
            # Never empty: the SDK falls back to OTEL_EXPORTER_OTLP_HEADERS when given none.
            metadata = {"evalsi-source": "run", **{k.lower(): v for k, v in headers.items()}}
            return OTLPSpanExporter(
                endpoint=endpoint,
                insecure=urlsplit(endpoint).scheme == "http",
                headers=metadata,
                timeout=timeout_s,
            )
        if protocol != "http/protobuf":
            raise UserError(
                f"spec.telemetry.otlp.protocol: expected http/protobuf or grpc, got {protocol!r}"
            )
        return _HttpProtobuf(traces_url(endpoint), headers, timeout_s)

    def export(self, spans: Sequence[Span]) -> None:
        """Queue one trace's spans (parents before children; ``core.Span`` ids and times are
        kept). Never blocks on the network and never raises for a span it cannot queue."""
        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        started: dict[str, Any] = {}
        with self._plan_lock:  # the id generator hands out the planned ids in order
            for s in spans:
                parent = started.get(s.parent_span_id)
                ctx = (
                    trace.set_span_in_context(parent)
                    if parent is not None
                    else otel_context.Context()  # a root: never the caller's current span
                )
                self._ids.plan(s.trace_id, s.span_id)
                try:
                    kind = SpanKind(s.kind - 1) if 1 <= s.kind <= 5 else SpanKind.INTERNAL
                    span = self._tracer.start_span(
                        s.name,
                        context=ctx,
                        kind=kind,
                        attributes=dict(s.attributes),
                        start_time=s.start_time_unix_nano,
                    )
                    if s.status_code == STATUS_ERROR:
                        span.set_status(Status(StatusCode.ERROR, s.status_message or None))
                    span.end(end_time=s.end_time_unix_nano)
                except Exception:  # a value the SDK refuses: this span only
                    log.exception("cannot queue span %s of trace %s", s.name, s.trace_id)
                    self._count("dropped", 1)
                    continue
                started[s.span_id] = span
                self._count("queued", 1)

    def _count(self, field: str, n: int) -> None:
        with self._counts_lock:
            setattr(self.counts, field, getattr(self.counts, field) + n)

    def close(self) -> ExportCounts:
        """Send what is queued (bounded by the export timeout), stop the export thread, and
        say what was sent and what failed."""
        try:
            self._provider.shutdown()
        except Exception:  # a failing shutdown is one more failed export, never the run's
            log.exception("shutting down the span exporter failed")
        return self.counts


class _PlannedIds:
    """The SDK's id generator, handing out the ids the projection planned."""

    def __init__(self) -> None:
        self._trace = 0
        self._span = 0

    def plan(self, trace_id: str, span_id: str) -> None:
        self._trace, self._span = int(trace_id, 16), int(span_id, 16)

    def generate_trace_id(self) -> int:
        return self._trace

    def generate_span_id(self) -> int:
        return self._span

    def is_trace_id_random(self) -> bool:
        return True


class _HttpProtobuf:
    """OTLP/HTTP protobuf, gzip, to exactly the URL and headers given (no environment)."""

    def __init__(self, url: str, headers: Mapping[str, str], timeout_s: float) -> None:
        self.url = url
        self.headers = {
            **headers,
            "Content-Type": "application/x-protobuf",
            "Content-Encoding": "gzip",
        }
        self.timeout_s = timeout_s

    def export(self, batch: Sequence[Any]) -> Any:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        body = gzip.compress(encode_spans(batch).SerializeToString())
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                ok = 200 <= response.status < 300
        except (urllib.error.URLError, OSError, ValueError) as e:
            log.warning("exporting %d spans to %s failed: %s", len(batch), self.url, e)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        return None


class _Counting:
    """The exporter as the batch processor sees it, counting what it sent and what failed."""

    def __init__(self, inner: Any, owner: OtlpSpanExporter) -> None:
        self._inner = inner
        self._owner = owner

    def export(self, batch: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self._inner.export(batch)
        except Exception:
            log.exception("exporting %d spans failed", len(batch))
            result = SpanExportResult.FAILURE
        self._owner._count("sent" if result == SpanExportResult.SUCCESS else "failed", len(batch))
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._inner.force_flush(timeout_millis))

    def shutdown(self) -> None:
        self._inner.shutdown()
