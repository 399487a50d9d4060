"""Traces carry their scores: a real server receives OTLP traces from the OpenTelemetry SDK,
applied policies grade them, and GetTrace / ListTraces (Connect through the evalsi client, and
REST) return each trace's policy results, per project. ``/metrics`` shows the same grading.
The store query (``store.trace_scores``) is checked on its own too: one statement per page,
colliding result keys kept apart, and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event

import evalsi
from evalsi.core import Content, NotFoundError, Outcome, Record, Span, SpanView, Trace
from evalsi.policies import PolicyEngine, policy_from_yaml, result_key
from evalsi.server._state import TracesConfig
from evalsi.store import SqlStore, TraceScore, trace_scores
from tests.support.asgi_server import AsgiServer
from tests.support.policy_traces import SUPPORT, agent_turn, wait_for
from tests.support.registry import BUILTINS
from tests.support.server_state import server_state, serving

STRICT = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata:
  name: strict
  labels: {evals.si/project: team-b}
spec:
  cascade:
    - {ref: contains, params: {values: [lot]}}
"""
OUTPUTS = {"thanked": "thanks a lot", "refused": "no"}


class Graded:
    def __init__(self, server: AsgiServer, client: evalsi.Client, ids: dict[str, str]) -> None:
        self.server, self.client, self.ids = server, client, ids
        self.roots: dict[str, str] = {}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graded]:
    """team-a: policy "support" graded both turns; team-b: policy "strict" graded the same
    "thanked" turn (sent to both projects); project "default" has no policy."""
    state = server_state(
        tmp_path_factory.mktemp("scores"), runs=False, traces=TracesConfig(grace_s=0.05)
    )
    with serving(state) as server, evalsi.Client(server.url) as client:
        client.apply_policy(SUPPORT)
        client.apply_policy(STRICT)
        ids: dict[str, str] = {}
        roots: dict[str, str] = {}
        for key, output in OUTPUTS.items():
            trace_id, root, spans = agent_turn(output)
            ids[key], roots[key] = trace_id, root
            projects = ("team-a", "team-b", "default") if key == "thanked" else ("team-a",)
            for project in projects:
                exporter = OTLPSpanExporter(
                    endpoint=f"{server.url}/v1/traces", headers={"x-evalsi-project": project}
                )
                assert exporter.export(spans).name == "SUCCESS"
                exporter.shutdown()  # type: ignore[no-untyped-call]
        wait_for(
            "both policies to grade",
            lambda: (
                client.policy_stats("support", project_id="team-a").evaluated == 2
                and client.policy_stats("strict", project_id="team-b").evaluated == 1
            ),
        )
        g = Graded(server, client, ids)
        g.roots = roots
        yield g


def rest(server: AsgiServer, path: str) -> Any:
    with urllib.request.urlopen(server.url + path, timeout=10) as r:
        return json.loads(r.read())


def brief(scores: list[TraceScore]) -> list[tuple[Any, ...]]:
    return [
        (
            s.policy,
            s.result.evaluator,
            s.result.outcome,
            [(x.name, x.value) for x in s.result.scores],
        )
        for s in scores
    ]


# -- Connect (the evalsi client) -------------------------------------------------------------------
def test_get_trace_returns_every_policy_result(graded: Graded) -> None:
    got = graded.client.get_trace(graded.ids["thanked"], project_id="team-a")
    # contains "thanks": passed; so length runs: len("thanks a lot") == 12
    assert brief(got.scores) == [
        ("support", "contains", Outcome.SCORED, [("contains", True)]),
        ("support", "length", Outcome.SCORED, [("length", 12.0)]),
    ]
    assert {s.run_id for s in got.scores} == {
        graded.client.get_policy("support", project_id="team-a").run_id
    }
    assert all(s.result.record_id == graded.ids["thanked"] for s in got.scores)
    refused = graded.client.get_trace(graded.ids["refused"], project_id="team-a").scores
    assert brief(refused) == [
        ("support", "contains", Outcome.SCORED, [("contains", False)]),
        ("support", "length", Outcome.SKIPPED, []),
    ]
    assert "scores.all(s, s.passed)" in refused[1].result.reason  # the gate that held it back
    # The summary carries the scored ones, flattened and tagged.
    summary = graded.client.get_trace(graded.ids["refused"], project_id="team-a").summary
    assert summary is not None
    assert [(s.name, s.passed, s.metadata["policy"]) for s in summary.scores] == [
        ("contains", False, "support")
    ]


def test_list_traces_returns_each_traces_scores(graded: Graded) -> None:
    rows = {t.trace_id: t for t in graded.client.list_traces(project_id="team-a")}
    assert set(rows) == set(graded.ids.values())
    thanked = rows[graded.ids["thanked"]].scores
    assert [(s.name, s.value, s.metadata["evaluator"]) for s in thanked] == [
        ("contains", True, "contains"),
        ("length", 12.0, "length"),
    ]
    assert [(s.name, s.value) for s in rows[graded.ids["refused"]].scores] == [("contains", False)]


def test_each_project_sees_its_own_policies_scores(graded: Graded) -> None:
    tid = graded.ids["thanked"]
    b = graded.client.get_trace(tid, project_id="team-b").scores
    assert brief(b) == [("strict", "contains", Outcome.SCORED, [("contains", True)])]
    assert graded.client.get_trace(tid, project_id="default").scores == []
    (listed,) = graded.client.list_traces(project_id="team-b")
    assert [(s.metadata["policy"], s.value) for s in listed.scores] == [("strict", True)]
    with pytest.raises(NotFoundError):
        graded.client.get_trace(graded.ids["refused"], project_id="team-b")


# -- REST ------------------------------------------------------------------------------------------
def test_rest_get_and_list_carry_the_scores(graded: Graded) -> None:
    tid = graded.ids["refused"]
    doc = rest(graded.server, f"/v1alpha1/traces/{tid}?projectId=team-a")
    scores = doc["trace"]["summary"]["scores"]
    assert [s["policy"] for s in scores] == ["support", "support"]
    assert scores[0]["runId"].startswith("watch-")
    first, second = (s["result"] for s in scores)
    assert (first["evaluator"], first["outcome"]) == ("contains", "OUTCOME_SCORED")
    (score,) = first["scores"]
    assert (score["name"], score["passed"], score["explanation"]) == (
        "contains",
        False,
        "'thanks' not found",
    )
    assert (second["evaluator"], second["outcome"]) == ("length", "OUTCOME_SKIPPED")
    assert second.get("scores", []) == []
    assert second["reason"]
    listed = rest(graded.server, "/v1alpha1/traces?projectId=team-a")["traces"]
    by_id = {t["traceId"]: t for t in listed}
    thanked = by_id[graded.ids["thanked"]]["scores"]
    values = [
        (x["name"], x.get("passed", x.get("number")))
        for s in thanked
        for x in s["result"]["scores"]
    ]
    assert values == [("contains", True), ("length", 12.0)]
    other = rest(graded.server, f"/v1alpha1/traces/{graded.ids['thanked']}?projectId=default")
    assert other["trace"]["summary"].get("scores", []) == []


# -- Prometheus ------------------------------------------------------------------------------------
def test_metrics_show_the_policies_grading(graded: Graded) -> None:
    with urllib.request.urlopen(graded.server.url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    a = (("policy", "support"), ("project", "team-a"))
    assert samples[("evalsi_policy_selected_total", a)] == 2
    assert samples[("evalsi_policy_sampled_total", a)] == 2
    assert samples[("evalsi_policy_evaluated_total", a)] == 2
    b = (("policy", "strict"), ("project", "team-b"))
    assert samples[("evalsi_policy_evaluated_total", b)] == 1
    contains = tuple(sorted((*a, ("evaluator", "contains"), ("metric", "contains"))))
    assert samples[("evalsi_policy_window_mean", contains)] == 0.5  # one pass of two
    assert samples[("evalsi_policy_window_n", contains)] == 2
    length = tuple(sorted((*a, ("evaluator", "length"), ("metric", "length"))))
    assert samples[("evalsi_policy_window_mean", length)] == 12.0
    assert samples[("evalsi_policy_window_n", length)] == 1


# -- the store query -------------------------------------------------------------------------------
def make(i: int, output: str) -> tuple[Trace, Record]:
    tid = f"{i:032x}"
    root = Span(
        tid,
        "1" * 16,
        name="agent",
        end_time_unix_nano=5,
        resource={"service.name": "support-agent"},
        view=SpanView(type="agent"),
    )
    record = Record(id=tid, input=Content.of_text("hi"), output=Content.of_text(output))
    return Trace(tid, project="team-a", spans=[root]), record


def grade(store: SqlStore, outputs: list[str]) -> None:
    async def run() -> None:
        engine = PolicyEngine(store=store, registry=BUILTINS)
        await engine.apply(policy_from_yaml(SUPPORT, registry=BUILTINS))
        for i, output in enumerate(outputs):
            await engine.on_trace(*make(i, output))

    asyncio.run(run())


def check_store(store: SqlStore) -> None:
    grade(store, ["thanks", "nope", "thanks a lot"])
    keys = {f"{i:032x}": result_key(f"{i:032x}") for i in range(4)}  # trace 3: never graded
    statements: list[str] = []
    listen = lambda *a: statements.append(a[2])  # noqa: E731
    event.listen(store.engine, "before_cursor_execute", listen)
    try:
        found = trace_scores(store, "team-a", keys)
    finally:
        event.remove(store.engine, "before_cursor_execute", listen)
    assert len(statements) == 1  # one query for the whole page
    assert sorted(found) == [f"{i:032x}" for i in range(3)]
    assert brief(found[f"{2:032x}"]) == [
        ("support", "contains", Outcome.SCORED, [("contains", True)]),
        ("support", "length", Outcome.SCORED, [("length", 12.0)]),
    ]
    assert brief(found[f"{1:032x}"])[1][2] is Outcome.SKIPPED
    assert trace_scores(store, "team-b", keys) == {}
    # A trace whose id shares nothing with the rows at that key: nothing comes back, and a
    # stored trace asked under another trace's key is not returned either.
    wrong = {f"{0:032x}": result_key(f"{1:032x}")}
    assert trace_scores(store, "team-a", wrong) == {}


def test_trace_scores_on_sqlite(tmp_path: Path) -> None:
    store = SqlStore.open(str(tmp_path / "s.db"))
    try:
        check_store(store)
    finally:
        store.close()


def test_trace_scores_on_postgres(pg_url: str) -> None:
    store = SqlStore.open(pg_url)
    try:
        check_store(store)
    finally:
        store.close()
