"""Span events sent as OTLP log records (how GenAI instrumentations send a call's messages):
the real OpenTelemetry SDK's log exporters (HTTP and gRPC) send them to a real server over a
real ingest pipeline and SQLite store; they become their span's events, so the trace's record
and row carry the messages, whether they arrive before the spans or after the trace completed.
Also: re-sent logs stored once, redaction, feedback events, partial success for logs that are
not span events, and every bad request answered with a clear 4xx."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import orjson
import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpLogExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette

from evalsi.core import Record, Span, SpanEvent, Trace
from evalsi.server._state import ServerConfig
from evalsi.server.otlp._decode import DecodeError
from evalsi.server.otlp._logs import decode_logs_body, decode_logs_request
from evalsi.server.otlp._receivers import otlp_mounts
from evalsi.store import SqlStore, TraceStore
from evalsi.traces import Ingest, LoggedEvent, Overloaded, Redactor, normalize, parse_rules
from evalsi.traces._rebuild import summarize
from evalsi.traces._records import trace_to_record as to_record
from tests.support.asgi_server import AsgiServer
from tests.support.otlp_fixtures import kv

QUESTION = "What is the capital of France? Mail me at bob@example.com"
ANSWER = "Paris"


def sdk_telemetry() -> tuple[Sequence[ReadableSpan], Sequence[ReadableLogRecord]]:
    """An agent turn as openai-v2 style instrumentation records it: spans without content,
    the messages as log-based events of the chat span (the logs end first)."""
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    resource = Resource.create({"service.name": "agent-svc"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer = tracer_provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.0b0")
    logger = logger_provider.get_logger("opentelemetry.instrumentation.openai_v2", "2.0b0")
    with tracer.start_as_current_span("invoke_agent helper") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        with tracer.start_as_current_span(
            "chat gpt-4o",
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
        ):
            logger.emit(
                event_name="gen_ai.user.message",
                body={"content": QUESTION},
                attributes={"gen_ai.system": "openai"},
            )
            logger.emit(
                event_name="gen_ai.choice",
                body={
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": ANSWER},
                },
                attributes={"gen_ai.system": "openai"},
            )
            logger.emit(  # a thumbs-down recorded as an event of the span
                event_name="evalsi.feedback", attributes={"feedback.value": "down"}
            )
    return spans.get_finished_spans(), logs.get_finished_logs()


def sdk_log_records() -> Sequence[ReadableLogRecord]:
    """One log-based event of a span: ``gen_ai.user.message``, body ``{"content": "hello"}``."""
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("chat"):
        provider.get_logger("t").emit(event_name="gen_ai.user.message", body={"content": "hello"})
    return logs.get_finished_logs()


@contextmanager
def ingest_server(
    tmp_path: Path,
    redactor: Redactor | None = None,
    grace_s: float = 0.3,
    max_body_bytes: int = 32 * 1024 * 1024,
    url: str | None = None,
) -> Iterator[tuple[Ingest, TraceStore, AsgiServer, list[Trace]]]:
    """A server whose OTLP endpoints feed a real ingest pipeline over SQLite (or ``url``)."""
    store = SqlStore.open(url or str(tmp_path / "e.db"))
    traces = TraceStore(store, views=normalize)  # as the server builds it
    graded: list[Trace] = []

    async def on_trace(trace: Trace, record: Record) -> None:
        graded.append(trace)

    ingest = Ingest(traces, redactor=redactor, grace_s=grace_s, on_trace=on_trace)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await ingest.start()
        try:
            yield
        finally:
            await ingest.stop()

    routes = otlp_mounts(ingest, ServerConfig(max_body_bytes=max_body_bytes), events=ingest)
    try:
        with AsgiServer(Starlette(routes=routes, lifespan=lifespan)) as server:
            yield ingest, traces, server, graded
    finally:
        traces.close()  # the writer's own connection
        store.close()


def exporters(server: AsgiServer, transport: str) -> tuple[Any, Any]:
    if transport == "http":
        return (
            HttpSpanExporter(endpoint=f"{server.url}/v1/traces"),
            HttpLogExporter(endpoint=f"{server.url}/v1/logs"),
        )
    address = f"{server.host}:{server.port}"
    return (
        GrpcSpanExporter(endpoint=address, insecure=True),
        GrpcLogExporter(endpoint=address, insecure=True),
    )


def wait_for(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def row_with_answer(traces: TraceStore) -> Any:
    """The trace row once its output preview has the answer (from the log events)."""

    def found() -> Any:
        rows = traces.list_traces("default")[0]
        return next((t for t in rows if ANSWER in t.output_preview), None)

    return wait_for(found, "the trace row with the answer")


def contents(content: Any) -> list[str]:
    """The texts of a record's input or output (``Content``: messages, or text)."""
    if content is None:
        return []
    if content.messages:
        return [m.content for m in content.messages]
    return [content.text]


@pytest.mark.parametrize(
    ("transport", "database"), [("http", "sqlite"), ("grpc", "sqlite"), ("http", "postgresql")]
)
def test_log_events_sent_before_the_spans_become_the_trace_content(
    tmp_path: Path, transport: str, database: str, request: pytest.FixtureRequest
) -> None:
    spans, logs = sdk_telemetry()
    url = request.getfixturevalue("pg_url") if database == "postgresql" else None
    with ingest_server(tmp_path, url=url) as (ingest, traces, server, graded):
        span_exporter, log_exporter = exporters(server, transport)
        try:
            assert log_exporter.export(logs) is LogRecordExportResult.SUCCESS
            assert span_exporter.export(spans) is SpanExportResult.SUCCESS
        finally:
            span_exporter.shutdown()
            log_exporter.shutdown()
        trace_id = format(spans[0].context.trace_id, "032x")
        row = row_with_answer(traces)
        assert "capital of France" in row.input_preview
        wait_for(lambda: graded, "the trace handed to the policies")
        record = to_record(graded[0])  # what the policies graded: the messages were there
        assert contents(record.input) == [QUESTION]
        assert contents(record.output) == [ANSWER]
        assert ingest.stats.events == 3
        feedback = traces.feedback_for("default", trace_id)
        assert [(f.value, f.source) for f in feedback] == [(-1.0, "span_event")]
        stored = traces.get_trace("default", trace_id)
    assert stored is not None
    chat = next(s for s in stored.spans if s.name == "chat gpt-4o")
    assert [e.name for e in chat.events] == [
        "gen_ai.user.message",
        "gen_ai.choice",
        "evalsi.feedback",
    ]
    assert chat.view is not None
    assert chat.view.convention == "otel-genai/1.27"


def test_log_events_after_the_trace_completed_rebuild_its_row(tmp_path: Path) -> None:
    spans, logs = sdk_telemetry()
    with ingest_server(tmp_path, grace_s=0.1) as (_, traces, server, graded):
        span_exporter, log_exporter = exporters(server, "http")
        try:
            assert span_exporter.export(spans) is SpanExportResult.SUCCESS
            row = wait_for(lambda: traces.list_traces("default")[0], "the trace row")[0]
            assert row.output_preview == ""  # no content yet
            wait_for(lambda: graded, "the trace handed to the policies")
            assert log_exporter.export(logs) is LogRecordExportResult.SUCCESS
            wait_for(
                lambda: ANSWER in traces.list_traces("default")[0][0].output_preview,
                "the row rebuilt with the answer",
            )
        finally:
            span_exporter.shutdown()
            log_exporter.shutdown()
        assert len(graded) == 1  # rebuilt, not graded again
        trace = traces.get_trace("default", row.trace_id)
        assert trace is not None
        assert contents(to_record(trace).output) == [ANSWER]


def test_events_received_before_a_restart_still_give_the_row_its_content(
    tmp_path: Path,
) -> None:
    """The logs reach one server; it stops before the spans come; the next server completes
    the trace and finds the events in the store."""
    spans, logs = sdk_telemetry()
    with ingest_server(tmp_path) as (_, _, server, _):
        _, log_exporter = exporters(server, "http")
        try:
            assert log_exporter.export(logs) is LogRecordExportResult.SUCCESS
        finally:
            log_exporter.shutdown()
    with ingest_server(tmp_path) as (_, traces, server, graded):
        span_exporter, _ = exporters(server, "grpc")
        try:
            assert span_exporter.export(spans) is SpanExportResult.SUCCESS
        finally:
            span_exporter.shutdown()
        row = row_with_answer(traces)
        assert "capital of France" in row.input_preview
        wait_for(lambda: graded, "the trace handed to the policies")
        assert contents(to_record(graded[0]).output) == [ANSWER]


def test_re_sent_logs_are_stored_once_and_redacted(tmp_path: Path) -> None:
    spans, logs = sdk_telemetry()
    redactor = Redactor(
        parse_rules([{"pattern": r"[a-z]+@example\.com", "replacement": "[email]"}])
    )
    with ingest_server(tmp_path, redactor=redactor) as (ingest, traces, server, _):
        span_exporter, log_exporter = exporters(server, "http")
        try:
            for _ in range(2):  # an exporter retrying a batch the server took
                assert log_exporter.export(logs) is LogRecordExportResult.SUCCESS
            assert span_exporter.export(spans) is SpanExportResult.SUCCESS
        finally:
            span_exporter.shutdown()
            log_exporter.shutdown()
        trace_id = format(spans[0].context.trace_id, "032x")
        wait_for(lambda: traces.list_traces("default")[0], "the trace row")
        assert ingest.stats.events == 3
        assert len(traces.feedback_for("default", trace_id)) == 1
        trace = traces.get_trace("default", trace_id)
        assert trace is not None
        chat = next(s for s in trace.spans if s.name == "chat gpt-4o")
        assert len(chat.events) == 3
        body = chat.events[0].attributes["event.body"]
        assert body == {"content": "What is the capital of France? Mail me at [email]"}
        stored = b"".join(p.read_bytes() for p in tmp_path.glob("e.db*"))  # the WAL too
        assert b"[email]" in stored
        assert b"bob@example.com" not in stored


# -- the receiver's answers ----------------------------------------------------------------------


def _post(
    url: str, body: bytes, content_type: str = "application/x-protobuf", **headers: str
) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(
        url, data=body, headers={"content-type": content_type, **headers}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def mixed_request() -> ExportLogsServiceRequest:
    """One span event, a log with no span context, a log of a span that is not an event, and
    an event named by the older ``event.name`` attribute, with a string body."""
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    trace_id, span_id = bytes(range(1, 17)), bytes(range(1, 9))
    event = scope.log_records.add(trace_id=trace_id, span_id=span_id, event_name="gen_ai.choice")
    event.time_unix_nano = 5
    event.body.kvlist_value.values.extend([kv("index", 0), kv("message", {"content": "hi"})])
    scope.log_records.add(event_name="gen_ai.user.message", observed_time_unix_nano=7)
    plain = scope.log_records.add(trace_id=trace_id, span_id=span_id, severity_text="INFO")
    plain.body.string_value = "a plain log line"
    old = scope.log_records.add(trace_id=trace_id, span_id=span_id, observed_time_unix_nano=9)
    old.attributes.extend([kv("event.name", "gen_ai.system.message"), kv("gen_ai.system", "x")])
    old.body.string_value = "be brief"
    return request


def test_logs_that_are_not_span_events_get_a_partial_success(tmp_path: Path) -> None:
    with ingest_server(tmp_path) as (ingest, _, server, _):
        request = mixed_request()
        status, body, _ = _post(f"{server.url}/v1/logs", request.SerializeToString())
        assert status == 200
        answer = ExportLogsServiceResponse.FromString(body)
        assert answer.partial_success.rejected_log_records == 2
        message = answer.partial_success.error_message
        assert "1 log record(s) without the trace id and span id of a span" in message
        assert "1 log record(s) that are not events" in message
        # OTLP/JSON, gzip: the same answer in JSON
        doc = _hex_ids(json_format.MessageToDict(request))
        status, body, _ = _post(
            f"{server.url}/v1/logs",
            gzip.compress(orjson.dumps(doc)),
            "application/json",
            **{"content-encoding": "gzip"},
        )
        assert status == 200
        assert orjson.loads(body)["partialSuccess"]["rejectedLogRecords"] == "2"
        assert ingest.stats.events == 2  # the JSON copy was the same two events, re-sent


def _hex_ids(doc: Any) -> Any:
    """MessageToDict writes ids as base64; OTLP/JSON wants hex."""
    import base64

    for resource in doc.get("resourceLogs", []):
        for scope in resource.get("scopeLogs", []):
            for record in scope.get("logRecords", []):
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64decode(record[key]).hex()
    return doc


def test_json_severity_names_and_missing_times_are_read() -> None:
    ids = {"traceId": "01" * 16, "spanId": "02" * 8}
    doc = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {**ids, "eventName": "a", "severityNumber": "SEVERITY_NUMBER_INFO"},
                            {**ids, "eventName": "b", "severityNumber": 9, "timeUnixNano": "5"},
                        ]
                    }
                ]
            }
        ]
    }
    decoded = decode_logs_body(orjson.dumps(doc), "application/json")
    first, second = (e.event for e in decoded.events)
    assert first.time_unix_nano == 0  # as sent: a re-sent copy is the same event
    assert second.time_unix_nano == 5


def test_an_event_sent_without_a_time_shows_when_it_came_and_is_stored_once(
    tmp_path: Path,
) -> None:
    store = SqlStore.open(str(tmp_path / "e.db"))
    traces = TraceStore(store)
    try:
        ids = {"traceId": "01" * 16, "spanId": "02" * 8}
        doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{**ids, "eventName": "a"}]}]}]}
        before = time.time_ns()
        for _ in range(2):  # a retry of the same request
            events = decode_logs_body(orjson.dumps(doc), "application/json").events
            traces.add_span_events("default", events)
        now = time.time_ns()
        span = Span("01" * 16, "02" * 8, name="chat", start_time_unix_nano=now)
        span.end_time_unix_nano = now
        traces.write_spans("default", [span])
        trace = traces.get_trace("default", "01" * 16)
        assert trace is not None
        (event,) = trace.spans[0].events
        assert before <= event.time_unix_nano <= time.time_ns()
        # retention goes by when it came: kept with a day's TTL, gone once that day is over
        assert traces.delete_expired(time.time(), 86_400.0) == 0
        assert traces.delete_expired(time.time() + 2 * 86_400, 86_400.0) == 2  # span + event
    finally:
        traces.close()
        store.close()


def test_a_row_older_than_its_events_is_rebuilt_at_the_next_start(tmp_path: Path) -> None:
    """A server stopped between storing a completed trace's late events and building its row
    again: the next one finds the row older than the events and builds it."""
    store = SqlStore.open(str(tmp_path / "e.db"))
    traces = TraceStore(store, views=normalize)
    tid, root, chat = "0a" * 16, "0b" * 8, "0c" * 8
    try:
        traces.write_spans(
            "default",
            [
                Span(tid, root, name="invoke_agent", end_time_unix_nano=9),
                Span(tid, chat, root, name="chat", attributes={"gen_ai.operation.name": "chat"}),
            ],
        )
        trace = traces.get_trace("default", tid)
        assert trace is not None
        traces.upsert_trace("default", summarize(trace))  # the row, before the events
        choice = {"message": {"role": "assistant", "content": ANSWER}}
        event = SpanEvent("gen_ai.choice", time.time_ns(), {"event.body": choice})
        traces.add_span_events("default", [LoggedEvent(tid, chat, event)])
        assert traces.stale_event_rows(3600.0, 10) == [("default", tid)]
        assert traces.list_traces("default")[0][0].output_preview == ""

        async def restart() -> None:
            ingest = Ingest(traces)
            await ingest.start()
            await ingest.recovered()
            await ingest.stop()

        asyncio.run(restart())
        assert ANSWER in traces.list_traces("default")[0][0].output_preview
        assert traces.stale_event_rows(3600.0, 10) == []
    finally:
        traces.close()
        store.close()


def test_json_and_protobuf_decode_alike() -> None:
    request = mixed_request()
    from_proto = decode_logs_request(request)
    from_json = decode_logs_body(
        orjson.dumps(_hex_ids(json_format.MessageToDict(request))), "application/json"
    )
    assert from_json == from_proto
    assert [(e.event.name, e.event.time_unix_nano) for e in from_proto.events] == [
        ("gen_ai.choice", 5),
        ("gen_ai.system.message", 9),
    ]
    first, second = from_proto.events
    assert first.trace_id == bytes(range(1, 17)).hex()
    assert first.event.attributes == {"event.body": {"index": 0, "message": {"content": "hi"}}}
    assert second.event.attributes == {"gen_ai.system": "x", "event.body": "be brief"}


@pytest.mark.parametrize(
    ("body", "content_type", "headers", "status", "says"),
    [
        (b"\xff\xff\xff", "application/x-protobuf", {}, 400, "ExportLogsServiceRequest"),
        (b"{not json", "application/json", {}, 400, "not JSON"),
        (b'{"resourceLogs": 5}', "application/json", {}, 400, "where a list belongs"),
        (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"timeUnixNano": "x"}]}]}]}',
         "application/json", {}, 400, "ExportLogsServiceRequest"),
        (b"{}", "text/plain", {}, 415, "content-type"),
        (b"{}", "application/json", {"content-encoding": "br"}, 415, "content-encoding"),
        (b"{}", "application/json", {"x-evalsi-project": "Bad Project!"}, 400, "x-evalsi-project"),
        (gzip.compress(b"x" * 1_100_000), "application/json", {"content-encoding": "gzip"}, 413,
         "larger than"),
    ],
)  # fmt: skip
def test_bad_log_requests_get_a_clear_4xx(
    tmp_path: Path, body: bytes, content_type: str, headers: dict[str, str], status: int, says: str
) -> None:
    with ingest_server(tmp_path, max_body_bytes=1_000_000) as (ingest, _, server, _):
        got, answer, _ = _post(f"{server.url}/v1/logs", body, content_type, **headers)
        assert got == status, answer
        assert says in answer.decode("utf-8", "replace")
        assert ingest.stats.events == 0


def test_bad_grpc_log_requests_are_invalid_argument(tmp_path: Path) -> None:
    with (
        ingest_server(tmp_path) as (_, _, server, _),
        grpc.insecure_channel(f"{server.host}:{server.port}") as channel,
    ):
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            request_serializer=lambda b: b,
            response_deserializer=ExportLogsServiceResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as raised:
            export(b"\xff\xff\xff", timeout=10)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as raised:
            export(b"", timeout=10, metadata=(("x-evalsi-project", "Bad Project!"),))
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "x-evalsi-project" in raised.value.details()


class _Refusing:
    async def accept(self, project: str, spans: Sequence[Any]) -> None:
        raise AssertionError("no spans expected")

    async def accept_events(self, project: str, events: Sequence[LoggedEvent]) -> None:
        raise Overloaded("ingest is full", retry_after_s=2.0)


def test_an_overloaded_sink_answers_503_with_retry_after() -> None:
    sink = _Refusing()
    app = Starlette(routes=otlp_mounts(sink, ServerConfig(), events=sink))
    with AsgiServer(app) as server:
        request = mixed_request().SerializeToString()
        status, _, headers = _post(f"{server.url}/v1/logs", request)
        assert status == 503
        assert headers.get("retry-after") == "2"
        with grpc.insecure_channel(f"{server.host}:{server.port}") as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
                request_serializer=lambda b: b,
                response_deserializer=ExportLogsServiceResponse.FromString,
            )
            with pytest.raises(grpc.RpcError) as raised:
                export(request, timeout=10)
            assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_stopped_or_full_ingest_refuses_events_as_overloaded(tmp_path: Path) -> None:
    store = SqlStore.open(str(tmp_path / "e.db"))
    events = decode_logs_request(mixed_request()).events
    try:
        traces = TraceStore(store)
        ingest = Ingest(traces, max_pending_spans=3)
        with pytest.raises(Overloaded, match="not running"):
            asyncio.run(ingest.accept_events("default", events))

        async def full() -> None:
            await ingest.start()
            try:
                ingest._pending = 2  # spans of another request waiting for the writer
                with pytest.raises(Overloaded, match="2 spans waiting"):
                    await ingest.accept_events("default", events)
                ingest._pending = 0
                await ingest.accept_events("default", events)  # alone: always let through
                assert ingest.stats.events == 2
            finally:
                await ingest.stop()

        asyncio.run(full())
        traces.close()
    finally:
        store.close()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_the_logs_decoder_never_fails_but_with_decode_error(raw: bytes) -> None:
    for kind in ("application/x-protobuf", "application/json"):
        try:
            decoded = decode_logs_body(raw, kind)
        except DecodeError:
            continue
        assert decoded.rejected >= 0


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=5)
    | st.floats(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_document_is_decoded_or_refused_with_decode_error(doc: Any) -> None:
    wrapped = {"resourceLogs": [{"scopeLogs": [{"logRecords": [doc]}]}]}
    for body in (doc, wrapped):
        raw = orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
        with contextlib.suppress(DecodeError):
            decode_logs_body(raw, "application/json")
