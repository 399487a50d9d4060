"""TraceService/Export over gRPC (grpcio client, h2c to hypercorn): partial success,
INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE with a RetryInfo, back-pressure, metrics."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from google.rpc.error_details_pb2 import RetryInfo  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

from evalsi.server._errors import ErrorInterceptor
from evalsi.server._metrics import Metrics
from evalsi.server.otlp._shared import RETRY_INFO_TRAILER, SERVICE
from tests.support.asgi_server import AsgiServer
from tests.support.otlp_fixtures import (
    BlockingSink,
    OverloadedSink,
    RecordingSink,
    genai_request,
    kv,
    otlp_app,
)

EXPORT = f"/{SERVICE}/Export"


def stub_for(channel: Any) -> Any:
    return TraceServiceStub(channel)  # type: ignore[no-untyped-call]


@pytest.fixture
def channel_to() -> Iterator[Any]:
    channels: list[Any] = []

    def open_channel(server: AsgiServer) -> Any:
        channel = grpc.insecure_channel(f"{server.host}:{server.port}")
        channels.append(channel)
        return channel

    yield open_channel
    for channel in channels:
        channel.close()


def test_partial_success_and_project(channel_to: Any) -> None:
    sink = RecordingSink()
    request = genai_request(10)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].parent_span_id = b"\x01\x02\x03"
    with AsgiServer(otlp_app(sink)) as server:
        stub = stub_for(channel_to(server))
        response = stub.Export(request, metadata=[("x-evalsi-project", "proj-1")], timeout=10)
        full = stub.Export(genai_request(2), timeout=10)
    assert response.partial_success.rejected_spans == 1
    assert "parent span id" in response.partial_success.error_message
    assert not full.HasField("partial_success")
    assert [(p, len(b)) for p, b in sink.batches] == [("proj-1", 9), ("default", 2)]


def test_bad_input_is_invalid_argument(channel_to: Any) -> None:
    sink = RecordingSink()
    with AsgiServer(otlp_app(sink)) as server:
        channel = channel_to(server)
        stub = stub_for(channel)
        with pytest.raises(grpc.RpcError) as bad_project:
            stub.Export(genai_request(1), metadata=[("x-evalsi-project", "../x")], timeout=10)
        raw = channel.unary_unary(EXPORT)  # no serializer: the bytes go as they are
        with pytest.raises(grpc.RpcError) as garbage:
            raw(b"\xff\xff\xff\xff", timeout=10)
    assert bad_project.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "x-evalsi-project" in bad_project.value.details()
    assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sink.batches == []


def test_oversize_and_gzip_bomb_are_resource_exhausted(channel_to: Any) -> None:
    # Within one HTTP/2 flow-control window: when a larger body is refused before it is all
    # read, hypercorn's h2 stack drops the connection (KeyError on the closed stream), for
    # every service alike, and the client sees UNAVAILABLE instead.
    sink = RecordingSink()
    big = genai_request(1)
    big.resource_spans[0].resource.attributes.append(kv("padding", "a" * 30_000))
    with AsgiServer(otlp_app(sink, max_body_bytes=20_000)) as server:
        stub = stub_for(channel_to(server))
        with pytest.raises(grpc.RpcError) as plain:
            stub.Export(big, timeout=10)
        with pytest.raises(grpc.RpcError) as bomb:  # ~1 kB on the wire, 30 kB inflated
            stub.Export(big, timeout=10, compression=grpc.Compression.Gzip)
    assert plain.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert bomb.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert sink.batches == []


def test_overloaded_is_unavailable_with_retry_info(channel_to: Any) -> None:
    sink = OverloadedSink(refusals=1, retry_after_s=2.25)
    with AsgiServer(otlp_app(sink)) as server:
        stub = stub_for(channel_to(server))
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(genai_request(3), timeout=10)
        assert stub.Export(genai_request(3), timeout=10) == ExportTraceServiceResponse()
    assert_retry_in(refused.value, (2, 250_000_000))
    assert [len(batch) for _, batch in sink.batches] == [3]


def assert_retry_in(error: Any, delay: tuple[int, int]) -> None:
    """UNAVAILABLE with the retry delay where the OpenTelemetry exporters read their back-off
    from, and in the standard rich status other gRPC clients read."""
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    trailers = dict(error.trailing_metadata())
    info = RetryInfo.FromString(trailers[RETRY_INFO_TRAILER])
    assert (info.retry_delay.seconds, info.retry_delay.nanos) == delay
    status = Status.FromString(trailers["grpc-status-details-bin"])
    from_details = RetryInfo()
    assert status.details[0].Unpack(from_details)
    assert from_details == info


def test_inflight_limit_is_unavailable_and_shared_with_http(channel_to: Any) -> None:
    sink = BlockingSink()
    request = genai_request(8)
    with AsgiServer(otlp_app(sink, max_inflight_bytes=request.ByteSize() + 10)) as server:
        stub = stub_for(channel_to(server))
        first = stub.Export.future(request, timeout=20)
        assert sink.entered.wait(10)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(request, timeout=10)
        http_refused = _post_http(server, request.SerializeToString())
        sink.release.set()
        assert first.result(10) == ExportTraceServiceResponse()
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "maxInflightBytes" in refused.value.details()
    assert http_refused == 503
    assert [len(batch) for _, batch in sink.batches] == [8]


def test_grpc_requests_are_counted_by_the_shared_interceptors(channel_to: Any) -> None:
    state = SimpleNamespace(runs=None, store=SimpleNamespace(count_runs_by_status=dict))
    metrics = Metrics(state)  # type: ignore[arg-type]
    app = otlp_app(RecordingSink(), interceptors=(metrics.interceptor, ErrorInterceptor()))
    with AsgiServer(app) as server:
        stub = stub_for(channel_to(server))
        stub.Export(genai_request(1), timeout=10)
        with pytest.raises(grpc.RpcError):
            stub.Export(ExportTraceServiceRequest(), metadata=[("x-evalsi-project", "?")])
    labels = {"service": SERVICE, "method": "Export", "protocol": "grpc"}
    get = metrics.registry.get_sample_value
    assert get("evalsi_requests_total", {**labels, "code": "ok"}) == 1.0
    assert get("evalsi_requests_total", {**labels, "code": "invalid_argument"}) == 1.0


def _post_http(server: AsgiServer, body: bytes) -> int:
    import http.client

    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("POST", "/v1/traces", body, {"content-type": "application/x-protobuf"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_retry_info_trailer_is_base64_without_padding() -> None:
    # grpcio decodes -bin metadata with or without padding; keep the unpadded form stable.
    info = RetryInfo()
    info.retry_delay.seconds = 1
    encoded = base64.b64encode(info.SerializeToString()).decode().rstrip("=")
    assert "=" not in encoded


def test_the_native_otlp_port_answers_overload_with_retry_info() -> None:
    """traces.otlp.grpcPort is grpcio's: Export gets the request's bytes, and an Overloaded
    answer carries the retry delay in both trailers, as on the main port."""
    import asyncio
    import threading

    from evalsi.server.otlp._receivers import TraceServiceHandler
    from evalsi.server.otlp._shared import InflightBudget, RawExport
    from evalsi.server.protocol._grpc_port import GrpcPort

    sink = OverloadedSink(refusals=1, retry_after_s=2.25)
    handler = TraceServiceHandler(sink, InflightBudget(1 << 26))
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    natives: list[GrpcPort] = []
    ports: list[int] = []

    async def start() -> None:  # grpc.aio servers belong to the loop they are built on
        native = GrpcPort(
            {SERVICE: handler}, None, max_body_bytes=1 << 22, raw={f"{SERVICE}/Export": RawExport}
        )
        ports.append(native.bind("127.0.0.1", 0, "traces.otlp.grpcPort"))
        await native.start()
        natives.append(native)

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{ports[0]}") as channel:
            stub = stub_for(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(genai_request(3), timeout=10)
            assert stub.Export(genai_request(3), timeout=10) == ExportTraceServiceResponse()
            with pytest.raises(grpc.RpcError) as garbage:
                channel.unary_unary(f"/{SERVICE}/Export")(b"\xff\x00 not protobuf", timeout=10)
    finally:
        asyncio.run_coroutine_threadsafe(natives[0].stop(None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    assert_retry_in(refused.value, (2, 250_000_000))
    assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [len(batch) for _, batch in sink.batches] == [3]
