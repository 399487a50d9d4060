"""The Watch way in, end to end, as a user runs it: `evalsi serve` in a subprocess, a policy
applied with `evalsi watch`, an app instrumented with the real OpenTelemetry SDK (OpenInference
and OTel GenAI attributes) exporting over OTLP/HTTP and OTLP/gRPC, the policy scoring every
trace, a webhook alert fired to a loopback receiver, leaking traces promoted into a dataset,
and that dataset graded by `evalsi eval`."""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from evalsi import Client
from tests.support.asgi_server import AsgiServer
from tests.support.server_state import free_port, serve_subprocess

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "watch"))
import shop_agent  # noqa: E402

CONFIG = """\
dataDir: data
evaluators: {packs: [core, safety, agent]}
traces:
  gracePeriod: 300ms
  otlp: {grpcPort: %d}
"""


def _webhook() -> tuple[Starlette, list[dict[str, Any]], threading.Event]:
    received: list[dict[str, Any]] = []
    fired = threading.Event()

    async def hook(request: Request) -> Response:
        received.append(json.loads(await request.body()))
        fired.set()
        return Response("ok")

    return Starlette(routes=[Route("/hooks/shop-oncall", hook, methods=["POST"])]), received, fired


def _until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_traces_are_scored_alerted_promoted_and_graded_offline(
    tmp_path: Path, run_evalsi: Callable[..., Any]
) -> None:
    port, grpc_port = free_port(), free_port()
    (tmp_path / "evalsi.yaml").write_text(CONFIG % grpc_port)
    url = f"http://127.0.0.1:{port}"
    app, received, fired = _webhook()
    with (
        AsgiServer(app) as hooks,
        serve_subprocess("--port", str(port), "--config", "evalsi.yaml", cwd=tmp_path) as server,
    ):
        server.wait_healthy(url)
        policy = (ROOT / "examples" / "watch" / "leaks.yaml").read_text()
        policy = policy.replace("http://127.0.0.1:9999", hooks.url)
        (tmp_path / "leaks.yaml").write_text(policy)
        applied = run_evalsi(
            tmp_path, "watch", "-f", "leaks.yaml", "--server", url, "--once", "--format", "json"
        )
        assert applied.returncode == 0, applied.stderr

        # 20 traces over OTLP/HTTP on the main port, 10 over OTLP/gRPC on the OTLP port
        ids = shop_agent.run(url, 20)
        ids += shop_agent.run(f"http://127.0.0.1:{grpc_port}", 10, protocol="grpc")
        with Client(url) as client:
            # a trace counts as evaluated before its promotion is written: wait for both
            _until(
                lambda: (
                    (s := client.policy_stats("shop-leaks")).evaluated >= 30 and s.promoted >= 6
                ),
                "30 traces scored and 6 promoted",
            )
            stats = client.policy_stats("shop-leaks")
            listed = client.list_traces(limit=100)
            shown = client.get_trace(ids[4])
            via_logs = client.get_trace(ids[9])  # its chat messages came as OTLP log events
            datasets = {d.name: d for d in client.list_datasets()}
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
        assert fired.wait(30), "the alert webhook was not called"
        server.stop()

    # every trace arrived whole, was assembled and scored
    assert {t.trace_id for t in listed} == set(ids)
    assert all(t.span_count == 3 and t.service == "shop-agent" for t in listed)
    assert (stats.selected, stats.evaluated, stats.errors) == (30, 30, 0)
    window = {m.metric: m for m in stats.window}
    pii = window["pii-leakage"]
    leaks = sum(1 for i in list(range(20)) + list(range(10)) if i % 5 == 4)  # 4 + 2
    assert pii.n == 30
    assert abs(pii.mean - (30 - leaks) / 30) < 1e-9
    # the cascade ran loop-detection only where pii-leakage passed
    assert window["loop-detection"].n == 30 - leaks
    # one trace in full: spans, and its record's content from the mixed conventions
    assert [s.name for s in shown.trace.ordered()] == [
        "shop-agent",
        "chat gpt-4o-mini",
        "execute_tool lookup_order",
    ]
    record = shown.summary.record
    assert record["output"].startswith("Your order ships to jane.doe4@example.com")
    # ingest counts on /metrics: every odd request sent its two messages as log events
    assert "evalsi_ingest_traces_total 30.0" in metrics
    assert "evalsi_ingest_spans_total 90.0" in metrics
    assert "evalsi_ingest_events_total 30.0" in metrics
    assert "evalsi_ingest_open_traces 0.0" in metrics
    # a chat call's messages sent as log-based events joined their span; the view has them
    chat = next(s for s in via_logs.trace.spans if s.name == "chat gpt-4o-mini")
    assert [e.name for e in chat.events] == ["gen_ai.user.message", "gen_ai.choice"]
    assert chat.view is not None
    assert "jane.doe9@example.com" in json.dumps(chat.view.output)
    # the user's thumbs down, sent as a span event, joined the trace (once)
    assert [(f.name, f.value, f.source) for f in shown.trace.feedback] == [
        ("thumbs", -1.0, "span_event")
    ]
    # the alert
    (alert,) = [a for a in received if a.get("alert") == "pii-leaks"][:1]
    assert alert["policy"] == "shop-leaks"
    # promotion: one row per leaking trace in the dataset, which evalsi eval grades offline
    assert stats.promoted == leaks
    promoted = tmp_path / "data" / "datasets" / datasets["shop-regressions"].path
    rows = [json.loads(line) for line in promoted.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(ids[i] for i in (4, 9, 14, 19, 24, 29))
    graded = run_evalsi(
        tmp_path, "eval", "--data", promoted, "--evaluators", "pii-leakage", "--format", "json"
    )
    assert graded.returncode == 0, graded.stderr
    (metric,) = [m for m in json.loads(graded.stdout)["metrics"] if m["metric"] == "pii-leakage"]
    assert (metric["n"], metric["mean"]) == (leaks, 0.0)
