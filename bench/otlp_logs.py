"""Span events sent as OTLP log records: events/s STORED by ``evalsi serve`` over
``POST /v1/logs``, beside the spans/s of the same traces in the same run, and whether every
trace got its content from its events.

    python bench/otlp_logs.py                  # 25,000 agent turns: 100,000 spans and events
    python bench/otlp_logs.py --quick          # 2,500 turns: a smoke run

Each agent turn is a trace of four spans (an agent root, two chat calls, a tool call) whose
spans carry no content; each chat call's messages come as two log-based events
(``gen_ai.user.message``, ``gen_ai.choice``, ~300 characters each), as OpenTelemetry's
openai-v2 instrumentation sends them. The logs are sent first (the SDK flushes logs every
second and spans every five, so they usually arrive first), then the spans; both pre-encoded,
512 records a request, 8 in flight (``_otlp_replay``). Seconds run from the first send to the
last row visible in ``span_events`` (resp. ``spans``). At the end every trace row must carry the
answer its events gave (``output_preview``): the join is measured, not assumed.

Target: log events stored at >= 0.5x the spans/s of the same run. Span requests are decoded and
stored by the ingest workers on every core; log requests are handled in the server's process,
so this ratio says whether a GenAI app's message events keep up with its spans (a chat call is
one span and two or three events; an agent turn has several spans per chat call).
Results go to ``bench/out/otlp_logs.json``; ``--strict`` exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _otlp_replay import send, wait_rows
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from otlp_ingest import EvalsiServer, ServerUnavailable

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TARGET_RATIO = 0.5
PER_REQUEST = 512


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _text(rng: random.Random, n: int) -> str:
    words = ["order", "ship", "refund", "Norway", "shoes", "price", "help", "centre", "item"]
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < n:
        out.append(rng.choice(words))
    return " ".join(out)


def build(turns: int, seed: int = 7) -> tuple[list[bytes], list[int], list[bytes], list[int]]:
    """(span request bodies, their span counts, log request bodies, their record counts)."""
    rng = random.Random(seed)
    spans: list[Any] = []
    logs: list[Any] = []
    t0 = time.time_ns() - 3_600_000_000_000
    for i in range(turns):
        trace_id, root = rng.randbytes(16), rng.randbytes(8)
        start = t0 + i * 1_000_000
        names = ["invoke_agent shop", "chat gpt-4o-mini", "execute_tool lookup", "chat gpt-4o-mini"]
        for j, name in enumerate(names):
            span_id = root if j == 0 else rng.randbytes(8)
            attrs = {"gen_ai.operation.name": name.split()[0]}
            if name.startswith("chat"):
                attrs["gen_ai.request.model"] = "gpt-4o-mini"
                question, answer = _text(rng, 300), f"answer {i}-{j}: " + _text(rng, 280)
                for event, body in (
                    ("gen_ai.user.message", {"content": question}),
                    (
                        "gen_ai.choice",
                        {"index": "0", "finish_reason": "stop", "message": answer},
                    ),
                ):
                    logs.append((trace_id, span_id, event, start + j * 1000, body))
            elif name.startswith("execute_tool"):
                attrs["gen_ai.tool.name"] = "lookup"
            spans.append((trace_id, span_id, b"" if j == 0 else root, name, start, j, attrs))
    span_bodies, span_counts = _span_requests(spans)
    log_bodies, log_counts = _log_requests(logs)
    return span_bodies, span_counts, log_bodies, log_counts


def _span_requests(spans: list[Any]) -> tuple[list[bytes], list[int]]:
    bodies, counts = [], []
    for at in range(0, len(spans), PER_REQUEST):
        request = ExportTraceServiceRequest()
        resource = request.resource_spans.add()
        resource.resource.attributes.append(_kv("service.name", "shop-agent"))
        scope = resource.scope_spans.add()
        chunk = spans[at : at + PER_REQUEST]
        for trace_id, span_id, parent, name, start, j, attrs in chunk:
            span = scope.spans.add(trace_id=trace_id, span_id=span_id, parent_span_id=parent)
            span.name = name
            span.start_time_unix_nano = start + j * 1000
            span.end_time_unix_nano = start + (10_000 if j == 0 else j * 1000 + 900)
            span.attributes.extend(_kv(k, v) for k, v in attrs.items())
        bodies.append(request.SerializeToString())
        counts.append(len(chunk))
    return bodies, counts


def _log_requests(logs: list[Any]) -> tuple[list[bytes], list[int]]:
    bodies, counts = [], []
    for at in range(0, len(logs), PER_REQUEST):
        request = ExportLogsServiceRequest()
        scope = request.resource_logs.add().scope_logs.add()
        chunk = logs[at : at + PER_REQUEST]
        for trace_id, span_id, event, when, body in chunk:
            record = scope.log_records.add(
                trace_id=trace_id, span_id=span_id, event_name=event, time_unix_nano=when
            )
            record.attributes.append(_kv("gen_ai.system", "openai"))
            record.body.kvlist_value.values.extend(_kv(k, v) for k, v in body.items())
        bodies.append(request.SerializeToString())
        counts.append(len(chunk))
    return bodies, counts


def _count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def measure(turns: int, timeout_s: float) -> dict[str, Any]:
    span_bodies, span_counts, log_bodies, log_counts = build(turns)
    n_spans, n_events = sum(span_counts), sum(log_counts)
    with (
        tempfile.TemporaryDirectory(prefix="otlp-logs-") as tmp,
        EvalsiServer(Path(tmp), grace_s=1.0) as server,
    ):
        base = f"http://127.0.0.1:{server.port}"
        logs = send("http", f"{base}/v1/logs", log_bodies, log_counts)
        events, seen = wait_rows(server.db, "span_events", logs.spans, timeout_s=timeout_s)
        events_s = max(seen - logs.started, 1e-9)
        spans = send("http", f"{base}/v1/traces", span_bodies, span_counts)
        stored, seen = wait_rows(server.db, "spans", spans.spans, timeout_s=timeout_s)
        spans_s = max(seen - spans.started, 1e-9)
        # every trace completes (grace 1 s) and its row is rebuilt with the events' content
        deadline = time.monotonic() + timeout_s
        joined = 0
        while time.monotonic() < deadline:
            joined = _count(server.db, "SELECT count(*) FROM traces WHERE output_preview != ''")
            if joined >= turns:
                break
            time.sleep(0.2)
        traces = _count(server.db, "SELECT count(*) FROM traces")
    return {
        "turns": turns,
        "events": {
            "sent": n_events,
            "stored": events,
            "seconds": round(events_s, 3),
            "per_s": round(events / events_s, 1),
            "rejected": logs.rejected_spans,
            "failed_requests": logs.failed_requests,
        },
        "spans": {
            "sent": n_spans,
            "stored": stored,
            "seconds": round(spans_s, 3),
            "per_s": round(stored / spans_s, 1),
            "failed_requests": spans.failed_requests,
        },
        "traces": traces,
        "traces_with_content": joined,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=25_000, help="agent turns (traces)")
    parser.add_argument("--quick", action="store_true", help="2,500 turns: a smoke run")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for rows")
    parser.add_argument("--json", type=Path, default=OUT / "otlp_logs.json")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    turns = 2_500 if args.quick else args.turns
    try:
        report = measure(turns, args.timeout)
    except ServerUnavailable as e:
        print(f"SKIPPED: {e}", file=sys.stderr)
        return 0
    events, spans = report["events"], report["spans"]
    ratio = events["per_s"] / max(spans["per_s"], 1e-9)
    report["ratio_events_to_spans"] = round(ratio, 3)
    complete = events["stored"] == events["sent"] and spans["stored"] == spans["sent"]
    all_joined = report["traces_with_content"] == turns
    met = ratio >= TARGET_RATIO and complete and all_joined
    report["target_met"] = met
    print(f"{'path':<34} {'rows':>9} {'seconds':>8} {'rows/s':>10}")
    print(f"{'log events, POST /v1/logs':<34} {events['stored']:>9,} {events['seconds']:>8.2f} "
          f"{events['per_s']:>10,.0f}")  # fmt: skip
    print(f"{'spans, POST /v1/traces (workers)':<34} {spans['stored']:>9,} "
          f"{spans['seconds']:>8.2f} "
          f"{spans['per_s']:>10,.0f}")  # fmt: skip
    print(f"events/s over spans/s: {ratio:.2f} (target >= {TARGET_RATIO}); traces "
          f"{report['traces']:,}, with their events' content {report['traces_with_content']:,}"
          f" of {turns:,}")  # fmt: skip
    print("PASS" if met else "MISS")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
