"""The OTLP endpoints wired as ``evalsi serve`` wires them (``run_servers``): on the full app
(beside the API, sharing its metrics and error interceptors) and on the extra OTLP ports
(``traces.otlp``): HTTP on a hypercorn bind beside the main port, gRPC on grpcio; only OTLP
answers there."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
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
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from evalsi._proto.grpc.health.v1 import health_pb2
from evalsi.server._app import build_app
from evalsi.server._errors import ErrorInterceptor
from evalsi.server._serve import run_servers
from evalsi.server._state import OtlpConfig, ServerConfig, TracesConfig
from evalsi.server.otlp._receivers import otlp_handlers, otlp_mounts
from tests.integration.test_int_otlp_logs import sdk_log_records
from tests.integration.test_int_otlp_sdk import assert_arrived, sdk_spans
from tests.integration.test_int_srvfw_fakes import fake_services, fake_state
from tests.support.otlp_fixtures import RecordingSink
from tests.support.server_state import free_port


class Serving:
    """``run_servers`` (what ``evalsi serve`` runs) in a thread, until the context exits."""

    def __init__(self, app: Any, config: ServerConfig) -> None:
        self.app, self.config = app, config
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    def __enter__(self) -> Serving:
        self._thread.start()
        otlp = self.config.traces.otlp
        for port in (self.config.port, otlp.grpc_port, otlp.http_port):
            assert port is not None
            for _ in range(500):  # poll each port until it accepts (as AsgiServer does)
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=5).close()
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                raise RuntimeError(f"nothing listens on port {port}")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        await run_servers(self.app, self.config, self._stop)


@pytest.fixture
def wired(tmp_path: Path) -> Iterator[tuple[RecordingSink, ServerConfig]]:
    sink = RecordingSink()
    state = fake_state(tmp_path)
    config = ServerConfig(
        host="127.0.0.1",
        port=free_port(),
        traces=TracesConfig(otlp=OtlpConfig(grpc_port=free_port(), http_port=free_port())),
    )
    app = build_app(state, fake_services())
    # The lines build_app is to gain: the OTLP routes beside the API, same interceptors.
    metrics = app.state.metrics
    routes = otlp_mounts(
        sink,
        config,
        interceptors=(metrics.interceptor, ErrorInterceptor()),
        metrics=metrics,
        events=sink,
    )
    app.router.routes.extend(routes)
    app.state.otlp_handlers = otlp_handlers(routes)
    with Serving(app, config):
        yield sink, config
    state.store.close()


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_sdk_exports_reach_the_extra_ports(wired: tuple[RecordingSink, ServerConfig]) -> None:
    sink, config = wired
    otlp = config.traces.otlp
    spans = sdk_spans()
    http_exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{otlp.http_port}/v1/traces")
    grpc_exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{otlp.grpc_port}", insecure=True)
    try:
        assert http_exporter.export(spans) is SpanExportResult.SUCCESS
        assert grpc_exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        http_exporter.shutdown()  # type: ignore[no-untyped-call]
        grpc_exporter.shutdown()
    assert len(sink.batches) == 2
    assert_arrived(spans, sink.batches[0][1])
    assert_arrived(spans, sink.batches[1][1])


def test_sdk_log_exports_reach_every_port(wired: tuple[RecordingSink, ServerConfig]) -> None:
    """Span events sent as OTLP log records: HTTP on the main port and ``httpPort``, gRPC on
    the main port and on grpcio's ``grpcPort``."""
    sink, config = wired
    otlp = config.traces.otlp
    records = sdk_log_records()
    exporters = [
        HttpLogExporter(endpoint=f"http://127.0.0.1:{config.port}/v1/logs"),
        HttpLogExporter(endpoint=f"http://127.0.0.1:{otlp.http_port}/v1/logs"),
        GrpcLogExporter(endpoint=f"127.0.0.1:{config.port}", insecure=True),
        GrpcLogExporter(endpoint=f"127.0.0.1:{otlp.grpc_port}", insecure=True),
    ]
    try:
        for exporter in exporters:
            assert exporter.export(records) is LogRecordExportResult.SUCCESS
    finally:
        for exporter in exporters:
            exporter.shutdown()
    assert len(sink.event_batches) == 4
    for project, events in sink.event_batches:
        assert project == "default"
        assert [(e.event.name, e.event.attributes["event.body"]) for e in events] == [
            ("gen_ai.user.message", {"content": "hello"})
        ]


def test_the_main_port_serves_otlp_and_the_api(wired: tuple[RecordingSink, ServerConfig]) -> None:
    sink, config = wired
    spans = sdk_spans()
    exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{config.port}/v1/traces")
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    assert_arrived(spans, sink.spans)
    assert _get(config.port, "/healthz")[0] == 200
    status, text = _get(config.port, "/metrics")
    assert status == 200
    assert (
        'evalsi_requests_total{code="ok",method="Export",protocol="otlp_http",'
        'service="opentelemetry.proto.collector.trace.v1.TraceService"} 1.0'
    ) in text


def test_the_api_is_not_served_on_the_otlp_ports(
    wired: tuple[RecordingSink, ServerConfig],
) -> None:
    _, config = wired
    otlp = config.traces.otlp
    assert otlp.http_port is not None
    assert otlp.grpc_port is not None
    assert _get(otlp.http_port, "/healthz")[0] == 404
    assert _get(otlp.http_port, "/metrics")[0] == 404
    with grpc.insecure_channel(f"127.0.0.1:{otlp.grpc_port}") as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        with pytest.raises(grpc.RpcError):
            check(health_pb2.HealthCheckRequest(), timeout=10)
        with grpc.insecure_channel(f"127.0.0.1:{config.port}") as main:
            answer = main.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )(health_pb2.HealthCheckRequest(), timeout=10)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
