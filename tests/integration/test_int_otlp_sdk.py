"""The real OpenTelemetry SDK exporters (OTLP/HTTP protobuf and OTLP/gRPC, with and without
gzip) export to the receiver on a real hypercorn server; every span arrives exactly."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.applications import Starlette

from evalsi.core import Span
from evalsi.server._state import ServerConfig
from evalsi.server.otlp._receivers import otlp_mounts
from evalsi.traces import SpanSink
from tests.support.asgi_server import AsgiServer
from tests.support.otlp_fixtures import OverloadedSink, RecordingSink


def serve(sink: SpanSink) -> AsgiServer:
    return AsgiServer(Starlette(routes=otlp_mounts(sink, ServerConfig())))


@pytest.fixture
def recorded() -> Iterator[tuple[RecordingSink, AsgiServer]]:
    sink = RecordingSink()
    with serve(sink) as server:
        yield sink, server


def sdk_spans() -> Sequence[ReadableSpan]:
    """An agent turn: a server root, an LLM call with a message event, a failed tool call."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "agent-svc", "build": 7, "canary": True})
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("my.instrumentation", "0.9")
    with tracer.start_as_current_span("invoke_agent", kind=SpanKind.SERVER) as root:
        root.set_attribute("gen_ai.agent.name", "helper")
        with tracer.start_as_current_span(
            "chat gpt-4o",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.request.temperature": 0.25,
                "gen_ai.response.finish_reasons": ("stop", "length"),
                "scores": (0.5, 1.5),
                "flags": (True, False),
                "ids": (1, 2, 3),
            },
        ) as llm:
            llm.add_event("gen_ai.user.message", {"content": "hi", "index": 0})
            llm.set_status(Status(StatusCode.OK))
        planner = trace_api.SpanContext(
            trace_id=0x5B8EFFF798038103D269B633813FC60C,
            span_id=0xEEE19B7EC3C1B174,
            is_remote=True,
            trace_flags=trace_api.TraceFlags(1),
        )
        with tracer.start_as_current_span(
            "execute_tool search", links=[trace_api.Link(planner, {"handoff": "planner"})]
        ) as tool:
            tool.set_attribute("gen_ai.tool.name", "search")
            tool.record_exception(ValueError("no results"))
            tool.set_status(Status(StatusCode.ERROR, "tool failed"))
    provider.shutdown()
    spans = memory.get_finished_spans()
    assert len(spans) == 3
    assert [len(s.links) for s in spans] == [0, 1, 0]  # the tool span carries one
    return spans


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def assert_arrived(sent: Sequence[ReadableSpan], got: list[Span]) -> None:
    """Each received span equals the SDK's own record of it, field by field."""
    by_id = {s.span_id: s for s in got}
    assert len(by_id) == len(got) == len(sent)
    for span in sent:
        ctx = span.get_span_context()
        assert ctx is not None
        received = by_id[format(ctx.span_id, "016x")]
        assert received.trace_id == format(ctx.trace_id, "032x")
        parent = span.parent
        assert received.parent_span_id == (format(parent.span_id, "016x") if parent else "")
        assert received.name == span.name
        assert received.kind == span.kind.value + 1  # OTLP's enum starts at UNSPECIFIED
        assert received.start_time_unix_nano == span.start_time
        assert received.end_time_unix_nano == span.end_time
        assert received.status_code == span.status.status_code.value
        assert received.status_message == (span.status.description or "")
        assert received.attributes == {k: _plain(v) for k, v in (span.attributes or {}).items()}
        assert [(e.name, e.time_unix_nano, e.attributes) for e in received.events] == [
            (e.name, e.timestamp, {k: _plain(v) for k, v in (e.attributes or {}).items()})
            for e in span.events
        ]
        assert [(k.trace_id, k.span_id, k.attributes) for k in received.links] == [
            (
                format(k.context.trace_id, "032x"),
                format(k.context.span_id, "016x"),
                dict(k.attributes or {}),
            )
            for k in span.links
        ]
        assert received.resource == dict(span.resource.attributes)
        scope = span.instrumentation_scope
        assert scope is not None
        assert (received.scope_name, received.scope_version) == (scope.name, scope.version)


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_http_exporter(
    recorded: tuple[RecordingSink, AsgiServer], compression: Compression
) -> None:
    sink, server = recorded
    spans = sdk_spans()
    exporter = HttpSpanExporter(
        endpoint=f"{server.url}/v1/traces",
        compression=compression,
        headers={"x-evalsi-project": "shop-prod"},
    )
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    assert [project for project, _ in sink.batches] == ["shop-prod"]
    assert_arrived(spans, sink.spans)
    assert sink.spans[0].resource is sink.spans[1].resource  # one dict per ResourceSpans


@pytest.mark.parametrize("compression", [grpc.Compression.NoCompression, grpc.Compression.Gzip])
def test_grpc_exporter(recorded: tuple[RecordingSink, AsgiServer], compression: Any) -> None:
    sink, server = recorded
    spans = sdk_spans()
    exporter = GrpcSpanExporter(
        endpoint=f"{server.host}:{server.port}", insecure=True, compression=compression
    )
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert [project for project, _ in sink.batches] == ["default"]
    assert_arrived(spans, sink.spans)


def test_http_exporter_retries_on_503_and_delivers_once() -> None:
    sink = OverloadedSink(refusals=2, retry_after_s=0.0)
    spans = sdk_spans()
    with serve(sink) as server:
        exporter = HttpSpanExporter(endpoint=f"{server.url}/v1/traces")
        try:
            assert exporter.export(spans) is SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]
    assert sink.calls == 3
    assert len(sink.batches) == 1
    assert_arrived(spans, sink.spans)


def test_grpc_exporter_retries_on_unavailable_and_delivers_once() -> None:
    sink = OverloadedSink(refusals=2, retry_after_s=0.0)
    spans = sdk_spans()
    with serve(sink) as server:
        exporter = GrpcSpanExporter(endpoint=f"{server.host}:{server.port}", insecure=True)
        try:
            assert exporter.export(spans) is SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()
    assert sink.calls == 3
    assert len(sink.batches) == 1
    assert_arrived(spans, sink.spans)
