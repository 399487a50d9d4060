"""An Agent2Agent server as the agent, against a real ``a2a-sdk`` server on loopback
(``tests/support/a2a_agent.py``): sent and streamed answers, status updates and chunked
artifacts in the trajectory, the agent failing (graded) versus the server failing
(infrastructure), input-required and the follow-up turn, bounds on hostile answers, and the
cassette: a task recorded live replays with the server stopped, to the same trajectory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a")

from evalsi.agents._a2a import MAX_TEXT, A2aHarness, connect
from evalsi.agents._cassette import Tape, taping
from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._harness import Final, TaskSetup
from evalsi.connectors import InfraError
from evalsi.core import Content, Step, UserError
from evalsi.runs._execute import execute_run
from evalsi.specs import A2aAgentSpec, AgentSpec, EnvironmentSpec, run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.a2a_agent import build_app
from tests.support.asgi_server import AsgiServer
from tests.support.registry import BUILTINS


def _server(*, streaming: bool = True) -> AsgiServer:
    server = AsgiServer(None)
    server.app = build_app(server.url + "/", streaming=streaming)
    return server


@pytest.fixture(scope="module")
def agent() -> Iterator[AsgiServer]:
    with _server() as server:
        yield server


def _context(url: str, **section: Any) -> ConnectorContext:
    spec = A2aAgentSpec(url=url, **section)

    def no_environment() -> Any:
        raise AssertionError("an A2A agent brings its own tools")

    return ConnectorContext(
        AgentSpec(kind="a2a", a2a=spec, max_seconds=30),
        EnvironmentSpec(tools=()),
        no_environment,
        None,
        "spec.target.agent.a2a",
    )


def _task(text: str, sample: str = "s1") -> TaskSetup:
    return TaskSetup(run_id="r", task_id=sample, trial=0, seed=None, input=Content.of_text(text))


async def _play(harness: A2aHarness, session: str) -> tuple[list[Step], Final]:
    steps: list[Step] = []
    async for event in harness.run(session):
        if isinstance(event, Final):
            return steps, event
        steps.append(event)
    raise AssertionError("no Final")


async def _one(url: str, text: str, **section: Any) -> tuple[list[Step], Final]:
    ctx = _context(url, **section)
    async with connect(ctx.agent.a2a, ctx) as harness:  # type: ignore[arg-type]
        session = await harness.setup(_task(text))
        return await _play(harness, session)


def _shape(steps: list[Step]) -> list[tuple[str, str, Any]]:
    return [(s.kind, s.name, s.output if s.name != "user" else s.input) for s in steps]


def test_a_streamed_task_records_its_updates_and_the_chunked_artifact(agent: AsgiServer) -> None:
    steps, final = asyncio.run(_one(agent.url, "stream hello world"))
    assert final.stop_reason == "final_answer"
    assert final.output.as_text() == "hello world"  # the two chunks of one artifact, joined
    assert _shape(steps) == [
        ("message", "user", "stream hello world"),
        ("other", "status_update", {"state": "submitted"}),
        ("other", "status_update", {"state": "working", "message": "thinking"}),
        ("other", "status_update", {"state": "working", "message": "step 1"}),
        ("other", "status_update", {"state": "working", "message": "step 2"}),
        ("other", "artifact", {"artifact": "answer", "text": "hello"}),
        ("other", "artifact", {"artifact": "answer", "text": " world", "append": True}),
        ("other", "status_update", {"state": "completed"}),
    ]


def test_without_streaming_the_same_task_gives_the_same_answer(agent: AsgiServer) -> None:
    steps, final = asyncio.run(_one(agent.url, "stream hello world", stream=False))
    assert final.output.as_text() == "hello world"
    assert [s.name for s in steps] == ["user", "artifact", "status_update"]
    with _server(streaming=False) as plain:  # the card says it does not stream
        _, final = asyncio.run(_one(plain.url, "stream hello world"))
    assert (final.output.as_text(), final.stop_reason) == ("hello world", "final_answer")


def test_a_message_alone_is_the_answer(agent: AsgiServer) -> None:
    steps, final = asyncio.run(_one(agent.url, "echo just this"))
    assert final.output.as_text() == "just this"
    assert final.stop_reason == "final_answer"
    assert _shape(steps)[-1] == ("message", "agent", "just this")


@pytest.mark.parametrize(
    ("text", "reason", "said"),
    [("fail", "failed", "cannot do that"), ("reject", "rejected", "not my job")],
)
def test_an_agent_failing_its_task_is_graded_not_lost(
    agent: AsgiServer, text: str, reason: str, said: str
) -> None:
    steps, final = asyncio.run(_one(agent.url, text))
    assert final.stop_reason == reason
    assert final.output.as_text() == said  # no artifact: the agent's last word
    assert steps[-1].output == {"state": reason, "message": said}


def test_input_required_ends_the_turn_and_a_follow_up_continues_the_task(
    agent: AsgiServer,
) -> None:
    async def go() -> tuple[Final, Final, list[Step], dict[str, Any]]:
        ctx = _context(agent.url)
        async with connect(ctx.agent.a2a, ctx) as harness:  # type: ignore[arg-type]
            session = await harness.setup(_task("ask for a booking"))
            _, first = await _play(harness, session)
            state = (await harness.check(session)).end_state
            harness.say(session, "next monday")
            steps, second = await _play(harness, session)
            await harness.teardown(session)
            return first, second, steps, state  # type: ignore[return-value]

    first, second, steps, state = asyncio.run(go())
    assert (first.stop_reason, first.output.as_text()) == ("input_required", "which date?")
    assert state["task_id"]
    assert state["context_id"]
    assert (second.stop_reason, second.output.as_text()) == (
        "final_answer",
        "booked for next monday",
    )
    assert steps[0].input == "next monday"


@pytest.mark.parametrize("stream", [True, False])
def test_a_crashing_agent_server_is_infrastructure(agent: AsgiServer, stream: bool) -> None:
    with pytest.raises(InfraError) as e:  # a JSON-RPC internal error: not the agent's answer
        asyncio.run(_one(agent.url, "crash now", stream=stream))
    assert e.value.kind == "server_error"
    assert "the agent crashed" in e.value.message


def test_a_huge_artifact_is_bounded(agent: AsgiServer) -> None:
    steps, final = asyncio.run(_one(agent.url, "huge 100000"))
    assert len(final.output.as_text()) == 100_000  # the answer whole (under MAX_OUTPUT)
    shown = steps[-2].output
    assert isinstance(shown, dict)
    assert len(str(shown["text"])) < MAX_TEXT + 100  # the step cut
    with pytest.raises(InfraError) as e:  # past the byte bound: malformed, not read whole
        asyncio.run(_one(agent.url, "huge 9000000"))
    assert e.value.kind == "malformed_response"
    assert "larger than" in e.value.message


def test_nothing_listening_or_not_an_a2a_agent_stops_before_the_first_task() -> None:
    closed = AsgiServer(None).url  # a free port, nobody on it
    with pytest.raises(UserError) as e:
        asyncio.run(_one(closed, "hello"))
    assert "spec.target.agent.a2a.url: no A2A agent at" in e.value.message
    assert "connection" in e.value.message

    async def not_a2a(scope: Any, receive: Any, send: Any) -> None:
        body = b"<html>hello</html>"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    with AsgiServer(not_a2a) as web, pytest.raises(UserError) as e:
        asyncio.run(_one(web.url, "hello"))
    assert "no A2A agent at" in e.value.message


def test_a_missing_header_secret_names_the_field(
    agent: AsgiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("A2A_TEST_KEY", raising=False)
    with pytest.raises(UserError) as e:
        asyncio.run(_one(agent.url, "hello", headers={"Authorization": "env:A2A_TEST_KEY"}))
    assert e.value.message.startswith("spec.target.agent.a2a.headers.Authorization:")


def test_a_recorded_task_replays_with_the_server_stopped() -> None:
    async def record_then_replay() -> tuple[Any, Any, Tape, Tape]:
        server = _server()
        with server:
            ctx = _context(server.url)
            stack = connect(ctx.agent.a2a, ctx)  # type: ignore[arg-type]
            harness = await stack.__aenter__()
            recording = Tape()
            with taping(recording):
                session = await harness.setup(_task("stream over and out"))
                live = await _play(harness, session)
        # the server is gone: only the cassette can answer now
        replay = Tape(recording.cassette())
        with taping(replay):
            session = await harness.setup(_task("stream over and out"))
            again = await _play(harness, session)
        await stack.__aexit__(None, None, None)
        return live, again, recording, replay

    live, again, recording, replay = asyncio.run(record_then_replay())
    assert [e.channel for e in recording.cassette()] == ["a2a", "a2a"]  # the card, the message
    assert recording.live_calls == 2
    assert replay.live_calls == 0
    assert again == live
    assert live[1].output.as_text() == "over and out"


def _spec(tmp_path: Path, url: str) -> str:
    rows = [
        {"id": "up", "input": "shout this", "reference": "SHOUT THIS"},
        {"id": "stream", "input": "stream two halves", "reference": "two halves"},
        {"id": "fails", "input": "fail please", "reference": "done"},
    ]
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: a2a}}
spec:
  target:
    agent:
      kind: a2a
      a2a: {{url: "{url}"}}
  dataset: {{path: tasks.jsonl}}
  evaluators:
    - ref: exact-match
    - ref: within-budget
      params: {{max_steps: 8}}
"""


def test_an_eval_run_grades_the_agents_answers_and_trajectories(
    agent: AsgiServer, tmp_path: Path
) -> None:
    from evalsi.runs import iter_tasks

    spec = run_spec_from_yaml(_spec(tmp_path, agent.url), base_dir=tmp_path)
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    assert result.tasks == {"ok": 3}
    tasks = {t["sample_id"]: t for t in iter_tasks(db, result.run_id, 10)}
    assert tasks["up"]["output"] == "SHOUT THIS"
    verdicts = {k: {v["evaluator"]: v for v in t["scores"]} for k, t in tasks.items()}
    assert tasks["fails"]["trajectory"]["stop_reason"] == "failed"
    assert tasks["fails"]["output"] == "cannot do that"
    types = [s["type"] for s in tasks["stream"]["trajectory"]["steps"]]
    assert types[0] == "message"
    assert "other" in types
    exact = {k: v["exact-match"]["scores"] for k, v in verdicts.items()}
    assert exact["up"] == exact["stream"] != exact["fails"]
    assert {v["within-budget"]["outcome"] for v in verdicts.values()} == {"scored"}
    assert verdicts["stream"]["within-budget"]["scores"] == {"within-budget": True}


def test_the_agent_target_returns_the_tasks_cassette(agent: AsgiServer) -> None:
    from evalsi.agents import AgentTarget

    async def go() -> Any:
        spec = AgentSpec(kind="a2a", a2a=A2aAgentSpec(url=agent.url))
        async with AgentTarget(None, spec, None) as target:
            return await target.invoke("stream cassette please")

    out = asyncio.run(go())
    assert out.output == Content.of_text("cassette please") or out.output == "cassette please"
    assert out.cassette is not None
    exchanges = list(out.cassette)
    assert [e.channel for e in exchanges] == ["a2a", "a2a"]
    events = exchanges[1].value()
    assert isinstance(events, list)
    assert events[-1]["statusUpdate"]["status"]["state"] == ("TASK_STATE_COMPLETED")
    assert out.trajectory is not None
    assert out.trajectory.stop_reason == "final_answer"
