"""An HTTP agent over real HTTP (the stub agent on loopback): the rendered body, headers with
secrets, the answer, the transcript's tool calls as steps, the session kept between turns; a
recorded task replays with no call; and the boundaries (a path that matches nothing, a reply
that is not JSON, 429 then success, 5xx to the end)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalsi.agents import AgentTarget, TaskSetup
from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._http_agent import connect
from evalsi.connectors import (
    InfraError,
    Resilience,
    RetryPolicy,
    TargetError,
    TargetOutput,
    TaskInfo,
    close_shared_session,
)
from evalsi.core import Cassette, Content, Record
from evalsi.specs import AgentSpec, EnvironmentSpec, HttpAgentSpec
from tests.support.stub_http_agent import StubHttpAgent

TRANSCRIPT = [
    {"role": "user", "content": "pay bob 5"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "balance", "arguments": '{"account": "alice"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "120"},
    {"role": "assistant", "content": "Paid bob 5."},
]  # fmt: skip
SCRIPT: dict[str, Any] = {
    "agents": {
        "pay bob 5": {"answer": "Paid bob 5.", "transcript": TRANSCRIPT},
        "no json": {"raw": "<html>gateway</html>"},
        "odd": {"body": {"unexpected": True}},
    },
    "require_header": {"X-Api-Key": "k-123"},
}
BODY = (
    '{"query": {{ input | tojson }}, "history": {{ messages | tojson }}, '
    '"user": {{ metadata.user | tojson }}, "session": {{ session | tojson }}}'
)
FAST = Resilience(retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))


def _agent(url: str, **section: Any) -> AgentSpec:
    fields = {
        "url": url,
        "headers": {"X-Api-Key": "env:STUB_AGENT_KEY"},
        "body": '{"input": {{ input | tojson }}, "session": {{ session | tojson }}}',
        "output": "$.result.answer",
        "transcript": "$.result.transcript",
        "session": "$.session_id",
        **section,
    }
    return AgentSpec(kind="http", http=HttpAgentSpec(**fields))


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_AGENT_KEY", "k-123")


def run_task(agent: AgentSpec, text: str, **kw: Any) -> TargetOutput:
    async def main() -> TargetOutput:
        try:
            async with AgentTarget(None, agent, EnvironmentSpec(tools=()), **kw) as target:
                sample = Record(id="s", input=Content.of_text(text), metadata={"user": "ann"})
                return await target.invoke(text, task=TaskInfo("run", "s", 0, sample))
        finally:
            await close_shared_session()

    return asyncio.run(main())


def test_the_answer_and_the_transcripts_tool_calls() -> None:
    with StubHttpAgent(SCRIPT) as stub:
        out = run_task(_agent(stub.url), "pay bob 5")
        (request,) = stub.requests()
    assert request.body == {"input": "pay bob 5", "session": None}
    assert request.headers["X-Api-Key"] == "k-123"
    assert out.output.text == "Paid bob 5."
    assert out.trajectory is not None
    steps = out.trajectory.steps
    assert [(s.kind, s.name) for s in steps] == [("tool_call", "balance"), ("message", "assistant")]
    assert steps[0].tool_call is not None
    assert (steps[0].tool_call.arguments, steps[0].output) == ({"account": "alice"}, 120)
    assert out.trajectory.stop_reason == "final_answer"


def test_the_template_sees_messages_metadata_and_the_session_across_turns() -> None:
    async def main(url: str) -> list[Any]:
        try:
            section = _agent(url, body=BODY).http
            assert section is not None
            agent = AgentSpec(kind="http", http=section)
            target = AgentTarget(None, agent, EnvironmentSpec(tools=()))
            context = ConnectorContext(agent, target.env_spec, target.environment, None, "w")
            async with connect(section, context) as harness:
                task = TaskSetup("r", "t", 0, None, Content.of_text("hi"), metadata={"user": "ann"})
                session = await harness.setup(task)
                first = await harness.turn(session)
                second = await harness.turn(session, "and again")
                return [first, second]
        finally:
            await close_shared_session()

    with StubHttpAgent(SCRIPT) as stub:
        (_, a), (_, b) = asyncio.run(main(stub.url))
        one, two = (r.body for r in stub.requests())
    assert (a.text, b.text) == ("echo: hi", "echo: and again")
    history = [{"role": "user", "content": "hi"}]
    assert one == {"query": "hi", "history": history, "user": "ann", "session": None}
    assert two["session"] == "sess-1"  # the id the agent gave on the first turn
    assert two["history"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "echo: hi"},
        {"role": "user", "content": "and again"},
    ]


def test_a_path_that_matches_nothing_is_the_agents_error() -> None:
    with StubHttpAgent(SCRIPT) as stub, pytest.raises(TargetError) as caught:
        run_task(_agent(stub.url), "odd")
    message = caught.value.message
    assert "spec.target.agent.http.transcript: $.result.transcript does not match" in message
    assert "has no key 'result'" in message


def test_a_reply_that_is_not_json_and_a_wrong_key_are_told_apart() -> None:
    with StubHttpAgent(SCRIPT) as stub:
        with pytest.raises(InfraError) as caught:
            _direct(stub.url, "no json")
        assert caught.value.kind == "malformed_response"
        with pytest.raises(TargetError) as denied:
            run_task(_agent(stub.url, headers={"X-Api-Key": "wrong"}), "pay bob 5")
    assert denied.value.status == 401


def _direct(url: str, text: str) -> Any:
    async def main() -> Any:
        try:
            agent = _agent(url)
            assert agent.http is not None
            target = AgentTarget(None, agent, EnvironmentSpec(tools=()))
            context = ConnectorContext(agent, target.env_spec, target.environment, None, "w")
            async with connect(agent.http, context, resilience=FAST) as harness:
                session = await harness.setup(TaskSetup("r", "t", 0, None, Content.of_text(text)))
                return [e async for e in harness.run(session)]
        finally:
            await close_shared_session()

    return asyncio.run(main())


def test_429_then_success_and_5xx_to_the_end() -> None:
    with StubHttpAgent(SCRIPT) as stub:
        stub.fail_next(429, retry_after=0)
        events = _direct(stub.url, "pay bob 5")
        assert stub.calls() == 2
        assert events[-1].output.text == "Paid bob 5."
        stub.fail_next(502, 502, 502)
        with pytest.raises(InfraError) as caught:
            _direct(stub.url, "pay bob 5")
    assert (caught.value.kind, caught.value.attempts) == ("server_error", 3)


class _Replay:
    live_after: int | None = None

    def __init__(self, cassette: Cassette) -> None:
        self.source = cassette

    def cassette(self, sample_id: str, trial: int) -> Cassette | None:
        return self.source


def test_a_recorded_task_replays_with_no_call() -> None:
    with StubHttpAgent(SCRIPT) as stub:
        recorded = run_task(_agent(stub.url), "pay bob 5")
        calls = stub.calls()
    assert recorded.cassette is not None
    assert [e.channel for e in recorded.cassette.exchanges] == ["http"]
    replayed = run_task(_agent(stub.url), "pay bob 5", replay=_Replay(recorded.cassette))
    assert stub.calls() == calls == 1
    assert replayed.output == recorded.output
    assert replayed.trajectory is not None
    assert recorded.trajectory is not None
    assert [s.to_value() for s in replayed.trajectory.steps] == [
        s.to_value() for s in recorded.trajectory.steps
    ]


def test_environment_tools_are_refused_for_an_http_agent() -> None:
    from evalsi.core import UserError
    from evalsi.specs import ToolEntrySpec

    env = EnvironmentSpec(tools=(ToolEntrySpec(function="os.path:basename"),))

    async def main() -> None:
        async with AgentTarget(None, _agent("http://127.0.0.1:9/agent"), env):
            pass

    with pytest.raises(UserError) as caught:
        asyncio.run(main())
    assert "brings its own tools" in caught.value.message
