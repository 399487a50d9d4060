"""Replay pre-encoded OTLP export requests as fast as a receiver takes them.

The OTel Python SDK's own exporter encodes as it sends and tops out near 4,600 spans/s on this
machine, too slow to load a receiver; this sender only moves bytes that were encoded beforehand
(``_otlp_stream``):

- HTTP/protobuf (``POST /v1/traces``) with aiohttp: ``concurrency`` requests in flight over
  keep-alive connections;
- gRPC (``opentelemetry.proto.collector.trace.v1.TraceService/Export``) with a grpcio asyncio
  channel whose method has no serializers, so the request bytes go out as they are.

Throttling is honoured as the OTLP spec asks: HTTP 429/502/503/504 (``Retry-After`` when given)
and gRPC UNAVAILABLE and friends (``RetryInfo`` when given) retry the same bytes after the delay,
and every retry is counted. ``partial_success.rejected_spans`` in a response is counted too.

Also here: decode-only sinks (an aiohttp route and a grpcio server that parse and walk each
request and answer an empty response), the ceiling of sender plus transport, and what the smoke
test sends to. ``python bench/_otlp_replay.py --sink http|grpc PORT`` runs one in its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
HTTP_RETRYABLE = frozenset({429, 502, 503, 504})
GRPC_RETRYABLE = frozenset(
    {"CANCELLED", "DEADLINE_EXCEEDED", "ABORTED", "OUT_OF_RANGE", "UNAVAILABLE", "DATA_LOSS"}
)
MAX_DELAY_S = 30.0
FIRST_BACKOFF_S = 0.1
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
]


@dataclass(slots=True)
class SendResult:
    """What one replay did. ``spans`` counts spans in requests the receiver answered OK."""

    protocol: str
    requests: int = 0
    spans: int = 0
    rejected_spans: int = 0
    retries: int = 0
    failed_requests: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    first_error: str = ""
    started: float = 0.0  # time.monotonic() of the first send
    finished: float = 0.0  # time.monotonic() of the last answer

    @property
    def seconds(self) -> float:
        return max(self.finished - self.started, 1e-9)

    @property
    def spans_per_s(self) -> float:
        return self.spans / self.seconds

    def fail(self, kind: str, detail: str) -> None:
        self.failures[kind] = self.failures.get(kind, 0) + 1
        if not self.first_error:
            self.first_error = f"{kind}: {detail[:300]}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "requests": self.requests,
            "spans": self.spans,
            "rejected_spans": self.rejected_spans,
            "retries": self.retries,
            "failed_requests": self.failed_requests,
            "failures": dict(self.failures),
            "first_error": self.first_error,
            "seconds": round(self.seconds, 3),
            "spans_per_s": round(self.spans_per_s, 1),
        }


class Sender(Protocol):
    protocol: str

    async def __aenter__(self) -> Sender: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def export(self, body: bytes, spans: int, result: SendResult) -> bool:
        """Send one request until it is taken or fails for good; True when taken."""
        ...


def _rejected(body: bytes) -> int:
    """``partial_success.rejected_spans`` of an encoded ``ExportTraceServiceResponse``."""
    if not body:
        return 0
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    try:
        return int(ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans)
    except Exception:  # a receiver that answers something else: not our measurement
        return 0


def retry_after_s(value: str | None) -> float | None:
    """An HTTP ``Retry-After`` value (seconds or an HTTP date) as seconds from now."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class HttpSender:
    """OTLP/HTTP: ``POST url`` with ``content_type`` bodies over an aiohttp session."""

    protocol = "http"

    def __init__(
        self,
        url: str,
        *,
        concurrency: int = 8,
        content_type: str = "application/x-protobuf",
        timeout_s: float = 120.0,
        max_retries: int = 100,
    ) -> None:
        self.url = url
        self.concurrency = concurrency
        self.headers = {"Content-Type": content_type}
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.session: Any = None

    async def __aenter__(self) -> HttpSender:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.concurrency, force_close=False)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        self.session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()

    async def export(self, body: bytes, spans: int, result: SendResult) -> bool:
        import aiohttp

        backoff = FIRST_BACKOFF_S
        for attempt in range(self.max_retries + 1):
            delay: float | None = None
            try:
                async with self.session.post(self.url, data=body, headers=self.headers) as resp:
                    answer = await resp.read()
                    if resp.status == 200:
                        result.rejected_spans += _rejected(answer)
                        return True
                    if resp.status not in HTTP_RETRYABLE:
                        result.fail(f"HTTP {resp.status}", answer.decode("utf-8", "replace"))
                        return False
                    delay = retry_after_s(resp.headers.get("Retry-After"))
                    kind = f"HTTP {resp.status}"
            except (aiohttp.ClientError, TimeoutError) as e:
                kind = type(e).__name__
                if attempt == self.max_retries:
                    result.fail(kind, str(e))
                    return False
            if attempt == self.max_retries:
                result.fail(f"{kind} (gave up after {attempt} retries)", "")
                return False
            result.retries += 1
            await asyncio.sleep(min(MAX_DELAY_S, backoff if delay is None else delay))
            backoff = min(MAX_DELAY_S, backoff * 2)
        return False


def _grpc_retry_delay(error: Any) -> float | None:
    """The ``google.rpc.RetryInfo`` delay in a gRPC error's status details, if any."""
    try:
        from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
    except ImportError:
        return None
    for key, value in error.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                info = error_details_pb2.RetryInfo()
                detail.Unpack(info)
                return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    return None


class GrpcSender:
    """OTLP/gRPC: the Export method called with pre-serialised bytes on one HTTP/2 channel."""

    protocol = "grpc"

    def __init__(self, target: str, *, timeout_s: float = 120.0, max_retries: int = 100) -> None:
        self.target = target.removeprefix("http://")
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.channel: Any = None
        self.call: Any = None

    async def __aenter__(self) -> GrpcSender:
        import grpc  # type: ignore[import-untyped]

        self.channel = grpc.aio.insecure_channel(self.target, options=GRPC_OPTIONS)
        # No serializers: grpcio sends the bytes as given and hands back the raw response.
        self.call = self.channel.unary_unary(EXPORT_PATH)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.channel.close()

    async def export(self, body: bytes, spans: int, result: SendResult) -> bool:
        import grpc

        backoff = FIRST_BACKOFF_S
        for attempt in range(self.max_retries + 1):
            try:
                answer = await self.call(body, timeout=self.timeout_s)
            except grpc.aio.AioRpcError as e:
                code = e.code().name
                delay = _grpc_retry_delay(e)
                retryable = code in GRPC_RETRYABLE or (
                    code == "RESOURCE_EXHAUSTED" and delay is not None
                )
                if not retryable or attempt == self.max_retries:
                    gave_up = f" (gave up after {attempt} retries)" if retryable else ""
                    result.fail(f"gRPC {code}{gave_up}", e.details() or "")
                    return False
                result.retries += 1
                await asyncio.sleep(min(MAX_DELAY_S, backoff if delay is None else delay))
                backoff = min(MAX_DELAY_S, backoff * 2)
                continue
            result.rejected_spans += _rejected(answer)
            return True
        return False


def make_sender(protocol: str, endpoint: str, *, concurrency: int = 8) -> Sender:
    """``http``: ``endpoint`` is the full URL (``http://host:port/v1/traces``); ``grpc``:
    ``host:port``. ``http-json`` posts OTLP/JSON bodies (see ``_otlp_stream.to_otlp_json``)."""
    if protocol == "http":
        return HttpSender(endpoint, concurrency=concurrency)
    if protocol == "http-json":
        sender = HttpSender(endpoint, concurrency=concurrency, content_type="application/json")
        sender.protocol = "http-json"
        return sender
    if protocol == "grpc":
        return GrpcSender(endpoint)
    raise ValueError(f"unknown protocol {protocol!r} (expected http, http-json or grpc)")


async def replay(
    sender: Sender,
    bodies: Sequence[bytes],
    span_counts: Sequence[int],
    *,
    concurrency: int = 8,
) -> SendResult:
    """Send every body once (in order of start, ``concurrency`` at a time) through ``sender``."""
    if len(bodies) != len(span_counts):
        raise ValueError("bodies and span_counts differ in length")
    result = SendResult(sender.protocol)
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(bodies):
            i = next_index
            next_index += 1
            result.requests += 1
            if await sender.export(bodies[i], span_counts[i], result):
                result.spans += span_counts[i]
            else:
                result.failed_requests += 1
            result.finished = time.monotonic()

    async with sender:
        result.started = time.monotonic()
        async with asyncio.TaskGroup() as tg:
            for _ in range(max(1, concurrency)):
                tg.create_task(worker())
    return result


def send(
    protocol: str,
    endpoint: str,
    bodies: Sequence[bytes],
    span_counts: Sequence[int],
    *,
    concurrency: int = 8,
) -> SendResult:
    """``replay`` from synchronous code."""
    sender = make_sender(protocol, endpoint, concurrency=concurrency)
    return asyncio.run(replay(sender, bodies, span_counts, concurrency=concurrency))


# -- the receiver side: ports, stored rows, memory ----------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(
    ports: Sequence[int], proc: subprocess.Popen[bytes] | None, timeout_s: float
) -> float:
    """Seconds until every port accepts a connection; raises ``RuntimeError`` if ``proc`` exits
    first or the time runs out."""
    started = time.monotonic()
    waiting = list(ports)
    while waiting:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process exited with code {proc.returncode} before listening")
        if time.monotonic() - started > timeout_s:
            raise RuntimeError(f"port(s) {waiting} not listening after {timeout_s:g} s")
        try:
            socket.create_connection(("127.0.0.1", waiting[0]), timeout=1).close()
            waiting.pop(0)
        except OSError:
            time.sleep(0.05)
    return time.monotonic() - started


def count_rows(db: Path, table: str) -> int:
    """Rows in ``table`` of the SQLite file ``db``, read-only; 0 while the file or the table
    does not exist yet."""
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return 0
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    except sqlite3.OperationalError:  # no such table (yet), or locked past the timeout
        return 0
    finally:
        conn.close()


def wait_rows(
    db: Path,
    table: str,
    n: int,
    *,
    timeout_s: float,
    poll_s: float = 0.05,
    alive: subprocess.Popen[bytes] | None = None,
) -> tuple[int, float]:
    """Poll until ``table`` holds ``n`` rows: (rows seen last, ``time.monotonic()`` then)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = count_rows(db, table)
        now = time.monotonic()
        if rows >= n or now > deadline or (alive is not None and alive.poll() is not None):
            return rows, now
        time.sleep(poll_s)


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo.extend(int(c) for c in task.read_text().split())
    return out


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class RssWatch:
    """Samples the resident memory of a process and its children in a thread.

    ``peak_mb``: the largest of the main process's VmHWM (the kernel's high-water mark) and
    the largest sampled sum over the process tree (children included, e.g. a store writer).
    """

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        self.pid = pid
        self.every_s = every_s
        self.tree_peak_kb = 0
        self.hwm_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        total = sum(_status_kb(p, "VmRSS") for p in _tree(self.pid))
        self.tree_peak_kb = max(self.tree_peak_kb, total)
        self.hwm_kb = max(self.hwm_kb, _status_kb(self.pid, "VmHWM"))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def peak_mb(self) -> float:
        return max(self.hwm_kb, self.tree_peak_kb) / 1024


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited in ``timeout_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# -- decode-only sinks ---------------------------------------------------------------------------
@dataclass(slots=True)
class SinkStats:
    requests: int = 0
    spans: int = 0
    throttled: int = 0


def http_sink_app(stats: SinkStats, *, throttle_every: int = 0, retry_after: str = "0") -> Any:
    """An aiohttp app answering ``POST /v1/traces``: decode and walk, then 200 with an empty
    ``ExportTraceServiceResponse``. With ``throttle_every`` = k, every k-th request first gets
    a 429 with ``Retry-After`` (to exercise the sender's retries)."""
    from _otlp_stream import walk_request
    from aiohttp import web

    async def traces(request: web.Request) -> web.Response:
        body = await request.read()
        stats.requests += 1
        if throttle_every and stats.requests % throttle_every == 0:
            stats.throttled += 1
            return web.Response(status=429, headers={"Retry-After": retry_after})
        stats.spans += walk_request(body)
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/v1/traces", traces)
    return app


def grpc_sink_server(stats: SinkStats, port: int) -> Any:
    """A grpcio asyncio server whose generic Export handler decodes and walks each request."""
    import grpc
    from _otlp_stream import walk_request

    async def export(body: bytes, context: Any) -> bytes:
        stats.requests += 1
        stats.spans += walk_request(body)
        return b""

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(export)},
    )
    server = grpc.aio.server(options=GRPC_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    return server


async def _serve_sink(kind: str, port: int) -> None:
    stats = SinkStats()
    if kind == "grpc":
        server = grpc_sink_server(stats, port)
        await server.start()
        print("LISTENING", flush=True)
        await server.wait_for_termination()
        return
    from aiohttp import web

    runner = web.AppRunner(http_sink_app(stats), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("LISTENING", flush=True)
    await asyncio.Event().wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sink", nargs=2, metavar=("KIND", "PORT"), required=True)
    args = parser.parse_args()
    kind, port = args.sink[0], int(args.sink[1])
    if kind not in ("http", "grpc"):
        parser.error("--sink KIND: expected http or grpc")
    asyncio.run(_serve_sink(kind, port))
    return 0


if __name__ == "__main__":
    sys.exit(main())


async def self_check(bodies: Sequence[bytes], span_counts: Sequence[int]) -> dict[str, Any]:
    """Replay into an in-process HTTP sink that answers every 3rd request 429: every span must
    arrive once, and every 429 must have been retried. Raises ``RuntimeError`` otherwise."""
    from aiohttp import web

    stats = SinkStats()
    runner = web.AppRunner(http_sink_app(stats, throttle_every=3), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        url = f"http://127.0.0.1:{port}/v1/traces"
        result = await replay(HttpSender(url, concurrency=2), bodies, span_counts, concurrency=2)
    finally:
        await runner.cleanup()
    want = sum(span_counts)
    problems = []
    if stats.spans != want:
        problems.append(f"the sink decoded {stats.spans} spans, {want} were sent")
    if result.spans != want or result.failures:
        problems.append(f"the sender reports {result.as_dict()}")
    if result.retries != stats.throttled or not stats.throttled:
        problems.append(f"{result.retries} retries for {stats.throttled} 429 answers")
    if problems:
        raise RuntimeError("replay self-check failed: " + "; ".join(problems))
    return {**result.as_dict(), "sink_requests": stats.requests, "throttled": stats.throttled}
