"""A Responses-compatible agent over real HTTP (the scripted stub on loopback): its function
calls run through evalsi's environment (policy blocks, faults), reasoning and server-side tools
land in the trajectory, usage is summed; stateful (``previous_response_id``) and stateless
(``store: false``) servers; a recorded task replays with no call; and the boundaries (no tool
call, turns run out, malformed replies, huge replies, 429 then success, 5xx to the end)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evalsi.agents import AgentTarget
from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._responses import connect
from evalsi.connectors import (
    EgressPolicy,
    InfraError,
    Resilience,
    RetryPolicy,
    TargetError,
    TargetOutput,
    TaskInfo,
    close_shared_session,
)
from evalsi.core import Cassette, Content, Record, UserError
from evalsi.specs import AgentSpec, EnvironmentSpec, ResponsesAgentSpec, ToolEntrySpec
from evalsi.specs._evalrun import ToolDeclarationSpec
from tests.support.stub_responses import StubResponses

LEDGER: list[str] = []


def balance(account: str) -> int:
    """An account's balance."""
    LEDGER.append(f"balance {account}")
    return {"alice": 120, "bob": 7}.get(account, 0)


def transfer(source: str, target: str, amount: int) -> str:
    """Move money."""
    LEDGER.append(f"transfer {amount}")
    return f"moved {amount}"


FC = "function_call"
SCRIPT: dict[str, Any] = {
    "conversations": {
        "pay bob 5": [
            {"output": [
                {"type": "reasoning", "summary": "check the balance, then pay",
                 "text": "alice first"},
                {"type": FC, "name": "balance", "arguments": {"account": "alice"}},
                {"type": FC, "name": "transfer",
                 "arguments": {"source": "alice", "target": "bob", "amount": 5}},
            ]},
            {"output": [{"type": "message", "text": "Could not pay: {outputs}"}]},
        ],
        "twice": [
            {"output": [{"type": FC, "name": "balance", "arguments": {"account": "alice"}}]},
            {"output": [{"type": FC, "name": "balance", "arguments": {"account": "bob"}}]},
            {"output": [{"type": "message", "text": "{outputs}"}]},
        ],
        "search": [
            {"output": [
                {"type": "web_search_call", "status": "completed",
                 "action": {"type": "search", "query": "rates"}},
                {"type": "message", "text": "Rates are up."},
            ], "usage": {"input_tokens": 3, "output_tokens": 4}},
        ],
        "forever": [{"output": [{"type": FC, "name": "balance",
                                 "arguments": {"account": "bob"}}]}] * 9,
        "bad args": [
            {"output": [{"type": FC, "name": "balance", "arguments": "{not json"}]},
            {"output": [{"type": "message", "text": "{outputs}"}]},
        ],
        "cut short": [{"output": [{"type": "message", "text": "half"}], "status": "incomplete",
                       "incomplete_details": {"reason": "max_output_tokens"}}],
        "failing": [{"output": [], "status": "failed",
                     "error": {"code": "server_error", "message": "the model crashed"}}],
        "malformed": [{"body": {"id": "r", "output": [{"no": "type"}]}}],
        "not json": [{"raw": "<html>oops</html>"}],
        "huge": [{"output": [{"type": "message", "text": "y", "repeat": 3_000_000}]}],
    }
}  # fmt: skip
FAST = Resilience(retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))


def _environment(**extra: Any) -> EnvironmentSpec:
    declared = ToolDeclarationSpec(permission="irreversible", reversible=False, exposure="external")
    return EnvironmentSpec(
        tools=(
            ToolEntrySpec(function=f"{__name__}:balance"),
            ToolEntrySpec(function=f"{__name__}:transfer", declared={"transfer": declared}),
        ),
        **extra,
    )


def _agent(url: str, **section: Any) -> AgentSpec:
    return AgentSpec(
        kind="responses", responses=ResponsesAgentSpec(base_url=url, model="stub", **section)
    )


class _Replay:
    def __init__(self, cassettes: dict[tuple[str, int], Cassette]) -> None:
        self.cassettes = cassettes
        self.live_after: int | None = None

    def cassette(self, sample_id: str, trial: int) -> Cassette | None:
        return self.cassettes.get((sample_id, trial))


async def _invoke(target: AgentTarget, text: str, sample_id: str = "s") -> TargetOutput:
    info = TaskInfo("run", sample_id, 0, Record(id=sample_id, input=Content.of_text(text)))
    return await target.invoke(text, task=info)


def run_task(
    agent: AgentSpec, text: str, environment: EnvironmentSpec | None = None, **kw: Any
) -> TargetOutput:
    async def main() -> TargetOutput:
        try:
            async with AgentTarget(None, agent, environment or _environment(), **kw) as target:
                return await _invoke(target, text)
        finally:
            await close_shared_session()

    return asyncio.run(main())


def _types(out: TargetOutput) -> list[str]:
    assert out.trajectory is not None
    return [s.kind if s.kind != "other" else s.name for s in out.trajectory.steps]


def test_tool_calls_run_through_the_environment_over_turns() -> None:
    LEDGER.clear()
    with StubResponses(SCRIPT) as stub:
        out = run_task(_agent(stub.url, instructions="be brief"), "pay bob 5")
        first, second = stub.bodies()
    assert LEDGER == ["balance alice"]  # transfer is irreversible: blocked, never called
    assert _types(out) == [
        "llm_call", "reasoning", "tool_call", "policy_block", "llm_call", "message",
    ]  # fmt: skip
    assert out.trajectory is not None
    steps = out.trajectory.steps
    assert steps[1].output == {
        "summary": ["check the balance, then pay"],
        "content": ["alice first"],
    }
    assert steps[2].tool_call is not None
    assert (steps[2].tool_call.arguments, steps[2].output) == ({"account": "alice"}, 120)
    assert out.output.text == "Could not pay: 120; error: blocked by policy: " + (
        "transfer is destructive, blocked by default"
    )
    assert out.trajectory.stop_reason == "final_answer"
    # the request: the model, instructions, the environment's tools as function tools
    assert first["instructions"] == "be brief"
    assert first["input"] == [{"role": "user", "content": "pay bob 5"}]
    assert {t["name"] for t in first["tools"]} == {"balance", "transfer"}
    assert first["tools"][0]["type"] == "function"
    assert first["tools"][0]["parameters"]["required"] == ["account"]
    # the second turn: only the results, after the first response
    assert second["previous_response_id"] == "resp_1"
    assert [i["type"] for i in second["input"]] == ["function_call_output"] * 2
    assert second["input"][0]["call_id"] == "call_0_1"
    # usage: 10 tokens per conversation item in, 5 per output item out, summed over turns
    assert (out.usage.input_tokens, out.usage.output_tokens) == (10 * 1 + 10 * 6, 5 * 3 + 5)
    assert steps[0].usage is not None
    assert steps[0].usage.input_tokens == 10


def test_a_stateless_server_gets_the_whole_conversation() -> None:
    with StubResponses({**SCRIPT, "stateless": True}) as stub:
        out = run_task(_agent(stub.url), "pay bob 5")
        second = stub.bodies()[1]
    assert "previous_response_id" not in second
    assert [i.get("type", "message") for i in second["input"]] == [
        "message", "reasoning", FC, FC, "function_call_output", "function_call_output",
    ]  # fmt: skip
    assert out.output.text.startswith("Could not pay: 120; ")


def test_store_false_in_params_sends_the_whole_conversation() -> None:
    with StubResponses(SCRIPT) as stub:
        run_task(_agent(stub.url, params={"store": False}), "twice")
        bodies = stub.bodies()
    assert [len(b["input"]) for b in bodies] == [1, 3, 5]
    assert all("previous_response_id" not in b and b["store"] is False for b in bodies)


def test_a_scheduled_fault_reaches_the_agent_as_a_tool_error() -> None:
    env = _environment(faults=({"tool": "balance", "kind": "error", "call": 2, "latency_ms": 0.0,
                                "message": "ledger offline"},))  # fmt: skip
    with StubResponses(SCRIPT) as stub:
        out = run_task(_agent(stub.url), "twice", env)
    assert _types(out) == [
        "llm_call", "tool_call", "llm_call", "fault", "tool_call", "llm_call", "message",
    ]  # fmt: skip
    assert out.output.text == "120; error: ledger offline"  # every result so far


def test_server_side_tools_are_tool_calls_and_no_call_is_a_final_answer() -> None:
    with StubResponses(SCRIPT) as stub:
        out = run_task(_agent(stub.url), "search")
        assert stub.calls() == 1
    assert _types(out) == ["llm_call", "tool_call", "message"]
    assert out.trajectory is not None
    search = out.trajectory.steps[1]
    assert search.tool_call is not None
    assert (search.name, search.tool_call.arguments) == (
        "web_search",
        {"type": "search", "query": "rates"},
    )
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.total_tokens) == (3, 4, 7)


def test_max_turns_stops_the_agent() -> None:
    with StubResponses(SCRIPT) as stub:
        out = run_task(_agent(stub.url, max_turns=3), "forever")
        assert stub.calls() == 3
    assert out.trajectory is not None
    assert out.trajectory.stop_reason == "max_steps"
    assert _types(out).count("llm_call") == 3


def test_arguments_that_are_not_json_are_the_agents_error() -> None:
    with StubResponses(SCRIPT) as stub:
        out = run_task(_agent(stub.url), "bad args")
    assert out.trajectory is not None
    call = out.trajectory.steps[1]
    assert call.tool_call is not None
    assert call.tool_call.arguments == "{not json"
    assert "not a JSON object" in call.error
    assert "not a JSON object" in out.output.text


@pytest.mark.parametrize(("text", "stop"), [("cut short", "incomplete"), ("failing", "failed")])
def test_incomplete_and_failed_replies_end_the_task_graded(text: str, stop: str) -> None:
    with StubResponses(SCRIPT) as stub:
        out = run_task(_agent(stub.url), text)
    assert out.trajectory is not None
    assert out.trajectory.stop_reason == stop
    assert out.trajectory.steps[0].output["status"] == stop  # type: ignore[index]


def test_a_malformed_reply_is_infrastructure() -> None:
    with StubResponses(SCRIPT) as stub, pytest.raises(InfraError) as caught:
        run_task(_agent(stub.url), "malformed")
    assert caught.value.kind == "malformed_response"
    assert "output[0]" in caught.value.message


def test_huge_replies_are_bounded() -> None:
    with StubResponses(SCRIPT) as stub:
        out = run_task(_agent(stub.url), "huge")
    text = out.output.text
    assert text is not None
    assert len(text) < 1_100_000
    assert text.endswith("characters]")
    assert out.trajectory is not None
    assert len(json.dumps(out.trajectory.steps[1].output)) < 300_000


def _context(
    url: str, egress: EgressPolicy | None = None
) -> tuple[ResponsesAgentSpec, ConnectorContext]:
    section = ResponsesAgentSpec(base_url=url, model="stub")
    agent = _agent(url)
    target = AgentTarget(None, agent, EnvironmentSpec(tools=()))
    context = ConnectorContext(
        agent, target.env_spec, target.environment, egress, "spec.target.agent.responses"
    )
    return section, context


async def _direct(
    section: ResponsesAgentSpec, context: ConnectorContext, text: str, resilience: Resilience
) -> list[Any]:
    from evalsi.agents import TaskSetup

    try:
        async with connect(section, context, resilience=resilience) as harness:
            session = await harness.setup(TaskSetup("r", "t", 0, None, Content.of_text(text)))
            return [event async for event in harness.run(session)]
    finally:
        await close_shared_session()


def test_429_then_success_and_5xx_to_the_end() -> None:
    with StubResponses(SCRIPT) as stub:
        section, context = _context(stub.url)
        stub.fail_next(429, retry_after=0)
        events = asyncio.run(_direct(section, context, "search", FAST))
        assert stub.calls() == 2
        assert events[-1].output.text == "Rates are up."
        stub.fail_next(503, 503, 503)
        with pytest.raises(InfraError) as caught:
            asyncio.run(_direct(section, context, "search", FAST))
        assert (caught.value.kind, caught.value.attempts) == ("server_error", 3)
        stub.fail_next(400)
        with pytest.raises(TargetError):
            asyncio.run(_direct(section, context, "search", FAST))
        with pytest.raises(InfraError) as not_json:
            asyncio.run(_direct(section, context, "not json", FAST))
        assert not_json.value.kind == "malformed_response"


def test_the_key_is_sent_and_a_missing_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-test")
    with StubResponses({**SCRIPT, "require_key": "sk-test"}) as stub:
        out = run_task(_agent(stub.url, secret_ref="env:STUB_KEY"), "search")
        assert out.output.text == "Rates are up."
        with pytest.raises(UserError) as caught:
            run_task(_agent(stub.url, secret_ref="env:NOT_SET_ANYWHERE"), "search")
    assert "spec.target.agent.responses.secretRef" in caught.value.message
    assert "sk-test" not in str(stub.requests()[-1:])[:0]  # nothing sent without the key


def test_the_egress_policy_refuses_before_any_task() -> None:
    policy = EgressPolicy.from_lists(listen_host="0.0.0.0")
    with StubResponses(SCRIPT) as stub, pytest.raises(UserError) as caught:
        run_task(_agent(stub.url), "search", egress=policy)
    assert "spec.target.agent.responses.baseUrl" in caught.value.message
    assert stub.calls() == 0


def test_a_recorded_task_replays_with_no_call_and_the_same_trajectory() -> None:
    LEDGER.clear()
    with StubResponses(SCRIPT) as stub:
        recorded = run_task(_agent(stub.url), "pay bob 5")
        calls = stub.calls()
    assert recorded.cassette is not None
    channels = [e.channel for e in recorded.cassette.exchanges]
    assert channels == ["responses", "tool:balance", "responses"]
    # the stub is stopped: any live call would fail
    replay = _Replay({("s", 0): recorded.cassette})
    LEDGER.clear()
    replayed = run_task(_agent(stub.url), "pay bob 5", replay=replay)
    assert stub.calls() == calls
    assert LEDGER == []  # the tool was not called either
    assert _plain(replayed) == _plain(recorded)
    # a changed task misses the cassette: an infra error, never a live call
    with pytest.raises(InfraError) as caught:
        run_task(_agent(stub.url, instructions="changed"), "pay bob 5", replay=replay)
    assert caught.value.kind == "cassette"


def _plain(out: TargetOutput) -> Any:
    assert out.trajectory is not None
    times = ("start_time_unix_nano", "end_time_unix_nano")
    steps = [
        {k: v for k, v in s.to_value().items() if k not in times} for s in out.trajectory.steps
    ]
    return out.output.to_value(), out.usage.known(), out.trajectory.stop_reason, steps


def test_the_describe_names_the_endpoint_not_the_key(tmp_path: Path) -> None:
    agent = _agent("http://127.0.0.1:9/v1", secret_ref="env:K")
    target = AgentTarget(None, replace(agent), _environment())
    described = target.describe()
    assert described["kind"] == "responses"
    assert described["agent"] == {"base_url": "http://127.0.0.1:9/v1", "model": "stub"}


def _spec_yaml(tmp_path: Path, url: str) -> str:
    rows = [
        {"id": "pay", "input": "pay bob 5", "reference": "-"},
        {"id": "search", "input": "search", "reference": "Rates are up."},
    ]
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: responses-agent}}
spec:
  target:
    agent:
      kind: responses
      responses: {{baseUrl: "{url}", model: stub, instructions: "be brief", maxTurns: 4}}
  environment:
    tools:
      - function: "{__name__}:balance"
      - function: "{__name__}:transfer"
        declare: {{permission: irreversible, reversible: false, exposure: external}}
  dataset: {{path: tasks.jsonl}}
  evaluators:
    - ref: exact-match
    - ref: policy-violations
    - {{ref: tool-called, params: {{tool: balance}}}}
"""


def test_an_evalrun_spec_runs_a_responses_agent_and_grades_its_trajectory(tmp_path: Path) -> None:
    from evalsi.runs import iter_tasks
    from evalsi.runs._execute import execute_run
    from evalsi.specs import run_spec_from_yaml
    from evalsi.store import SqlStore
    from tests.support.registry import BUILTINS

    with StubResponses(SCRIPT) as stub:
        spec = run_spec_from_yaml(_spec_yaml(tmp_path, stub.url), base_dir=tmp_path)
        db = SqlStore.open(tmp_path / "s.db")
        result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    assert result.tasks == {"ok": 2}
    tasks = {t["sample_id"]: t for t in iter_tasks(db, result.run_id, 10)}
    pay = tasks["pay"]
    assert [s["type"] for s in pay["trajectory"]["steps"]] == [
        "model_call", "reasoning", "tool_call", "policy_block", "model_call", "message",
    ]  # fmt: skip
    verdicts = {v["evaluator"]: v for v in pay["scores"]}
    assert verdicts["tool-called"]["scores"] == {"tool-called": True}
    assert verdicts["policy-violations"]["scores"]["policy-violations"] == 1
    search = {v["evaluator"]: v for v in tasks["search"]["scores"]}
    assert search["exact-match"]["scores"] == {"exact-match": True}
    assert search["tool-called"]["scores"] == {"tool-called": False}
