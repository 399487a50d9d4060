"""Scores out to OpenTelemetry: a real server configured with ``traces.export.otlp`` grades
traces received from the OTel SDK, and each SCORED result arrives at a loopback OTLP logs
receiver as a ``gen_ai.evaluation.result`` event parented to the graded trace's root span. A
collector refusing the events costs nothing but the counted failures."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import evalsi
from evalsi.server._state import ScoreExportConfig, ServerState, TracesConfig
from evalsi.server._watch import Watch
from evalsi.sinks import EVENT_NAME, OtelScoreExporter
from tests.support.asgi_server import AsgiServer
from tests.support.policy_traces import SUPPORT, agent_turn, wait_for
from tests.support.server_state import server_state, serving


class Collector:
    """An OTLP/HTTP logs endpoint on loopback keeping every log record it is sent; answers
    ``status`` (400: the exporter gives up on the batch at once)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.records: list[Any] = []
        self.requests = 0
        self._changed = threading.Condition()

    async def logs(self, request: Request) -> Response:
        body = logs_service_pb2.ExportLogsServiceRequest()
        body.ParseFromString(await request.body())
        with self._changed:
            self.requests += 1
            if self.status == 200:
                self.records.extend(
                    r for rl in body.resource_logs for sl in rl.scope_logs for r in sl.log_records
                )
            self._changed.notify_all()
        reply = logs_service_pb2.ExportLogsServiceResponse().SerializeToString()
        return Response(reply, status_code=self.status, media_type="application/x-protobuf")

    def wait(self, what: str, holds: Any, timeout: float = 30.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: holds(self), timeout):
                pytest.fail(f"timed out waiting for {what}")

    @contextmanager
    def serving(self) -> Iterator[AsgiServer]:
        app = Starlette(routes=[Route("/v1/logs", self.logs, methods=["POST"])])
        with AsgiServer(app) as server:
            yield server


def exporting_state(tmp: Path, collector_url: str) -> tuple[ServerState, OtelScoreExporter]:
    """A server state whose Watch exports scores to the collector (``traces.export``)."""
    export = ScoreExportConfig(endpoint=collector_url + "/v1/logs", timeout_s=5.0)
    state = server_state(tmp, runs=False, traces=TracesConfig(grace_s=0.05, export=export))
    state.watch = Watch(state)
    exporter = state.watch.exporter
    assert exporter is not None
    assert state.policies.on_scores is exporter
    return state, exporter


def send(server: AsgiServer, spans: list[Any], project: str) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(
        endpoint=f"{server.url}/v1/traces", headers={"x-evalsi-project": project}
    )
    assert exporter.export(spans).name == "SUCCESS"
    exporter.shutdown()  # type: ignore[no-untyped-call]


def attrs(record: Any) -> dict[str, Any]:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in record.attributes}


@pytest.fixture(autouse=True)
def quick_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's batch processor sends every 50 ms instead of every second."""
    monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "50")


def test_scored_results_arrive_as_evaluation_events(tmp_path: Path) -> None:
    collector = Collector()
    with collector.serving() as sink:
        state, exporter = exporting_state(tmp_path, sink.url)
        thanked, thanked_root, thanked_spans = agent_turn("thanks a lot")
        refused, refused_root, refused_spans = agent_turn("no")
        with serving(state) as server, evalsi.Client(server.url) as client:
            client.apply_policy(SUPPORT)
            send(server, thanked_spans, "team-a")
            send(server, refused_spans, "team-a")
            send(server, refused_spans, "elsewhere")  # no policy there: no events
            # contains on both turns, length only where contains passed: three events
            collector.wait("three events", lambda c: len(c.records) >= 3)
            wait_for(
                "both traces graded",
                lambda: client.policy_stats("support", project_id="team-a").evaluated == 2,
            )
            assert exporter.flush()
            stats = client.policy_stats("support", project_id="team-a")
        exporter.close()
    assert stats.errors == 0
    got = {}
    for r in collector.records:
        assert r.event_name == EVENT_NAME
        a = attrs(r)
        got[(r.trace_id.hex(), a["gen_ai.evaluation.name"])] = (r.span_id.hex(), a)
    assert len(collector.records) == len(got) == 3  # the SKIPPED length is no evaluation
    tags = {
        "evalsi.project": "team-a",
        "evalsi.policy": "support",
        "evalsi.run_id": stats_run_id(state),
    }
    span, a = got[(thanked, "contains")]
    assert span == thanked_root
    assert a == {
        **tags,
        "evalsi.evaluator": "contains",
        "evalsi.evaluator_ref": "builtin/contains@1.0.0",
        "gen_ai.evaluation.name": "contains",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
    }
    span, a = got[(thanked, "length")]
    assert span == thanked_root
    assert (a["gen_ai.evaluation.score.value"], a["evalsi.evaluator"]) == (12.0, "length")
    assert "gen_ai.evaluation.score.label" not in a
    span, a = got[(refused, "contains")]
    assert span == refused_root
    assert (a["gen_ai.evaluation.score.value"], a["gen_ai.evaluation.score.label"]) == (0.0, "fail")
    assert (exporter.counts.queued, exporter.counts.sent, exporter.counts.failed) == (3, 3, 0)


def stats_run_id(state: ServerState) -> str:
    return str(state.policies.get("support", "team-a").run_id)


def test_a_refusing_collector_costs_only_counted_failures(tmp_path: Path) -> None:
    collector = Collector(status=400)
    with collector.serving() as sink:
        state, exporter = exporting_state(tmp_path, sink.url)
        thanked, _, spans = agent_turn("thanks a lot")
        with serving(state) as server, evalsi.Client(server.url) as client:
            client.apply_policy(SUPPORT)
            send(server, spans, "team-a")
            wait_for(
                "the trace graded",
                lambda: client.policy_stats("support", project_id="team-a").evaluated == 1,
            )
            collector.wait("the export attempt", lambda c: c.requests >= 1)
            exporter.flush()
            stats = client.policy_stats("support", project_id="team-a")
            scores = client.get_trace(thanked, project_id="team-a").scores
        exporter.close()
    assert stats.errors == 0
    assert [s.result.evaluator for s in scores] == ["contains", "length"]  # stored all the same
    assert collector.records == []
    assert (exporter.counts.queued, exporter.counts.sent, exporter.counts.failed) == (2, 0, 2)
