"""OTLP test material: export requests shaped like GenAI agent traffic, and sinks that record
or block what the receiver hands them."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from starlette.applications import Starlette

from evalsi.core import Span
from evalsi.server._state import OtlpConfig, ServerConfig, TracesConfig
from evalsi.server.otlp._receivers import otlp_mounts
from evalsi.traces import LoggedEvent, Overloaded, SpanSink


def kv(key: str, value: object) -> KeyValue:
    return KeyValue(key=key, value=any_value(value))


def any_value(value: object) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    out = AnyValue()
    if isinstance(value, list):
        out.array_value.values.extend(any_value(v) for v in value)
    elif isinstance(value, dict):
        out.kvlist_value.values.extend(kv(k, v) for k, v in value.items())
    elif value is not None:
        raise TypeError(value)
    return out


def genai_attributes(i: int) -> dict[str, object]:
    """About a dozen attributes, as an OTel GenAI chat span carries."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.usage.input_tokens": 100 + i,
        "gen_ai.usage.output_tokens": 20 + i % 50,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.response.id": f"chatcmpl-{i:08d}",
        "server.address": "api.openai.com",
        "session.id": f"session-{i // 16}",
    }


def genai_request(
    n_spans: int = 512, *, seed: int = 0, resource: dict[str, object] | None = None
) -> ExportTraceServiceRequest:
    """One ResourceSpans/ScopeSpans with ``n_spans`` chat spans in traces of 8 spans each."""
    rng = random.Random(seed)
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attributes = resource or {"service.name": "agent-svc", "deployment.environment": "test"}
    resource_spans.resource.attributes.extend(kv(k, v) for k, v in attributes.items())
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "opentelemetry.instrumentation.openai"
    scope_spans.scope.version = "0.1"
    trace_id = b""
    root = b""
    for i in range(n_spans):
        if i % 8 == 0:
            trace_id = rng.randbytes(16)
            root = rng.randbytes(8)
        span = scope_spans.spans.add()
        span.trace_id = trace_id
        span.span_id = root if i % 8 == 0 else rng.randbytes(8)
        span.parent_span_id = b"" if i % 8 == 0 else root
        span.name = "chat gpt-4o-mini"
        span.kind = PbSpan.SPAN_KIND_CLIENT
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + i * 1_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 250_000_000
        span.attributes.extend(kv(k, v) for k, v in genai_attributes(i).items())
        event = span.events.add()
        event.name = "gen_ai.choice"
        event.time_unix_nano = span.end_time_unix_nano
        event.attributes.extend([kv("index", 0), kv("finish_reason", "stop")])
        span.status.code = 1
    return request


class RecordingSink:
    """Keeps every accepted batch (and batch of span events sent as logs) with its project."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[Span]]] = []
        self.event_batches: list[tuple[str, list[LoggedEvent]]] = []

    async def accept(self, project: str, spans: Sequence[Span]) -> None:
        self.batches.append((project, list(spans)))

    async def accept_events(self, project: str, events: Sequence[LoggedEvent]) -> None:
        self.event_batches.append((project, list(events)))

    @property
    def spans(self) -> list[Span]:
        return [s for _, batch in self.batches for s in batch]


class OverloadedSink(RecordingSink):
    """Refuses the first ``refusals`` batches with ``Overloaded``, then records."""

    def __init__(self, refusals: int, retry_after_s: float = 0.0) -> None:
        super().__init__()
        self.refusals = refusals
        self.retry_after_s = retry_after_s
        self.calls = 0

    async def accept(self, project: str, spans: Sequence[Span]) -> None:
        self.calls += 1
        if self.calls <= self.refusals:
            raise Overloaded("ingest is full", retry_after_s=self.retry_after_s)
        await super().accept(project, spans)


class BlockingSink(RecordingSink):
    """Holds every ``accept`` until ``release`` is set; ``entered`` is set by the first call.

    Thread events, so a test thread can wait on and release the server's loop.
    """

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    async def accept(self, project: str, spans: Sequence[Span]) -> None:
        self.entered.set()
        released = await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 30)
        assert released, "the test never released the sink"
        await super().accept(project, spans)


class FailingSink:
    """Raises ``error`` on every call."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def accept(self, project: str, spans: Sequence[Span]) -> None:
        raise self.error


def otlp_app(
    sink: SpanSink,
    *,
    max_body_bytes: int = 4 * 1024 * 1024,
    max_inflight_bytes: int = 64 * 1024 * 1024,
    interceptors: tuple[Any, ...] = (),
    metrics: Any = None,
) -> Starlette:
    """A Starlette app with only the OTLP endpoints, as ``otlp_mounts`` builds them."""
    config = ServerConfig(
        max_body_bytes=max_body_bytes,
        traces=TracesConfig(otlp=OtlpConfig(max_inflight_bytes=max_inflight_bytes)),
    )
    return Starlette(routes=otlp_mounts(sink, config, interceptors=interceptors, metrics=metrics))
