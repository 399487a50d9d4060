"""A Watch policy's slow evaluator no longer stalls the server: on a real loopback server fed
OTLP by the OpenTelemetry SDK, a policy whose sync evaluator spins in Python is graded in the
server's grading threads, stopped at ``limits.evaluatorSeconds`` (that trace's score ERROR
``timed out after Ns``), while ``/healthz`` and another OTLP export answer at once. A control
with the engine grading in line (as before) shows the same evaluator holding ``/healthz``. A
ReDoS pattern in a policy's ``regex`` is graded in microseconds (RE2).

The latency bounds are guards, not speed targets: each fails only when the loop is held for
the whole slow call (seconds)."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

import evalsi
from evalsi.core import Outcome, Record, UserError
from evalsi.evaluators import evaluator
from evalsi.packs import builtin_registry
from evalsi.policies import PolicyEngine
from evalsi.server._state import Limits, ServerState, TracesConfig
from tests.support.asgi_server import AsgiServer
from tests.support.policy_traces import agent_turn, wait_for
from tests.support.server_state import server_state, serving

LIMIT_S = 2

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata:
  name: spinning
  labels: {evals.si/project: team-a}
spec:
  cascade:
    - {ref: test/spin}
"""

REGEX_POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata:
  name: shapes
  labels: {evals.si/project: team-a}
spec:
  cascade:
    - {ref: regex, params: {pattern: "^(a+)+$"}}
"""


class Spin:
    """What the spinning evaluator is doing, seen from the test: ``started`` once it spins,
    ``ended`` once it stopped (by the limit, or at ``spin_s``: a bound, so a broken limit
    fails the test instead of hanging it)."""

    spin_s = 20.0
    started = threading.Event()
    ended = threading.Event()


@evaluator(name="test/spin", version="1.0.0", requires=("output",))
def spin(record: Record) -> bool:
    """Pure Python that spins on "slow": the case a thread-pool timeout alone cannot stop."""
    if record.output is None or record.output.as_text() != "slow":
        return True
    Spin.started.set()
    try:
        deadline = time.monotonic() + Spin.spin_s
        while time.monotonic() < deadline:
            pass
    finally:
        Spin.ended.set()
    return False


@pytest.fixture(autouse=True)
def fresh_spin() -> None:
    Spin.spin_s = 20.0
    Spin.started.clear()
    Spin.ended.clear()


def spinning_state(tmp: Path) -> ServerState:
    registry = builtin_registry(entry_points=False)
    registry.register(spin)
    return server_state(
        tmp,
        registry=registry,
        runs=False,
        limits=Limits(evaluator_seconds=LIMIT_S),
        traces=TracesConfig(grace_s=0.05),
    )


def export(server: AsgiServer, spans: list[Any]) -> float:
    """One OTLP/HTTP export to the server, as an app's SDK sends it; how long it took."""
    exporter = OTLPSpanExporter(
        endpoint=f"{server.url}/v1/traces", headers={"x-evalsi-project": "team-a"}, timeout=10
    )
    started = time.monotonic()
    assert exporter.export(spans).name == "SUCCESS"
    took = time.monotonic() - started
    exporter.shutdown()  # type: ignore[no-untyped-call]
    return took


def healthz(server: AsgiServer) -> float:
    started = time.monotonic()
    with urllib.request.urlopen(server.url + "/healthz", timeout=30) as response:
        assert response.status == 200
    return time.monotonic() - started


@contextmanager
def spinning(tmp: Path, state: ServerState) -> Iterator[tuple[AsgiServer, evalsi.Client, str]]:
    """The server with the policy applied and a "slow" trace sent; yields once the evaluator
    spins on it, with that trace's id."""
    with serving(state) as server, evalsi.Client(server.url) as client:
        client.apply_policy(POLICY)
        slow, _, spans = agent_turn("slow")
        export(server, spans)
        assert Spin.started.wait(10), "the policy never graded the slow trace"
        yield server, client, slow


def test_a_spinning_policy_evaluator_times_out_while_the_server_answers(tmp_path: Path) -> None:
    state = spinning_state(tmp_path)
    with spinning(tmp_path, state) as (server, client, slow):
        started = time.monotonic()
        health = [healthz(server)]
        fast, _, fast_spans = agent_turn("fast")
        ingest = export(server, fast_spans)  # an OTLP export while the evaluator spins
        health.append(healthz(server))
        during = not Spin.ended.is_set()  # all of the above happened while it spun
        wait_for("both traces graded", lambda: _evaluated(client) == 2, timeout=15)
        took = time.monotonic() - started
        slow_scores = client.get_trace(slow, project_id="team-a").scores
        fast_scores = client.get_trace(fast, project_id="team-a").scores
        stats = client.policy_stats("spinning", project_id="team-a")

    assert during, "the spin ended before the checks: they prove nothing"
    assert max(health) < 1.0, f"/healthz took {max(health):.2f}s while a policy evaluator spun"
    assert ingest < 1.0, f"an OTLP export took {ingest:.2f}s while a policy evaluator spun"
    assert Spin.ended.is_set()
    assert took < Spin.spin_s / 2  # the limit ended it, not the spin's own bound
    ((slow_score,),) = [slow_scores]
    assert slow_score.result.outcome == Outcome.ERROR
    assert slow_score.result.reason == f"timed out after {LIMIT_S}s"
    ((fast_score,),) = [fast_scores]  # the thread the limit freed grades the next trace
    assert fast_score.result.outcome == Outcome.SCORED
    assert [(s.name, s.passed) for s in fast_score.result.scores] == [("spin", True)]
    assert stats.errors == 1
    assert stats.outcomes == {"spin:error": 1, "spin:scored": 1}


def _evaluated(client: evalsi.Client) -> int:
    return client.policy_stats("spinning", project_id="team-a").evaluated


def test_control_grading_in_line_holds_the_server(tmp_path: Path) -> None:
    """The engine as it was (no grading threads): the same spin, bounded to 3 s, holds
    ``/healthz`` for about that long, so the test above could have failed."""
    Spin.spin_s = 3.0
    state = spinning_state(tmp_path)
    state.policies = PolicyEngine(registry=state.registry, store=state.store)
    with spinning(tmp_path, state) as (server, client, slow):
        held = healthz(server)
        wait_for("the slow trace graded", lambda: _evaluated(client) == 1, timeout=15)
        (score,) = client.get_trace(slow, project_id="team-a").scores
    assert held > 1.0, f"/healthz answered in {held:.2f}s though the loop was spinning"
    assert score.result.outcome == Outcome.SCORED  # no limit in line: it ran to its end


def test_a_redos_pattern_in_a_policy_is_graded_at_once(tmp_path: Path) -> None:
    """``^(a+)+$`` on 28 a's and a "!" took 24 s under Python's re, on the server's loop."""
    state = server_state(tmp_path, runs=False, traces=TracesConfig(grace_s=0.05))
    with serving(state) as server, evalsi.Client(server.url) as client:
        client.apply_policy(REGEX_POLICY)
        evil, _, evil_spans = agent_turn("a" * 28 + "!")
        fine, _, fine_spans = agent_turn("a" * 28)
        started = time.monotonic()
        export(server, evil_spans)
        export(server, fine_spans)
        wait_for(
            "both traces graded",
            lambda: client.policy_stats("shapes", project_id="team-a").evaluated == 2,
            timeout=10,
        )
        took = time.monotonic() - started
        verdicts = {
            tid: [(s.result.outcome, s.result.scores[0].passed) for s in scores]
            for tid in (evil, fine)
            for scores in [client.get_trace(tid, project_id="team-a").scores]
        }
    assert took < 5
    assert verdicts == {evil: [(Outcome.SCORED, False)], fine: [(Outcome.SCORED, True)]}


def test_a_pattern_re2_refuses_is_refused_when_the_policy_is_applied(tmp_path: Path) -> None:
    state = server_state(tmp_path, runs=False)
    with serving(state) as server, evalsi.Client(server.url) as client:
        with pytest.raises(UserError) as info:
            client.apply_policy(REGEX_POLICY.replace("^(a+)+$", r"(a)\\1"))
        assert client.list_policies(project_id="team-a") == []
    assert "regex: param 'pattern'" in str(info.value)
    assert "backreferences" in str(info.value)
