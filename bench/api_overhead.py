"""API overhead: Evaluate over loopback HTTP/JSON and gRPC vs a bare route and the embedded API.

    python bench/api_overhead.py                  # full run (100 clients for 30 s)
    python bench/api_overhead.py --duration 5 --strict

The server (``evalsi.server._app.build_app`` under hypercorn, HTTP/1.1 + h2c, a SQLite store in
a temporary directory) runs in its own process, so client and server do not share a GIL, with
the optional native gRPC port (grpcio, ``server.grpcPort``) open beside the main one. It also
answers ``POST /bare`` from a plain Starlette route that reads the body and returns a small JSON
object: the in-run baseline for what any Python ASGI endpoint costs here.

- one record, exact-match: p50/p95/p99 of Connect JSON (``/evalsi.v1alpha1.EvaluationService/
  Evaluate``), the REST route (``POST /v1alpha1/evaluate``) — both over one keep-alive
  connection — gRPC on the main port (a grpcio channel, hypercorn's HTTP/2) and gRPC on the
  native port (``grpc_native``, grpcio's server), against the bare route;
- 1,000 records per call: records/s over gRPC (both ports) and Connect JSON vs
  ``evalsi.evaluate`` in this process on the same records (best of ``--repeats``);
- ``--clients`` concurrent Connect JSON clients (aiohttp) for ``--duration`` seconds: requests,
  errors and latency percentiles;
- one-record latency while another client keeps sending ``--big-records``-record Evaluates
  (reported, no target): how long a big request stalls the others. Big requests are graded in a
  worker thread, so the event loop keeps answering; the GIL still slows it down.

Targets (issue 4): one record p50 <= 2 ms, p95 <= 5 ms, p99 <= 15 ms; 1,000 records/call within
2x of the embedded API's records/s; no errors under concurrency. Results go to
``bench/out/api_overhead.json``; ``--strict`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
EVALUATE = "/evalsi.v1alpha1.EvaluationService/Evaluate"
ONE = {
    "records": [{"id": "r1", "output": {"text": "Paris"}, "reference": {"text": "Paris"}}],
    "evaluators": [{"ref": "exact-match"}],
}
TARGETS_MS = {"p50": 2.0, "p95": 5.0, "p99": 15.0}


# -- the server process -----------------------------------------------------------------------
def serve(port: int, grpc_port: int, workdir: Path) -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from evalsi.packs import builtin_registry
    from evalsi.server._app import build_app
    from evalsi.server._run_manager import RunManager
    from evalsi.server._serve import run_servers
    from evalsi.server._state import ServerConfig, ServerState
    from evalsi.store import SqlStore

    store = str(workdir / "server.db")
    config = ServerConfig(
        port=port,
        grpc_port=grpc_port,
        data_dir=workdir,
        datasets_dir=workdir / "datasets",
        store=store,
    )
    state = ServerState(config=config, store=SqlStore.open(store), registry=builtin_registry())
    state.runs = RunManager(state)
    app = build_app(state)

    async def bare(request: Request) -> Response:
        await request.body()  # unread bodies make hypercorn close the connection
        return JSONResponse({"ok": True})

    app.router.routes.insert(0, Route("/bare", bare, methods=["POST"]))
    print("LISTENING", flush=True)
    # What `evalsi serve` runs: hypercorn on `port`, grpcio on `grpc_port`, one event loop.
    asyncio.run(run_servers(app, config, asyncio.Event()))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    port, grpc_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), str(grpc_port), str(workdir)],
        stdout=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    waiting = [port, grpc_port]
    while waiting and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", waiting[0]), timeout=1).close()
            waiting.pop(0)
        except OSError:
            time.sleep(0.05)
    if not waiting:
        return proc, port, grpc_port
    proc.kill()
    raise SystemExit("the server did not start within 30 s")


# -- measurements -----------------------------------------------------------------------------
def percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"n": len(ordered), "p50": at(0.50), "p95": at(0.95), "p99": at(0.99)}


def http_latency(port: int, path: str, body: bytes, n: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    headers = {"Content-Type": "application/json"}
    times = []
    for i in range(n + n // 10):  # the first tenth warms up
        start = time.perf_counter()
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise SystemExit(f"{path}: HTTP {response.status}: {data[:300]!r}")
        if i >= n // 10:
            times.append(time.perf_counter() - start)
    conn.close()
    return percentiles(times)


def grpc_call(port: int) -> Any:
    import grpc

    from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return channel, channel.unary_unary(
        EVALUATE,
        request_serializer=pb.EvaluateRequest.SerializeToString,
        response_deserializer=pb.EvaluateResponse.FromString,
    )


def grpc_latency(port: int, n: int) -> dict[str, float]:
    from google.protobuf import json_format

    from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb

    request = json_format.ParseDict(ONE, pb.EvaluateRequest())
    channel, call = grpc_call(port)
    times = []
    for i in range(n + n // 10):
        start = time.perf_counter()
        call(request, timeout=30)
        if i >= n // 10:
            times.append(time.perf_counter() - start)
    channel.close()
    return percentiles(times)


def big_body(records: int) -> dict[str, Any]:
    rows = []
    for i in range(records):
        ref = ["Paris", "London", "4", "yes"][i % 4]
        out = ref if i % 3 else ref.lower()
        rows.append({"id": f"q{i}", "output": {"text": out}, "reference": {"text": ref}})
    return {"records": rows, "evaluators": [{"ref": "exact-match"}]}


def throughput(port: int, grpc_port: int, records: int, repeats: int) -> dict[str, Any]:
    """Best-of records/s for 1,000 records per call: server (gRPC on both ports, Connect JSON)
    vs embedded."""
    from google.protobuf import json_format

    import evalsi
    from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb
    from evalsi.wire import record_from_proto

    body = big_body(records)
    request = json_format.ParseDict(body, pb.EvaluateRequest())
    core = [record_from_proto(r) for r in request.records]
    raw = json.dumps(body).encode()
    channel, call = grpc_call(port)
    native_channel, native_call = grpc_call(grpc_port)
    conn = http.client.HTTPConnection("127.0.0.1", port)
    best = {
        "grpc": float("inf"),
        "grpc_native": float("inf"),
        "connect_json": float("inf"),
        "embedded": float("inf"),
    }
    means = set()
    with tempfile.TemporaryDirectory() as tmp:
        store = evalsi.store.SqlStore.open(str(Path(tmp) / "embedded.db"))
        for _ in range(repeats):
            start = time.perf_counter()
            answer = call(request, timeout=60)
            best["grpc"] = min(best["grpc"], time.perf_counter() - start)
            means.add(answer.metrics[0].mean)
            start = time.perf_counter()
            answer = native_call(request, timeout=60)
            best["grpc_native"] = min(best["grpc_native"], time.perf_counter() - start)
            means.add(answer.metrics[0].mean)
            start = time.perf_counter()
            conn.request("POST", EVALUATE, body=raw, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            best["connect_json"] = min(best["connect_json"], time.perf_counter() - start)
            start = time.perf_counter()
            embedded = evalsi.evaluate(core, ["exact-match"], store=store)
            best["embedded"] = min(best["embedded"], time.perf_counter() - start)
            means.add(embedded.metric("exact-match").mean)
        store.close()
    channel.close()
    native_channel.close()
    conn.close()
    if len(means) != 1:
        raise SystemExit(f"server and embedded disagree on the mean: {sorted(means)}")
    rates = {k: records / v for k, v in best.items()}
    return {
        "records_per_call": records,
        "records_per_s": rates,
        "ratio_embedded_over_grpc": rates["embedded"] / rates["grpc"],
        "ratio_embedded_over_grpc_native": rates["embedded"] / rates["grpc_native"],
        "ratio_embedded_over_connect_json": rates["embedded"] / rates["connect_json"],
    }


async def concurrent(port: int, clients: int, duration: float) -> dict[str, Any]:
    import aiohttp

    body = json.dumps(ONE).encode()
    url = f"http://127.0.0.1:{port}{EVALUATE}"
    times: list[float] = []
    errors: dict[str, int] = {}
    stop = time.monotonic() + duration

    async def client(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < stop:
            start = time.perf_counter()
            try:
                async with session.post(
                    url, data=body, headers={"Content-Type": "application/json"}
                ) as response:
                    await response.read()
                    if response.status != 200:
                        errors[f"HTTP {response.status}"] = (
                            errors.get(f"HTTP {response.status}", 0) + 1
                        )
                        continue
            except (aiohttp.ClientError, TimeoutError) as e:
                errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                continue
            times.append(time.perf_counter() - start)

    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.monotonic()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        elapsed = time.monotonic() - started
    out: dict[str, Any] = {"clients": clients, "seconds": elapsed, "errors": sum(errors.values())}
    out["error_kinds"] = errors
    out["requests"] = len(times)
    out["requests_per_s"] = len(times) / elapsed
    out["latency_ms"] = percentiles(times) if times else {}
    return out


def stalled(port: int, records: int, calls: int) -> dict[str, Any]:
    """One-record Connect JSON latency while ``calls`` big gRPC Evaluates run one after another."""
    import threading

    from google.protobuf import json_format

    from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb

    big = json_format.ParseDict(big_body(records), pb.EvaluateRequest())
    done = threading.Event()
    big_times: list[float] = []

    def load() -> None:
        channel, call = grpc_call(port)
        try:
            for _ in range(calls):
                start = time.perf_counter()
                call(big, timeout=120)
                big_times.append(time.perf_counter() - start)
        finally:
            done.set()
            channel.close()

    conn = http.client.HTTPConnection("127.0.0.1", port)
    one = json.dumps(ONE).encode()
    thread = threading.Thread(target=load)
    thread.start()
    times = []
    while not done.is_set():
        start = time.perf_counter()
        conn.request("POST", EVALUATE, body=one, headers={"Content-Type": "application/json"})
        conn.getresponse().read()
        times.append(time.perf_counter() - start)
    thread.join()
    conn.close()
    out: dict[str, Any] = {"big_records": records, "big_calls": calls}
    out["big_call_s"] = percentiles(big_times) if big_times else {}
    out["one_record_ms"] = {**percentiles(times), "max": max(times) * 1000}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--serve", nargs=3, metavar=("PORT", "GRPC_PORT", "DIR"), help=argparse.SUPPRESS
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per latency series")
    parser.add_argument("--records", type=int, default=1000, help="records per throughput call")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of the load test")
    parser.add_argument("--big-records", type=int, default=5000, help="records per stalling call")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), int(args.serve[1]), Path(args.serve[2]))
        return 0
    OUT.mkdir(exist_ok=True)
    report: dict[str, Any] = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, grpc_port = start_server(Path(tmp))
        try:
            one = json.dumps(ONE).encode()
            print("one record, sequential calls...", file=sys.stderr)
            report["bare_route"] = http_latency(port, "/bare", b"{}", args.calls)
            report["connect_json"] = http_latency(port, EVALUATE, one, args.calls)
            report["rest"] = http_latency(port, "/v1alpha1/evaluate", one, args.calls)
            report["grpc"] = grpc_latency(port, args.calls)
            report["grpc_native"] = grpc_latency(grpc_port, args.calls)
            print(f"{args.records} records per call...", file=sys.stderr)
            report["throughput"] = throughput(port, grpc_port, args.records, args.repeats)
            print(f"{args.clients} clients for {args.duration:g} s...", file=sys.stderr)
            report["concurrent"] = asyncio.run(concurrent(port, args.clients, args.duration))
            print(f"one record beside {args.big_records}-record calls...", file=sys.stderr)
            report["beside_big_calls"] = stalled(port, args.big_records, 8)
        finally:
            proc.terminate()
            proc.wait(10)
    checks: list[tuple[str, bool, str]] = []
    for series in ("connect_json", "rest", "grpc", "grpc_native"):
        for q, limit in TARGETS_MS.items():
            value = report[series][q]
            checks.append((f"{series} {q} <= {limit:g} ms", value <= limit, f"{value:.2f} ms"))
    tp = report["throughput"]
    for side in ("grpc", "grpc_native", "connect_json"):
        ratio = tp[f"ratio_embedded_over_{side}"]
        checks.append((f"{side} 1k records/s within 2x of embedded", ratio <= 2, f"{ratio:.2f}x"))
    load = report["concurrent"]
    checks.append((f"{args.clients} clients: no errors", load["errors"] == 0, str(load["errors"])))
    report["checks"] = [{"check": c, "met": ok, "value": v} for c, ok, v in checks]
    (OUT / "api_overhead.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    for name, ok, value in checks:
        print(f"{'MET ' if ok else 'MISS'}  {name}: {value}", file=sys.stderr)
    return 1 if args.strict and not all(ok for _, ok, _ in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
