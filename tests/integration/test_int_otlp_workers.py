"""OTLP ingest through worker processes (``traces.ingestWorkers``) on a real hypercorn server
and a SQLite file: spans are decoded and stored in the workers, assembled in the server;
partial success, bad bodies, a dead worker and the configuration answer as in-process."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette

from evalsi.core import SpecError, UserError
from evalsi.server._config import load_config
from evalsi.server._state import OtlpConfig, ServerConfig, TracesConfig
from evalsi.server.otlp._ingest_pool import IngestPool, worker_count
from evalsi.server.otlp._receivers import otlp_mounts
from evalsi.server.otlp._shared import SERVICE
from evalsi.store import SqlStore, TraceStore
from evalsi.traces import Ingest, Overloaded, parse_rules
from tests.support.asgi_server import AsgiServer
from tests.support.otlp_fixtures import genai_request

PB = "application/x-protobuf"


class _Lifespan:
    """Starts the ingest on the server's loop (as the app's lifespan does)."""

    def __init__(self, ingest: Ingest, pool: IngestPool) -> None:
        self.ingest, self.pool = ingest, pool

    def app(self) -> Starlette:
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def lifespan(app: Starlette) -> Any:
            await self.ingest.start()
            try:
                yield
            finally:
                await self.ingest.stop()
                await asyncio.to_thread(self.pool.close)

        config = ServerConfig(traces=TracesConfig(otlp=OtlpConfig()))
        routes = otlp_mounts(self.ingest, config, workers=(self.pool, self.ingest))
        return Starlette(routes=routes, lifespan=lifespan)


@pytest.fixture(params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[AsgiServer, TraceStore, IngestPool]]:
    """The workers open the store themselves: a SQLite file, or PostgreSQL by its URL (with
    its password and options, here a test schema's search_path)."""
    url = (
        str(tmp_path / "evalsi.db")
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    store = SqlStore.open(url)
    traces = TraceStore(store)
    rules = parse_rules(
        [{"name": "key", "pattern": r"chatcmpl-\d+", "replacement": "[ID]"}], "traces.redaction"
    )
    pool = IngestPool(2, store, rules)
    ingest = Ingest(traces, grace_s=0.05)
    try:
        with AsgiServer(_Lifespan(ingest, pool).app()) as server:
            yield server, traces, pool
    finally:
        traces.close()
        store.close()


def _post(server: AsgiServer, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    try:
        conn.request("POST", "/v1/traces", body=body, headers={"content-type": PB})
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def _wait_traces(traces: TraceStore, n: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows, _ = traces.list_traces("default", limit=500)
        if len(rows) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} traces were assembled")


def test_workers_store_redacted_spans_and_the_server_assembles_them(
    served: tuple[AsgiServer, TraceStore, IngestPool],
) -> None:
    server, traces, _ = served
    request = genai_request(64, seed=3)
    bad = request.resource_spans[0].scope_spans[0].spans.add()
    bad.trace_id, bad.span_id = b"\x01" * 3, b"\x02" * 8  # rejected: not 16 bytes
    status, body = _post(server, request.SerializeToString())
    assert status == 200
    answer = ExportTraceServiceResponse.FromString(body)
    assert answer.partial_success.rejected_spans == 1
    _wait_traces(traces, 8)  # 64 spans in traces of 8
    rows, _ = traces.list_traces("default", limit=500)
    assert sorted(r.span_count for r in rows) == [8] * 8
    spans, _ = traces.list_spans("default", limit=500)
    assert len(spans) == 64
    ids = {s.attributes["gen_ai.response.id"] for s in spans}
    assert ids == {"[ID]"}  # the redaction rules reached the workers


def test_a_body_a_worker_cannot_decode_is_400(
    served: tuple[AsgiServer, TraceStore, IngestPool],
) -> None:
    server, traces, _ = served
    status, body = _post(server, b"\xff\x00 not protobuf")
    assert status == 400
    assert b"ExportTraceServiceRequest" in body
    spans, _ = traces.list_spans("default")
    assert spans == []


def test_a_dead_worker_fails_its_request_with_503_and_the_pool_restarts(
    served: tuple[AsgiServer, TraceStore, IngestPool],
) -> None:
    server, traces, pool = served
    assert _post(server, genai_request(8, seed=1).SerializeToString())[0] == 200
    executor = pool._pool
    assert executor is not None
    for pid in list(executor._processes):  # kill the workers between requests
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    status, _ = _post(server, genai_request(8, seed=2).SerializeToString())
    assert status == 503  # the sender retries...
    answers = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, _ = _post(server, genai_request(8, seed=2).SerializeToString())
        answers.append(status)
        if status == 200:  # ...and a fresh pool takes it, after a short pause
            break
        time.sleep(0.2)
    assert answers[-1] == 200
    assert set(answers[:-1]) <= {503}
    _wait_traces(traces, 2)


def test_worker_count_and_its_configuration(tmp_path: Path) -> None:
    memory = SqlStore.open(":memory:")
    assert worker_count(None, memory) == 0  # auto: another process cannot open it
    assert worker_count(None, SqlStore.open(tmp_path / "a.db")) == min(os.cpu_count() or 1, 8)
    assert worker_count(0, SqlStore.open(tmp_path / "b.db")) == 0
    with pytest.raises(UserError, match="needs a store other processes can open"):
        worker_count(2, memory)
    cfg = tmp_path / "evalsi.yaml"
    cfg.write_text("traces: {ingestWorkers: 3}\n")
    assert load_config(cfg).traces.ingest_workers == 3
    for bad in ("many", "-1", "true", "65"):
        cfg.write_text(f"traces: {{ingestWorkers: {bad}}}\n")
        with pytest.raises(SpecError, match=r"traces\.ingestWorkers: expected auto or an integer"):
            load_config(cfg)


def test_an_empty_request_never_starts_the_pool(
    served: tuple[AsgiServer, TraceStore, IngestPool],
) -> None:
    server, _, pool = served
    assert _post(server, ExportTraceServiceRequest().SerializeToString())[0] == 200
    assert pool._pool is None


def test_grpc_requests_reach_the_workers_as_bytes(
    served: tuple[AsgiServer, TraceStore, IngestPool],
) -> None:
    """The Export request is not parsed on the event loop: its bytes go to a worker, which
    parses, stores and counts partial success; garbage is INVALID_ARGUMENT from the worker."""
    server, traces, pool = served
    request = genai_request(16, seed=5)
    bad = request.resource_spans[0].scope_spans[0].spans.add()
    bad.trace_id, bad.span_id = b"\x00" * 16, b"\x02" * 8  # rejected: an all-zero trace id
    with grpc.insecure_channel(f"{server.host}:{server.port}") as channel:
        export = channel.unary_unary(
            f"/{SERVICE}/Export",
            request_serializer=lambda raw: raw,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        answer = export(request.SerializeToString(), timeout=60)
        assert answer.partial_success.rejected_spans == 1
        assert pool._pool is not None  # a worker took it
        with pytest.raises(grpc.RpcError) as refused:
            export(b"\xff\x00 not protobuf", timeout=60)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ExportTraceServiceRequest" in (refused.value.details() or "")
    _wait_traces(traces, 2)


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_workers_exit_when_the_server_is_killed(tmp_path: Path) -> None:
    """A server killed with SIGKILL leaves no ingest worker behind (each watches its parent);
    what was answered 200 is in the store, and the next server completes the trace the
    killed one left open."""
    import subprocess
    import sys

    from tests.support.server_state import free_port

    port = free_port()
    config = tmp_path / "evalsi.yaml"
    config.write_text(
        f"server: {{host: 127.0.0.1, port: {port}}}\n"
        f"storage: {{sqlite: {{path: {tmp_path / 'e.db'}}}}}\n"
        "traces: {ingestWorkers: 1, gracePeriod: 60s, retention: never}\n"  # open when killed
    )
    cmd = [sys.executable, "-c", "import sys; from evalsi.cli import main; sys.exit(main())"]
    server = subprocess.Popen(
        [*cmd, "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        status = 0
        while time.monotonic() < deadline:
            try:
                status = _post(_At("127.0.0.1", port), genai_request(16).SerializeToString())[0]
                break
            except OSError:
                time.sleep(0.2)
        assert status == 200
        workers = _children(server.pid)
        assert workers, "no ingest worker was started"
    finally:
        server.kill()
        server.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)
    store = SqlStore.open(tmp_path / "e.db")
    try:
        spans, _ = TraceStore(store).list_spans("default", limit=100)
        assert len(spans) == 16
        assert TraceStore(store).list_traces("default")[0] == []  # never completed
    finally:
        store.close()
    config.write_text(config.read_text().replace("gracePeriod: 60s", "gracePeriod: 100ms"))
    log = tmp_path / "again.log"
    with log.open("wb") as err:
        again = subprocess.Popen(
            [*cmd, "serve", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=err
        )
    store = SqlStore.open(tmp_path / "e.db")
    try:
        deadline = time.monotonic() + 60
        found: list[Any] = []
        # the two recovered traces may complete in separate writer batches
        while time.monotonic() < deadline and len(found) < 2:
            found = TraceStore(store).list_traces("default")[0]
            time.sleep(0.2)
        assert [t.span_count for t in found] == [8, 8], log.read_text()[-3000:]
    finally:
        again.terminate()
        again.wait(30)
        store.close()


class _At:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port


def test_spans_the_row_encoder_refuses_are_400_from_a_worker(
    served: tuple[AsgiServer, TraceStore, IngestPool],
) -> None:
    server, traces, _ = served
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(300):  # decodes, but nests past the JSON row encoder's limit
        value = {"arrayValue": {"values": [value]}}
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "deep",
        "attributes": [{"key": "x", "value": value}],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    try:
        conn.request("POST", "/v1/traces", body=body, headers={"content-type": "application/json"})
        reply = conn.getresponse()
        status, text = reply.status, reply.read()
    finally:
        conn.close()
    assert status == 400
    assert b"refused these spans" in text
    spans, _ = traces.list_spans("default")
    assert spans == []


def test_a_closed_pool_refuses_instead_of_starting_again(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "c.db")
    pool = IngestPool(1, store, ())
    pool.close()
    with pytest.raises(Overloaded, match="stopping"):
        asyncio.run(pool.prepare("default", b"", "application/x-protobuf"))
    assert pool._pool is None
    store.close()
