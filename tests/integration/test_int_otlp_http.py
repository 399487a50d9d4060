"""POST /v1/traces on a real hypercorn server: encodings, partial success, every failure status
the OTLP spec names (400, 413, 415, 503 + Retry-After) and memory back-pressure."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from google.rpc.error_details_pb2 import BadRequest, RetryInfo  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from evalsi.core import RunError
from evalsi.server._errors import INTERNAL_MESSAGE
from evalsi.server._metrics import Metrics
from evalsi.server._state import OtlpConfig, ServerConfig, TracesConfig
from evalsi.server.otlp._receivers import (
    OtlpOnlyOn,
    native_grpc_port,
    otlp_binds,
    otlp_ports,
)
from evalsi.server.otlp._shared import INLINE_DECODE_BYTES, SERVICE
from tests.support.asgi_server import AsgiServer
from tests.support.otlp_fixtures import (
    BlockingSink,
    FailingSink,
    OverloadedSink,
    RecordingSink,
    genai_attributes,
    genai_request,
    otlp_app,
)

PB, JS = "application/x-protobuf", "application/json"
TRACE = "5B8EFFF798038103D269B633813FC60C"


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def status_message(self) -> Status:
        assert self.headers["content-type"].startswith(PB)
        return Status.FromString(self.body)

    def json(self) -> dict[str, object]:
        assert self.headers["content-type"].startswith(JS)
        doc: dict[str, object] = json.loads(self.body)
        return doc


def post(
    server: AsgiServer,
    body: bytes,
    content_type: str = PB,
    *,
    path: str = "/v1/traces",
    method: str = "POST",
    **headers: str,
) -> Reply:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    sent = {"content-type": content_type, **{k.replace("_", "-"): v for k, v in headers.items()}}
    try:
        # A body refused by its Content-Length is answered before it is all sent.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.request(method, path, body=body, headers=sent)
        r = conn.getresponse()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


@pytest.fixture
def recorded() -> Iterator[tuple[RecordingSink, AsgiServer]]:
    sink = RecordingSink()
    with AsgiServer(otlp_app(sink, max_body_bytes=1_000_000)) as server:
        yield sink, server


def json_span(span_id: str, trace_id: str = TRACE, **extra: object) -> dict[str, object]:
    return {"traceId": trace_id, "spanId": span_id, "name": f"s-{span_id}", **extra}


def json_doc(*spans: dict[str, object]) -> bytes:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}
    return json.dumps(doc).encode()


def test_json_request_json_response(recorded: tuple[RecordingSink, AsgiServer]) -> None:
    sink, server = recorded
    body = json_doc(
        json_span(
            "00000000000000AB",
            kind=3,
            attributes=[
                {"key": "tokens", "value": {"intValue": "1234567890123"}},
                {"key": "blob", "value": {"bytesValue": "aGk="}},
            ],
        )
    )
    r = post(server, body, "application/json; charset=utf-8")
    assert r.status == 200
    assert r.json() == {}
    [span] = sink.spans
    assert (span.trace_id, span.span_id, span.kind) == (TRACE.lower(), "00000000000000ab", 3)
    assert span.attributes == {"tokens": 1234567890123, "blob": b"hi"}
    assert sink.batches[0][0] == "default"


def test_json_partial_success(recorded: tuple[RecordingSink, AsgiServer]) -> None:
    sink, server = recorded
    body = json_doc(
        json_span("0000000000000001"),
        json_span("0000000000000000"),  # all-zero span id
        json_span("0000000000000002", trace_id="00" * 16),  # all-zero trace id
        json_span("0000000000000003", parentSpanId="abcd"),  # 2-byte parent
    )
    r = post(server, body, JS)
    assert r.status == 200
    partial = r.json()["partialSuccess"]
    assert isinstance(partial, dict)
    assert partial["rejectedSpans"] == "3"  # int64: a string in proto3 JSON
    assert "span id" in str(partial["errorMessage"])
    assert [s.span_id for s in sink.spans] == ["0000000000000001"]


def test_protobuf_partial_and_full_success(recorded: tuple[RecordingSink, AsgiServer]) -> None:
    sink, server = recorded
    request = genai_request(16)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[3].trace_id = b"\x01" * 15
    spans[9].span_id = bytes(8)

    r = post(server, request.SerializeToString())

    assert r.status == 200
    assert r.headers["content-type"] == PB
    response = ExportTraceServiceResponse.FromString(r.body)
    assert response.partial_success.rejected_spans == 2
    assert response.partial_success.error_message
    assert len(sink.spans) == 14

    r = post(server, genai_request(4).SerializeToString(), content_encoding="gzip")
    assert r.status == 400  # said gzip, sent plain: bad data

    r = post(server, gzip.compress(genai_request(4).SerializeToString()), content_encoding="gzip")
    assert r.status == 200
    assert not ExportTraceServiceResponse.FromString(r.body).HasField("partial_success")
    assert len(sink.spans) == 18


def test_an_empty_request_succeeds_without_calling_the_sink(
    recorded: tuple[RecordingSink, AsgiServer],
) -> None:
    sink, server = recorded
    assert post(server, b"").status == 200
    assert post(server, b"{}", JS).status == 200
    assert sink.batches == []


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(b"\xff\xff\xff\xff", PB), (b"\x0a\x10abc", PB), (b"{nope", JS), (b"[1]", JS)],
)
def test_garbage_is_400_with_a_status_body(
    recorded: tuple[RecordingSink, AsgiServer], body: bytes, content_type: str
) -> None:
    sink, server = recorded
    r = post(server, body, content_type)
    assert r.status == 400
    if content_type == PB:
        status = r.status_message()
        assert status.code == 3  # INVALID_ARGUMENT
        assert "ExportTraceServiceRequest" in status.message
        bad_request = BadRequest()
        assert status.details[0].Unpack(bad_request)
        assert bad_request.field_violations[0].field == "body"
    else:
        doc = r.json()
        assert str(doc["message"]).startswith("the body is not")
        assert doc["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"  # type: ignore[index]
    assert sink.batches == []


@pytest.mark.parametrize(
    ("content_type", "headers"),
    [("text/plain", {}), ("application/grpc", {}), (PB, {"content_encoding": "br"})],
)
def test_unsupported_media_is_415(
    recorded: tuple[RecordingSink, AsgiServer], content_type: str, headers: dict[str, str]
) -> None:
    _, server = recorded
    r = post(server, b"x", content_type, **headers)
    assert r.status == 415
    assert "not supported" in r.status_message().message


def test_oversize_bodies_are_413(recorded: tuple[RecordingSink, AsgiServer]) -> None:
    sink, server = recorded
    with AsgiServer(otlp_app(sink, max_body_bytes=1000)) as small:
        assert post(small, bytes(1001)).status == 413
        assert post(small, bytes(1000)).status == 400  # at the cap: read, then not a request
    bomb = gzip.compress(bytes(20_000_000))  # 20 kB that inflate to 20 MB
    r = post(server, bomb, content_encoding="gzip")
    assert r.status == 413
    assert "once decompressed" in r.status_message().message
    assert sink.batches == []


def test_a_bad_project_header_is_400(recorded: tuple[RecordingSink, AsgiServer]) -> None:
    sink, server = recorded
    r = post(server, genai_request(2).SerializeToString(), x_evalsi_project="no spaces")
    assert r.status == 400
    assert "x-evalsi-project" in r.status_message().message
    r = post(server, genai_request(2).SerializeToString(), x_evalsi_project="team-a.prod")
    assert r.status == 200
    assert [p for p, _ in sink.batches] == ["team-a.prod"]


def test_get_is_405(recorded: tuple[RecordingSink, AsgiServer]) -> None:
    _, server = recorded
    assert post(server, b"", method="GET").status == 405


@pytest.mark.parametrize("content_type", [PB, JS])
def test_an_overloaded_sink_is_503_with_retry_after(content_type: str) -> None:
    sink = OverloadedSink(refusals=1, retry_after_s=1.5)
    body = (
        genai_request(2).SerializeToString()
        if content_type == PB
        else json_doc(json_span("0000000000000001"))
    )
    with AsgiServer(otlp_app(sink)) as server:
        r = post(server, body, content_type)
        assert r.status == 503
        assert r.headers["retry-after"] == "2"  # whole seconds, rounded up
        if content_type == PB:
            status = r.status_message()
            assert status.code == 14  # UNAVAILABLE
            info = RetryInfo()
            assert status.details[0].Unpack(info)
            assert (info.retry_delay.seconds, info.retry_delay.nanos) == (1, 500_000_000)
        else:
            assert "ingest is full" in str(r.json()["message"])
        assert sink.batches == []
        assert post(server, body, content_type).status == 200  # the retry is taken whole


def test_inflight_bytes_over_the_limit_are_refused_whole() -> None:
    sink = BlockingSink()
    body = genai_request(8).SerializeToString()
    with (
        AsgiServer(otlp_app(sink, max_inflight_bytes=len(body) + 10)) as server,
        ThreadPoolExecutor(1) as pool,
    ):
        first = pool.submit(post, server, body)
        assert sink.entered.wait(10)  # the first request holds its bytes in the sink

        second = post(server, body)
        assert second.status == 503
        assert second.headers["retry-after"] == "1"
        assert "traces.otlp.maxInflightBytes" in second.status_message().message

        sink.release.set()
        assert first.result(10).status == 200
        assert post(server, body).status == 200  # the budget was given back
    assert [len(batch) for _, batch in sink.batches] == [8, 8]


def test_one_request_larger_than_the_budget_still_passes_alone() -> None:
    sink = RecordingSink()
    with AsgiServer(otlp_app(sink, max_inflight_bytes=10)) as server:
        assert post(server, genai_request(4).SerializeToString()).status == 200
    assert len(sink.spans) == 4


def test_sink_failures_never_leak() -> None:
    body = genai_request(1).SerializeToString()
    with AsgiServer(otlp_app(FailingSink(RuntimeError("secret detail")))) as server:
        r = post(server, body)
        assert r.status == 500
        assert r.status_message().message == INTERNAL_MESSAGE
        assert b"secret" not in r.body
    with AsgiServer(otlp_app(FailingSink(RunError("the store is down")))) as server:
        assert post(server, body).status == 503  # retryable


def test_http_requests_are_counted() -> None:
    state = SimpleNamespace(runs=None, store=SimpleNamespace(count_runs_by_status=dict))
    metrics = Metrics(state)  # type: ignore[arg-type]
    with AsgiServer(otlp_app(RecordingSink(), metrics=metrics)) as server:
        post(server, genai_request(1).SerializeToString())
        post(server, b"\xff")
        post(server, b"", "text/plain")

    def count(code: str) -> float | None:
        labels = {"service": SERVICE, "method": "Export", "protocol": "otlp_http", "code": code}
        return metrics.registry.get_sample_value("evalsi_requests_total", labels)

    assert (count("ok"), count("invalid_argument")) == (1.0, 2.0)


def test_otlp_ports_answer_only_otlp() -> None:
    async def healthz(request: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    sink = RecordingSink()
    inner = Starlette(routes=[Route("/healthz", healthz), Mount("/", otlp_app(sink))])
    restricted = AsgiServer(inner)
    restricted.app = OtlpOnlyOn(inner, {restricted.port})
    open_port = AsgiServer(OtlpOnlyOn(inner, {restricted.port + 1}))
    body = genai_request(1).SerializeToString()
    with restricted, open_port:
        assert post(restricted, b"", path="/healthz", method="GET").status == 404
        assert post(restricted, body).status == 200
        assert post(open_port, b"", path="/healthz", method="GET").status == 200
    assert len(sink.spans) == 1


# --- fuzz --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[tuple[RecordingSink, AsgiServer]]:
    sink = RecordingSink()
    with AsgiServer(otlp_app(sink, max_body_bytes=200_000)) as server:
        yield sink, server


VALID = genai_request(6).SerializeToString()


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fuzzed_requests_get_a_spec_status_and_exact_counts(
    fuzz_server: tuple[RecordingSink, AsgiServer], data: st.DataObject
) -> None:
    sink, server = fuzz_server
    body = bytearray(VALID)
    for _ in range(data.draw(st.integers(0, 6))):
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    raw = bytes(body[: data.draw(st.integers(0, len(body)))])
    if data.draw(st.booleans()):
        raw = data.draw(st.binary(max_size=300))
    content_type = data.draw(st.sampled_from([PB, JS, "text/plain"]))
    encoding = data.draw(st.sampled_from(["", "gzip"]))
    sent = gzip.compress(raw) if encoding == "gzip" else raw
    before = len(sink.spans)

    r = post(server, sent, content_type, content_encoding=encoding)

    assert r.status in (200, 400, 413, 415), r.body
    if content_type == "text/plain":
        assert r.status == 415
    if r.status != 200:
        assert len(sink.spans) == before  # refused whole
        return
    if content_type == PB:  # the reference parser agrees it is a request; counts add up
        total = sum(
            len(ss.spans)
            for rs in ExportTraceServiceRequest.FromString(raw).resource_spans
            for ss in rs.scope_spans
        )
        rejected = ExportTraceServiceResponse.FromString(r.body).partial_success.rejected_spans
        assert rejected + len(sink.spans) - before == total


def test_extra_listener_binds() -> None:
    def config(host: str = "127.0.0.1", port: int = 8080, **otlp: Any) -> ServerConfig:
        return ServerConfig(host=host, port=port, traces=TracesConfig(otlp=OtlpConfig(**otlp)))

    assert otlp_binds(config()) == []
    # a gRPC port of its own is grpcio's; hypercorn binds the HTTP port
    assert otlp_binds(config(grpc_port=4317, http_port=4318)) == ["127.0.0.1:4318"]
    assert native_grpc_port(config(grpc_port=4317, http_port=4318)) == 4317
    assert otlp_binds(config("::1", http_port=4318)) == ["[::1]:4318"]
    assert otlp_binds(config("::1", grpc_port=4317)) == []
    assert otlp_binds(config(port=4318, grpc_port=4317, http_port=4318)) == []
    # one port for both: hypercorn serves it (HTTP/1.1 and HTTP/2)
    assert otlp_binds(config(grpc_port=4317, http_port=4317)) == ["127.0.0.1:4317"]
    assert native_grpc_port(config(grpc_port=4317, http_port=4317)) is None
    assert native_grpc_port(config(port=4317, grpc_port=4317)) is None
    assert otlp_ports(config(grpc_port=4317, http_port=4318)) == [4318]


def test_a_big_request_is_decoded_off_the_loop_and_arrives_whole() -> None:
    sink = RecordingSink()
    request = genai_request(2400)
    assert request.ByteSize() > INLINE_DECODE_BYTES
    with AsgiServer(otlp_app(sink, max_body_bytes=4 * INLINE_DECODE_BYTES)) as server:
        r = post(server, gzip.compress(request.SerializeToString()), content_encoding="gzip")
    assert r.status == 200
    assert len(sink.spans) == 2400
    assert sink.spans[2399].attributes == genai_attributes(2399)
