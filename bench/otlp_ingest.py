"""OTLP ingest: spans/s STORED by ``evalsi serve`` over OTLP HTTP/protobuf and gRPC, beside the
decode-only limit measured in the same run, and Arize Phoenix on the same stream.

    python bench/otlp_ingest.py                        # 400,000 spans, HTTP and gRPC, Phoenix
    python bench/otlp_ingest.py --quick                # 20,000 spans, no Phoenix: a smoke run
    python bench/otlp_ingest.py --no-server            # decode-only rows (and Phoenix) only
    python bench/otlp_ingest.py --freshness            # online freshness at 20 traces/s

The stream (``_otlp_stream``) is agent traces pre-encoded as ``ExportTraceServiceRequest``
bytes, 512 spans a request, replayed by ``_otlp_replay`` (the OTel Python SDK's own exporter
tops out near 4,600 spans/s here, too slow to load a server). Rows of the table:

- decode-only, in process: every request parsed with opentelemetry-proto and every span's
  fields and attributes read (``walk_request``): the least any receiver pays. Then evalsi's own
  decoder (``server.otlp._decode.decode_export``), and that plus the semantic-convention
  mappers (``traces._mappers.normalize_all``), when they exist;
- decode-only over the wire: the same replay into a sink that only decodes and walks (aiohttp
  for HTTP, grpcio for gRPC, each in its own process): the ceiling of sender plus transport;
- evalsi: ``evalsi serve`` in a subprocess with a fresh temporary data dir and evalsi.yaml per
  path; spans count as stored when they are rows of the ``spans`` table (read-only sqlite3):
  seconds run from the first send to the last row visible. Peak RSS is the server's VmHWM or
  the largest sampled RSS of its process tree, whichever is larger;
- Phoenix (``_phoenix``; ``--phoenix/--no-phoenix``): a smaller slice of the same stream (it
  stores ~100 spans/s), timed the same way against its own SQLite ``spans`` table; the ratio is
  evalsi's HTTP rate over Phoenix's HTTP rate. No ratio when it does not install or start.

``--serve-command "python my_serve.py"`` starts something else in place of ``evalsi serve``
(given ``--config FILE``); ``--server-config FILE`` merges YAML into the generated evalsi.yaml;
``--otlp-ports`` sends to ``traces.otlp.grpcPort``/``httpPort`` instead of the main port.
``--watch`` applies the freshness policy (``--policy FILE``, or the built-in one) before the
stream, so every completed trace is also handed to the policies and graded while the spans are
stored (the Watch path); the row then also counts the traces graded by the end.

``--freshness``: traces built on the fly (root span ending "now") at ``--rate`` traces/s for
``--duration`` s under a policy of non-judge evaluators (``--policy FILE``, or a built-in
one), applied through ``POST /v1alpha1/policies``; latency runs from the root span's end to the
first poll (every 50 ms) that sees the trace's score in the store, and includes the assembly
grace period (``--grace``, stated in the output).

Targets (issue 5): >= 20,000 spans/s stored on this 2-core machine; peak RSS < 1 GB; >= 100x
Phoenix; freshness p95 < 5 s. Results go to ``bench/out/otlp_ingest.json`` (``--json``);
``--strict`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from _otlp_replay import (
    GrpcSender,
    HttpSender,
    RssWatch,
    SendResult,
    free_port,
    send,
    stop_process,
    wait_listening,
    wait_rows,
)
from _otlp_replay import self_check as replay_self_check
from _otlp_stream import (
    LiveTraces,
    Stream,
    StreamSpec,
    build_stream,
    to_otlp_json,
    walk_request,
)

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TARGET_SPANS_PER_S = 20_000.0
TARGET_RSS_MB = 1024.0
TARGET_PHOENIX_RATIO = 100.0
TARGET_FRESHNESS_P95_S = 5.0
START_TIMEOUT_S = 60.0
POLL_S = 0.05  # freshness: how often the store is read for new scores
MAX_BODY_BYTES = 64 << 20
FRESHNESS_POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata:
  name: bench-freshness
  labels: {evals.si/project: default}
spec:
  selector: 'resource["service.name"] == "support-agent"'
  sampling: {rate: 1.0}
  cascade:                     # non-judge evaluators only
    - {ref: loop-detection}
    - {ref: step-efficiency}
    - {ref: tokens}
    - {ref: latency}
"""


class ServerUnavailable(Exception):
    """``evalsi serve`` (or a part of it this bench needs) is not there; the message says why."""


# -- decode only ----------------------------------------------------------------------------------
def _timed(stream: Stream, fn: Callable[[bytes], int]) -> dict[str, Any]:
    started = time.perf_counter()
    spans = sum(fn(body) for body in stream.requests)
    seconds = time.perf_counter() - started
    return {"spans": spans, "seconds": round(seconds, 3), "spans_per_s": round(spans / seconds, 1)}


def decode_with(decoder: Any, body: bytes, content_type: str) -> list[Any]:
    """evalsi's ``decode_export`` on one body: the spans it keeps."""
    decoded = decoder.decode_export(
        body, content_type=content_type, content_encoding=None, max_bytes=MAX_BODY_BYTES
    )
    return list(decoded.spans)


def decode_inprocess(stream: Stream) -> dict[str, dict[str, Any]]:
    """The in-process rows: opentelemetry-proto walk; evalsi's decoder (+ mappers) if present."""
    rows = {"decode-only (walk)": _timed(stream, walk_request)}
    try:
        decoder = importlib.import_module("evalsi.server.otlp._decode")
    except ImportError as e:
        print(f"evalsi's OTLP decoder is not there yet ({e}); row skipped", file=sys.stderr)
        return rows

    def ours(body: bytes) -> int:
        return len(decode_with(decoder, body, "application/x-protobuf"))

    rows["decode (evalsi)"] = _timed(stream, ours)
    try:
        mappers = importlib.import_module("evalsi.traces._mappers")
    except ImportError:
        return rows
    normalize_all = mappers.normalize_all

    def ours_normalised(body: bytes) -> int:
        spans = decode_with(decoder, body, "application/x-protobuf")
        normalize_all(spans)
        return len(spans)

    rows["decode + normalise (evalsi)"] = _timed(stream, ours_normalised)
    return rows


def decode_over_wire(stream: Stream, protocol: str, concurrency: int) -> dict[str, Any]:
    """The replay into a decode-and-walk sink in its own process (``_otlp_replay --sink``)."""
    port = free_port()
    sink = subprocess.Popen(
        [sys.executable, str(HERE / "_otlp_replay.py"), "--sink", protocol, str(port)],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_listening([port], sink, 30)
        endpoint = (
            f"http://127.0.0.1:{port}/v1/traces" if protocol == "http" else f"127.0.0.1:{port}"
        )
        sent = send(
            protocol, endpoint, stream.requests, stream.span_counts, concurrency=concurrency
        )
    finally:
        stop_process(sink)
    return {**sent.as_dict(), "spans_per_s": round(sent.spans_per_s, 1)}


def self_check(stream: Stream) -> dict[str, Any]:
    """``--quick`` only: the stream is deterministic, its OTLP/JSON form decodes to the same
    spans, and the sender retries throttled requests without losing or doubling any."""
    first = stream.requests[:4]
    again = build_stream(StreamSpec(spans=sum(stream.span_counts[:4]))).requests
    if again != first:
        raise RuntimeError("self-check: two builds of the same stream spec differ")
    out: dict[str, Any] = {"deterministic": True}
    try:
        decoder = importlib.import_module("evalsi.server.otlp._decode")
    except ImportError:
        out["otlp_json"] = "not checked: evalsi.server.otlp._decode is not there"
    else:
        for body, n in zip(first, stream.span_counts, strict=False):
            spans = decode_with(decoder, to_otlp_json(body), "application/json")
            binary = decode_with(decoder, body, "application/x-protobuf")
            if len(spans) != n or spans != binary:
                raise RuntimeError("self-check: the OTLP/JSON form decodes to other spans")
        out["otlp_json"] = "same spans as protobuf"
    out["replay_retries"] = asyncio.run(replay_self_check(first, stream.span_counts[:4]))
    print("self-check passed", file=sys.stderr)
    return out


# -- evalsi serve ---------------------------------------------------------------------------------
def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _evalsi_command() -> list[str]:
    script = Path(sys.executable).parent / "evalsi"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from evalsi.cli import main; sys.exit(main())"]


class EvalsiServer:
    """``evalsi serve --config`` on loopback with a fresh data dir, as a context manager.

    ``otlp_ports``: also listen on ``traces.otlp.grpcPort``/``httpPort`` (the collector ports),
    and send there instead of the main port.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        otlp_ports: bool = False,
        grace_s: float | None = None,
        packs: tuple[str, ...] = ("core",),
        extra: dict[str, Any] | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.command = command or [*_evalsi_command(), "serve"]
        self.port = free_port()
        self.otlp_grpc = free_port() if otlp_ports else None
        self.otlp_http = free_port() if otlp_ports else None
        data = workdir / ".evalsi"
        traces: dict[str, Any] = {}
        if otlp_ports:
            traces["otlp"] = {"grpcPort": self.otlp_grpc, "httpPort": self.otlp_http}
        if grace_s is not None:
            traces["gracePeriod"] = f"{int(grace_s * 1000)}ms"
        config: dict[str, Any] = {
            "server": {"host": "127.0.0.1", "port": self.port, "maxBodyBytes": MAX_BODY_BYTES},
            "storage": {"sqlite": {"path": str(data / "evalsi.db")}},
            "dataDir": str(data),
            "evaluators": {"packs": list(packs)},
        }
        if traces:
            config["traces"] = traces
        self.config = _merge(config, extra or {})
        self.db = Path(self.config["storage"]["sqlite"]["path"])
        self.log = workdir / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.sent_at = 0.0  # when the stream's first request went (--watch)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.otlp_http or self.port}/v1/traces"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.otlp_grpc or self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _tail(self, lines: int = 12) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join("    " + line for line in text[-lines:])

    def __enter__(self) -> EvalsiServer:
        if (
            self.command[-1] == "serve"
            and importlib.util.find_spec("evalsi.server.otlp._receivers") is None
        ):
            raise ServerUnavailable(
                "the OTLP receiver (evalsi.server.otlp._receivers) is not in this checkout yet"
            )
        cfg = self.workdir / "evalsi.yaml"
        cfg.write_text(yaml.safe_dump(self.config, sort_keys=False))
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [*self.command, "--config", str(cfg)],
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        ports = [p for p in (self.port, self.otlp_grpc, self.otlp_http) if p]
        try:
            wait_listening(ports, self.proc, START_TIMEOUT_S)
            self._probe()
        except (RuntimeError, ServerUnavailable) as e:
            self.__exit__()
            raise ServerUnavailable(f"evalsi serve: {e}\n  its log ends:\n{self._tail()}") from e
        return self

    def _probe(self) -> None:
        """An empty export must be answered 200: fails clearly while the route is not wired."""
        request = urllib.request.Request(
            self.http_url,
            data=b"",
            headers={"Content-Type": "application/x-protobuf"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10):
                return
        except urllib.error.HTTPError as e:
            raise ServerUnavailable(
                f"POST {self.http_url} answered HTTP {e.code}: the OTLP route is not wired into "
                "the server yet (or refuses an empty export)"
            ) from e
        except OSError as e:
            raise ServerUnavailable(f"POST {self.http_url} failed: {e}") from e

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


def measure_evalsi(
    stream: Stream, protocol: str, args: argparse.Namespace, extra: dict[str, Any]
) -> dict[str, Any]:
    """One path: a fresh server and store, the whole stream, timed until every row is in."""
    packs = ("core", "agent") if args.watch else ("core",)
    with (
        tempfile.TemporaryDirectory(prefix="otlp-ingest-") as tmp,
        EvalsiServer(
            Path(tmp),
            otlp_ports=args.otlp_ports,
            packs=packs,
            extra=extra,
            command=args.serve_command,
        ) as server,
    ):
        policy = None
        if args.watch:
            text = Path(args.policy).read_text() if args.policy else FRESHNESS_POLICY
            policy = str(yaml.safe_load(text)["metadata"]["name"])
            _post_json(f"http://127.0.0.1:{server.port}/v1alpha1/policies", {"yaml": text})
        endpoint = server.http_url if protocol == "http" else server.grpc_target
        with RssWatch(server.pid) as rss:
            server.sent_at = time.monotonic()
            sent = send(
                protocol,
                endpoint,
                stream.requests,
                stream.span_counts,
                concurrency=args.concurrency,
            )
            # Wait for what was acknowledged: a refused request would otherwise cost the timeout.
            rows, seen = wait_rows(
                server.db,
                "spans",
                sent.spans,
                timeout_s=args.store_timeout,
                alive=server.proc,
            )
            graded = _wait_graded(server, policy, stream.traces, args.store_timeout)
        seconds = max(seen - sent.started, 1e-9)
        out = {
            "endpoint": endpoint,
            "spans": rows,
            "seconds": round(seconds, 3),
            "spans_per_s": round(rows / seconds, 1),
            "complete": rows >= stream.spans,
            "acked_seconds": round(sent.seconds, 3),
            "peak_rss_mb": round(rss.peak_mb, 1),
            "vm_hwm_mb": round(rss.hwm_kb / 1024, 1),
            "tree_rss_peak_mb": round(rss.tree_peak_kb / 1024, 1),
            "send": sent.as_dict(),
        }
        if policy is not None:
            out["policy"] = policy
            out.update(graded)
        if server.proc is not None and server.proc.poll() is not None:
            out["error"] = f"the server exited with code {server.proc.returncode}"
        return out


def _metrics(server: EvalsiServer) -> dict[str, float]:
    """The server's Prometheus counters and gauges, by name (labels summed)."""
    url = f"http://127.0.0.1:{server.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[-1])
    return out


def _wait_graded(
    server: EvalsiServer, policy: str | None, traces: int, timeout_s: float
) -> dict[str, float]:
    """``--watch``: waits until every trace (they complete a grace period after their root
    span) was graded or not graded for lack of room; the counts, from ``/metrics``."""
    if policy is None:
        return {}
    give_up = time.monotonic() + timeout_s
    while True:
        m = _metrics(server)
        graded = m.get("evalsi_policy_evaluated_total", 0)
        done = graded + m.get("evalsi_policy_overloaded_total", 0)
        # the stream's last trace may stay open (cut short: an orphan) until orphan_s
        settled = m.get("evalsi_ingest_open_traces", 0) <= 1
        completed = m.get("evalsi_ingest_traces_total", traces)
        over = time.monotonic() > give_up or (server.proc and server.proc.poll() is not None)
        if (settled and done >= completed) or over:
            return {
                "traces_graded": graded,
                "traces_not_graded": m.get("evalsi_policy_overloaded_total", 0),
                "from_memory": m.get("evalsi_ingest_from_memory_total", 0),
                "read_back": m.get("evalsi_ingest_read_back_total", 0),
                "graded_seconds": round(time.monotonic() - server.sent_at, 3),
            }
        time.sleep(0.2)


# -- freshness -----------------------------------------------------------------------------------
def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            parsed: dict[str, Any] = json.loads(answer.read() or b"{}")
            return parsed
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace")[:400]
        raise ServerUnavailable(f"POST {url} answered HTTP {e.code}: {detail}") from e


OUTCOMES = {1: "scored", 2: "skipped", 3: "error", 4: "cancelled"}
_POLICY_RESULTS = "FROM results r JOIN runs u ON r.run = u.pk WHERE u.kind = 'watch' AND u.name = ?"


def _query(db: Path, sql: str, params: tuple[Any, ...]) -> list[Any]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError:  # the tables are not there yet
        return []
    finally:
        conn.close()


def scored_traces(db: Path, policy: str) -> set[str]:
    """Trace ids with at least one stored result under the policy's ``watch`` runs."""
    return {
        row[0] for row in _query(db, f"SELECT DISTINCT r.record_id {_POLICY_RESULTS}", (policy,))
    }


def outcomes(db: Path, policy: str) -> dict[str, int]:
    """Stored results of the policy by outcome: a score that is an ERROR is no score."""
    rows = _query(db, f"SELECT r.outcome, count(*) {_POLICY_RESULTS} GROUP BY r.outcome", (policy,))
    return {OUTCOMES.get(code, str(code)): n for code, n in rows}


async def _freshness_run(
    server: EvalsiServer, policy: str, protocol: str, rate: float, duration: float, tail: float
) -> dict[str, Any]:
    live = LiveTraces()
    ended: dict[str, int] = {}
    latency: dict[str, float] = {}
    result = SendResult(protocol)
    sender = HttpSender(server.http_url) if protocol == "http" else GrpcSender(server.grpc_target)
    sending = True

    async def poll() -> None:
        while sending or (len(latency) < len(ended) and time.monotonic() < give_up):
            seen = await asyncio.to_thread(scored_traces, server.db, policy)
            now = time.time_ns()
            for trace_id in seen:
                if trace_id in ended and trace_id not in latency:
                    latency[trace_id] = (now - ended[trace_id]) / 1e9
            await asyncio.sleep(POLL_S)

    async def export_one() -> None:
        trace = live.next()
        ended[trace.trace_id] = trace.root_end_ns
        result.requests += 1
        if await sender.export(trace.body, trace.spans, result):
            result.spans += trace.spans
        else:
            result.failed_requests += 1

    give_up = float("inf")
    async with sender, asyncio.TaskGroup() as tg:
        poller = tg.create_task(poll())
        result.started = start = time.monotonic()
        n = int(rate * duration)
        for i in range(n):
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            tg.create_task(export_one())
        result.finished = time.monotonic()
        give_up = time.monotonic() + tail
        sending = False
        await poller
    values = sorted(latency.values())
    stored = await asyncio.to_thread(outcomes, server.db, policy)

    def q(p: float) -> float | None:
        return round(values[min(len(values) - 1, int(p * len(values)))], 3) if values else None

    return {
        "traces_sent": len(ended),
        "traces_scored": len(values),
        "p50_s": q(0.50),
        "p95_s": q(0.95),
        "p99_s": q(0.99),
        "max_s": round(values[-1], 3) if values else None,
        "results_by_outcome": stored,
        "send": result.as_dict(),
    }


def measure_freshness(args: argparse.Namespace, extra: dict[str, Any]) -> dict[str, Any]:
    text = Path(args.policy).read_text() if args.policy else FRESHNESS_POLICY
    name = str(yaml.safe_load(text)["metadata"]["name"])
    with tempfile.TemporaryDirectory(prefix="otlp-fresh-") as tmp:
        packs = ("core", "agent")
        with EvalsiServer(
            Path(tmp), grace_s=args.grace, packs=packs, extra=extra, command=args.serve_command
        ) as server:
            try:
                _post_json(f"http://127.0.0.1:{server.port}/v1alpha1/policies", {"yaml": text})
            except ServerUnavailable as e:
                raise ServerUnavailable(
                    f"cannot apply the policy (is PolicyService wired?): {e}"
                ) from e
            with RssWatch(server.pid) as rss:
                out = asyncio.run(
                    _freshness_run(
                        server,
                        name,
                        args.freshness_protocol,
                        args.rate,
                        args.duration,
                        tail=args.grace + 30,
                    )
                )
    return {
        "policy": name,
        "grace_s": args.grace,
        "rate_per_s": args.rate,
        "duration_s": args.duration,
        "poll_s": POLL_S,
        "peak_rss_mb": round(rss.peak_mb, 1),
        **out,
    }


# -- report --------------------------------------------------------------------------------------
def _fmt(value: Any, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def print_table(report: dict[str, Any]) -> None:
    decode = report["decode_only"]
    wire = report.get("decode_over_wire", {})
    walk = decode.get("decode-only (walk)", {}).get("spans_per_s")
    header = (
        f"{'path':<30} {'spans':>9} {'seconds':>8} {'spans/s':>9} {'/target':>8} "
        f"{'/decode':>8} {'RSS MB':>7}  notes"
    )
    if decode or report.get("evalsi") or report.get("phoenix"):
        print(header, file=sys.stderr)
        print("-" * len(header), file=sys.stderr)

    def row(name: str, r: dict[str, Any], limit: float | None, notes: str = "") -> None:
        rate = r.get("spans_per_s")
        vs_decode = f"{rate / limit:.3f}" if rate and limit else "-"
        print(
            f"{name:<30} {_fmt(r.get('spans')):>9} {_fmt(r.get('seconds'), '.2f'):>8} "
            f"{_fmt(rate):>9} {_fmt(rate / TARGET_SPANS_PER_S if rate else None, '.2f'):>8} "
            f"{vs_decode:>8} {_fmt(r.get('peak_rss_mb'), '.0f'):>7}  {notes}",
            file=sys.stderr,
        )

    for name, r in decode.items():
        row(name, r, walk)
    for protocol, r in wire.items():
        row(f"decode-only sink ({protocol})", r, walk, "sender + transport ceiling")
    for protocol, r in report.get("evalsi", {}).items():
        if "skipped" in r:
            print(f"{'evalsi ' + protocol:<30} skipped: {r['skipped']}", file=sys.stderr)
            continue
        send = r["send"]
        notes = f"retries {send['retries']}, failed {send['failed_requests']}"
        if "traces_graded" in r:
            notes += (
                f", traces graded {r['traces_graded']:,.0f} (not {r['traces_not_graded']:,.0f})"
                f" by {r['graded_seconds']:.0f} s"
            )
        if not r["complete"]:
            notes += " INCOMPLETE"
        row(f"evalsi ({protocol})", r, wire.get(protocol, {}).get("spans_per_s"), notes)
    phoenix = report.get("phoenix")
    if phoenix:
        if phoenix.get("ok"):
            notes = (
                f"v{phoenix['version']}, ratio evalsi/phoenix {_fmt(phoenix.get('ratio'), '.0f')}"
            )
            row(
                f"phoenix ({phoenix['protocol']})",
                {**phoenix, "spans": phoenix["spans_stored"]},
                None,
                notes,
            )
        else:
            print(f"{'phoenix':<30} not measured: {phoenix.get('reason')}", file=sys.stderr)
    fresh = report.get("freshness")
    if fresh and "skipped" not in fresh:
        print(
            f"freshness: {fresh['traces_scored']}/{fresh['traces_sent']} traces scored, "
            f"p50 {fresh['p50_s']} s, p95 {fresh['p95_s']} s, p99 {fresh['p99_s']} s "
            f"(grace period {fresh['grace_s']:g} s included; polled every {fresh['poll_s']} s)",
            file=sys.stderr,
        )
    elif fresh:
        print(f"freshness skipped: {fresh['skipped']}", file=sys.stderr)


def checks(report: dict[str, Any]) -> list[tuple[str, bool, str]]:
    out: list[tuple[str, bool, str]] = []
    for protocol, r in report.get("evalsi", {}).items():
        if "skipped" in r:
            out.append((f"evalsi {protocol} measured", False, r["skipped"].splitlines()[0]))
            continue
        rate = r["spans_per_s"]
        out.append(
            (
                f"evalsi {protocol} >= 20,000 spans/s stored",
                rate >= TARGET_SPANS_PER_S,
                f"{rate:,.0f}",
            )
        )
        out.append((f"evalsi {protocol} all spans stored", r["complete"], f"{r['spans']:,}"))
        out.append(
            (
                f"evalsi {protocol} peak RSS < 1 GB",
                r["peak_rss_mb"] < TARGET_RSS_MB,
                f"{r['peak_rss_mb']:.0f} MB",
            )
        )
    phoenix = report.get("phoenix")
    if phoenix and phoenix.get("ratio") is not None:
        ratio = phoenix["ratio"]
        out.append(
            ("evalsi >= 100x Phoenix (HTTP)", ratio >= TARGET_PHOENIX_RATIO, f"{ratio:.0f}x")
        )
    fresh = report.get("freshness")
    if fresh and "skipped" in fresh:
        out.append(("freshness measured", False, fresh["skipped"].splitlines()[0]))
    elif fresh:
        p95 = fresh["p95_s"]
        scored = f"{fresh['traces_scored']}/{fresh['traces_sent']}"
        met = p95 is not None and p95 < TARGET_FRESHNESS_P95_S
        out.append((f"freshness p95 < 5 s (grace {fresh['grace_s']:g} s)", met, f"{p95} s"))
        every = fresh["traces_scored"] == fresh["traces_sent"]
        out.append(("freshness: every trace scored", every, scored))
        errors = fresh["results_by_outcome"].get("error", 0)
        out.append(("freshness: no ERROR results", errors == 0, str(fresh["results_by_outcome"])))
    return out


# -- main ----------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 spans, no Phoenix")
    parser.add_argument("--spans", type=int, help="spans in the stream (default 400,000)")
    parser.add_argument("--spans-per-request", type=int, default=512)
    parser.add_argument("--protocols", default="http,grpc", help="evalsi paths (http,grpc)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--otlp-ports", action="store_true", help="send to traces.otlp ports")
    parser.add_argument("--no-server", action="store_true", help="skip the evalsi paths")
    parser.add_argument("--server-config", help="YAML merged into the generated evalsi.yaml")
    parser.add_argument(
        "--serve-command",
        type=str.split,
        help='what starts the server, given "--config FILE" (default: "evalsi serve")',
    )
    parser.add_argument("--store-timeout", type=float, default=300.0, help="s to wait for rows")
    parser.add_argument("--phoenix", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--phoenix-spans", type=int, default=3000, help="Phoenix's slice")
    parser.add_argument("--phoenix-timeout", type=float, default=600.0)
    parser.add_argument("--freshness", action="store_true", help="only the freshness run")
    parser.add_argument("--watch", action="store_true", help="stored with a policy applied")
    parser.add_argument("--policy", help="OnlineEvalPolicy YAML (default: a built-in one)")
    parser.add_argument("--rate", type=float, default=20.0, help="freshness traces/s")
    parser.add_argument("--duration", type=float, help="freshness seconds (default 60)")
    parser.add_argument("--grace", type=float, default=2.0, help="traces.gracePeriod, s")
    parser.add_argument("--freshness-protocol", choices=("http", "grpc"), default="http")
    parser.add_argument("--json", type=Path, default=OUT / "otlp_ingest.json")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    spans = args.spans or (20_000 if args.quick else 400_000)
    phoenix = args.phoenix if args.phoenix is not None else not args.quick
    args.duration = args.duration or (10.0 if args.quick else 60.0)
    extra = yaml.safe_load(Path(args.server_config).read_text()) if args.server_config else {}
    report: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "targets": {
            "spans_per_s": TARGET_SPANS_PER_S,
            "peak_rss_mb": TARGET_RSS_MB,
            "phoenix_ratio": TARGET_PHOENIX_RATIO,
            "freshness_p95_s": TARGET_FRESHNESS_P95_S,
        },
    }

    if args.freshness:
        try:
            report["freshness"] = measure_freshness(args, extra)
        except ServerUnavailable as e:
            report["freshness"] = {"skipped": str(e)}
        return finish(report, args)

    spec = StreamSpec(spans=spans, spans_per_request=args.spans_per_request)
    print(f"building {spans:,} spans...", file=sys.stderr)
    stream = build_stream(spec)
    report["stream"] = {
        "spans": stream.spans,
        "requests": len(stream.requests),
        "traces": stream.traces,
        "bytes": stream.nbytes,
        "bytes_per_span": round(stream.nbytes / stream.spans, 1),
        "build_seconds": round(stream.build_seconds, 2),
    }
    if args.quick:
        report["self_check"] = self_check(stream)
    print("decode only, in process...", file=sys.stderr)
    report["decode_only"] = decode_inprocess(stream)
    protocols = [p for p in args.protocols.split(",") if p]
    report["decode_over_wire"] = {}
    for protocol in protocols:
        print(f"decode-only sink over {protocol}...", file=sys.stderr)
        report["decode_over_wire"][protocol] = decode_over_wire(stream, protocol, args.concurrency)
    if not args.no_server:
        report["evalsi"] = {}
        for protocol in protocols:
            print(f"evalsi serve over {protocol}...", file=sys.stderr)
            try:
                measured = measure_evalsi(stream, protocol, args, extra)
            except ServerUnavailable as e:
                report["evalsi"][protocol] = {"skipped": str(e)}
                continue
            rate = measured["spans_per_s"]
            wire = report["decode_over_wire"][protocol]["spans_per_s"]
            walk = report["decode_only"]["decode-only (walk)"]["spans_per_s"]
            measured["ratio_to_target"] = round(rate / TARGET_SPANS_PER_S, 3)
            measured["ratio_to_decode_only_sink"] = round(rate / wire, 3)
            measured["ratio_to_decode_only_walk"] = round(rate / walk, 3)
            report["evalsi"][protocol] = measured
    if phoenix:
        from _phoenix import run_phoenix

        print(f"Phoenix on {args.phoenix_spans:,} spans...", file=sys.stderr)
        pspec = StreamSpec(spans=args.phoenix_spans, spans_per_request=args.spans_per_request)
        small = build_stream(pspec)  # the same seed: a prefix of the same stream
        result = run_phoenix(small.requests, small.span_counts, timeout_s=args.phoenix_timeout)
        report["phoenix"] = result.as_dict()
        ours = report.get("evalsi", {}).get("http", {}).get("spans_per_s")
        if result.ok and result.complete and ours:
            report["phoenix"]["ratio"] = round(ours / result.spans_per_s, 1)
    return finish(report, args)


def finish(report: dict[str, Any], args: argparse.Namespace) -> int:
    found = checks(report)
    report["checks"] = [{"check": c, "met": ok, "value": v} for c, ok, v in found]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    if "decode_only" in report:
        print_table(report)
    elif "freshness" in report:
        print_table({"decode_only": {}, "freshness": report["freshness"]})
    for name, ok, value in found:
        print(f"{'MET ' if ok else 'MISS'}  {name}: {value}", file=sys.stderr)
    return 1 if args.strict and not all(ok for _, ok, _ in found) else 0


if __name__ == "__main__":
    sys.exit(main())
