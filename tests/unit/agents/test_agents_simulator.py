"""The simulated user: a conversation over several turns of one session of the built-in
harness, ended by the user's stop token, by the agent, or by ``maxTurns``; the user's turns are
marked in the trajectory and their usage is kept apart from the agent's; the hidden information
reaches the simulator's model only as something to give when asked; bad input is refused with
the field named."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evalsi.agents import (
    AgentTarget,
    CheckResult,
    Final,
    HarnessInfo,
    TaskSetup,
    UserSimulator,
)
from evalsi.agents._cassette import CassetteMiss
from evalsi.connectors import Completion, InfraError, TargetError, TaskInfo
from evalsi.core import Cassette, Content, Message, Record, SpecError, Step, ToolCall, Usage
from evalsi.core import UserError as UserErr
from evalsi.specs import (
    AgentSpec,
    EnvironmentSpec,
    HarnessSpec,
    ToolEntrySpec,
    UserSimulatorSpec,
    run_spec_from_yaml,
)

LOOKUPS: list[str] = []
STOP = "###STOP###"


def lookup(order: str) -> str:
    """Find an order."""
    LOOKUPS.append(order)
    return f"order {order}: shipped"


class FakeChat:
    """A chat model answering the last user (or tool) message by a table; counts its calls."""

    connector = "openai-compatible"
    system: str | None = "You are the shop's agent."

    def __init__(
        self,
        model: str,
        answers: Mapping[str, str] | None = None,
        calls: Mapping[str, ToolCall] | None = None,
        default: str = "Anything else?",
    ) -> None:
        self.model = model
        self.answers = dict(answers or {})
        self.calls = dict(calls or {})
        self.default = default
        self.seen: list[list[Message]] = []

    async def complete(
        self, messages: list[Message], *, seed: int | None = None, **params: Any
    ) -> Completion:
        self.seen.append(list(messages))
        last = next(m for m in reversed(messages) if m.role in ("user", "tool"))
        text = last.content or ""
        usage = Usage(input_tokens=10, output_tokens=2, cost_usd=0.5)
        if last.role == "user" and text in self.calls:
            reply = Message(role="assistant", content=None, tool_calls=[self.calls[text]])
            return Completion("", [reply], usage, "tool_calls", model=self.model)
        answer = self.answers.get(text, self.default)
        return Completion(answer, [Message(role="assistant", content=answer)], usage, "stop")


def _agent(**answers: str) -> FakeChat:
    return FakeChat(
        "agent-model",
        answers={"where is my order?": "Which order?", "order 7": "It shipped.", **answers},
        calls={"order 7": ToolCall("lookup", {"order": "7"}, "c1")},
    )


ENV = EnvironmentSpec(tools=(ToolEntrySpec(function=f"{__name__}:lookup"),))


def _user(**fields: Any) -> UserSimulatorSpec:
    base: dict[str, Any] = {"connector": "scripted", "model": "turns"}
    return UserSimulatorSpec(**{**base, **fields})


async def _invoke(
    target: AgentTarget, metadata: dict[str, Any], text: str = "where is my order?"
) -> Any:
    record = Record(id="s1", input=Content.of_text(text), metadata=metadata)
    async with target:
        return await target.invoke(text, seed=3, task=TaskInfo("run", "s1", 0, record))


def _run(
    user: UserSimulatorSpec,
    metadata: dict[str, Any],
    agent: FakeChat | None = None,
    *,
    simulator: UserSimulator | None = None,
    max_steps: int = 5,
) -> tuple[Any, UserSimulator]:
    sim = simulator or UserSimulator(user)
    spec = AgentSpec(max_steps=max_steps, user=user)
    target = AgentTarget(agent or _agent(), spec, ENV, user=sim)
    return asyncio.run(_invoke(target, metadata)), sim


def _kinds(out: Any) -> list[str]:
    return [f"{s.kind}:{s.name}" if s.kind == "message" else s.kind for s in out.trajectory.steps]


def test_the_conversation_goes_on_until_the_user_says_its_stop_token() -> None:
    LOOKUPS.clear()
    out, _ = _run(_user(), {"user": {"turns": ["order 7", "thanks"]}})
    assert out.trajectory.stop_reason == "user_stop"
    assert _kinds(out) == [
        "llm_call",  # "Which order?"
        "message:user",  # order 7
        "llm_call",
        "tool_call",
        "llm_call",  # "It shipped."
        "message:user",  # thanks
        "llm_call",  # "Anything else?"
        "message:user",  # the turns ran out: the stop token
    ]
    assert LOOKUPS == ["7"]  # one environment across the turns: the tool ran once
    users = [s for s in out.trajectory.steps if s.kind == "message"]
    assert [s.output["text"] for s in users] == ["order 7", "thanks", STOP]
    assert [s.input["turn"] for s in users] == [2, 3, 4]
    assert all(s.input["simulated"] and s.input["role"] == "user" for s in users)
    assert out.output.as_text() == "Anything else?"


def test_the_agent_sees_the_whole_conversation_with_its_system_prompt_once() -> None:
    agent = _agent()
    _run(_user(), {"user": {"turns": ["order 7"]}}, agent)
    last = agent.seen[-1]
    assert [m.role for m in last].count("system") == 1
    said = [m.content for m in last if m.role == "user"]
    assert said == ["where is my order?", "order 7"]


def test_the_agent_ends_the_conversation_with_an_empty_answer_or_the_stop_token() -> None:
    for answer in ("", f"Goodbye {STOP}"):
        agent = _agent(**{"order 7": answer})
        agent.calls.clear()
        out, _ = _run(_user(), {"user": {"turns": ["order 7", "never said"]}}, agent)
        assert out.trajectory.stop_reason == "agent_stop"
        said = [s.output["text"] for s in out.trajectory.steps if s.kind == "message"]
        assert said == ["order 7"]


def test_max_turns_cuts_the_conversation() -> None:
    out, _ = _run(_user(max_turns=2), {"user": {"turns": ["a", "b", "c"]}})
    assert out.trajectory.stop_reason == "max_turns"
    said = [s.output["text"] for s in out.trajectory.steps if s.kind == "message"]
    assert said == ["a"]  # the input was turn 1, "a" turn 2: the last one allowed
    one, _ = _run(_user(max_turns=1), {"user": {"turns": ["a"]}})
    assert one.trajectory.stop_reason == "max_turns"
    assert _kinds(one) == ["llm_call"]


def test_an_exhausted_agent_budget_keeps_its_reason_and_the_user_is_not_asked() -> None:
    agent = _agent()
    agent.calls["order 7"] = ToolCall("lookup", {"order": "7"}, "c1")
    agent.answers.pop("order 7")
    looping = FakeChat(
        "agent-model", calls={"where is my order?": ToolCall("lookup", {"order": "1"}, "c")}
    )

    async def again(messages: list[Message], **kw: Any) -> Completion:
        usage = Usage(input_tokens=1, output_tokens=1)
        call = ToolCall("lookup", {"order": "1"}, f"c{len(messages)}")
        reply = Message(role="assistant", content=None, tool_calls=[call])
        return Completion("", [reply], usage, "tool_calls")

    looping.complete = again  # type: ignore[method-assign]
    out, _ = _run(_user(), {"user": {"turns": ["never said"]}}, looping, max_steps=2)
    assert out.trajectory.stop_reason == "max_steps"
    assert not [s for s in out.trajectory.steps if s.kind == "message"]


def test_the_users_usage_is_kept_apart_from_the_agents() -> None:
    sim_model = FakeChat("user-model", answers={"Which order?": "order 7"}, default=STOP)
    spec = _user(connector="openai-compatible", base_url="http://127.0.0.1:9/v1", model="u")
    sim = UserSimulator(spec, sim_model, price=lambda model, usage: 0.25)
    out, _ = _run(spec, {}, simulator=sim)
    assert out.trajectory.stop_reason == "user_stop"
    # the agent: three model calls ("Which order?" / the tool call / "Anything else?")
    assert (out.usage.input_tokens, out.usage.output_tokens) == (30, 6)
    assert out.usage.cost_usd == pytest.approx(1.5)
    users = [s for s in out.trajectory.steps if s.kind == "message"]
    assert [s.usage.cost_usd for s in users] == [0.25, 0.25]
    assert sim.account.to_dict() == {
        "calls": 2,
        "cached": 0,
        "input_tokens": 20,
        "output_tokens": 4,
        "tokens": 24,
        "usd": 0.5,
        "usd_unknown": 0,
    }


def test_the_simulator_model_plays_the_user_and_holds_the_hidden_information() -> None:
    sim_model = FakeChat("user-model", default=STOP)
    spec = _user(
        connector="openai-compatible",
        base_url="http://127.0.0.1:9/v1",
        model="u",
        persona="spec persona",
        goal="spec goal",
        hidden="spec hidden",
    )
    sim = UserSimulator(spec, sim_model)
    user = {"persona": "a patient pensioner", "hidden": "my order number is 7"}
    _run(spec, {"user": user}, simulator=sim)
    (asked,) = sim_model.seen
    system = asked[0].content or ""
    assert asked[0].role == "system"
    assert "a patient pensioner" in system
    assert "spec persona" not in system
    assert "spec goal" in system  # not overridden by the sample: the spec's
    assert "keep to yourself until the agent asks" in system
    assert "my order number is 7" in system
    assert STOP in system
    # roles flipped: the user's own first message is the model's, the agent's is "user"
    assert [(m.role, m.content) for m in asked[1:]] == [
        ("user", "(The support agent is listening.)"),
        ("assistant", "where is my order?"),
        ("user", "Which order?"),
    ]
    assert "my order number is 7" not in "".join(m.content or "" for m in asked[1:])


class DictCache:
    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.data.get(key)

    async def put(self, key: str, text: str, usage: Mapping[str, Any]) -> None:
        self.data[key] = text


def test_a_cached_answer_is_not_asked_again() -> None:
    sim_model = FakeChat("user-model", answers={"Which order?": "order 7"}, default=STOP)
    spec = _user(connector="openai-compatible", base_url="http://127.0.0.1:9/v1", model="u")
    cache = DictCache()
    first = UserSimulator(spec, sim_model, cache=cache)
    _run(spec, {}, simulator=first)
    assert len(sim_model.seen) == 2
    assert len(cache.data) == 2
    second = UserSimulator(spec, sim_model, cache=cache)
    out, _ = _run(spec, {}, simulator=second)
    assert len(sim_model.seen) == 2  # nothing asked
    assert second.account.cached == 2
    assert second.account.calls == 0
    assert out.trajectory.stop_reason == "user_stop"


def test_the_simulators_budget_ends_the_task_as_infrastructure() -> None:
    talkative = {"Which order?": "order 7", "Anything else?": "and order 8?"}
    sim_model = FakeChat("user-model", answers=talkative, default=STOP)
    spec = _user(
        connector="openai-compatible", base_url="http://127.0.0.1:9/v1", model="u", max_usd=0.3
    )
    sim = UserSimulator(spec, sim_model, price=lambda model, usage: 0.25)
    with pytest.raises(InfraError, match="maxUsd"):
        _run(spec, {}, simulator=sim)
    assert sim.account.calls == 2  # 0.25 spent < 0.3: asked; 0.5 >= 0.3: refused


def test_a_replayed_conversation_calls_neither_model() -> None:
    sim_model = FakeChat("user-model", answers={"Which order?": "order 7"}, default=STOP)
    spec = _user(connector="openai-compatible", base_url="http://127.0.0.1:9/v1", model="u")
    recorded, _ = _run(spec, {}, simulator=UserSimulator(spec, sim_model))
    cassette = recorded.cassette
    assert [e.channel for e in cassette].count("user") == 2

    class Recorded:
        live_after = None

        def cassette(self, sample_id: str, trial: int) -> Cassette | None:
            return cassette

    silent_agent, silent_user = _agent(), FakeChat("user-model")
    target = AgentTarget(
        silent_agent,
        AgentSpec(user=spec),
        ENV,
        user=UserSimulator(spec, silent_user),
        replay=Recorded(),
    )
    again = asyncio.run(_invoke(target, {}))
    assert silent_agent.seen == []
    assert silent_user.seen == []
    assert _kinds(again) == _kinds(recorded)
    assert again.output == recorded.output
    # a changed persona asks the user something the cassette does not hold: never live
    changed = AgentTarget(
        _agent(),
        AgentSpec(user=spec),
        ENV,
        user=UserSimulator(replace(spec, persona="someone else"), FakeChat("u")),
        replay=Recorded(),
    )
    with pytest.raises(CassetteMiss, match="user"):
        asyncio.run(_invoke(changed, {}))


class SingleTurn:
    """A harness without ``turn``."""

    async def describe(self) -> HarnessInfo:
        return HarnessInfo("single")

    async def setup(self, task: TaskSetup) -> str:
        return "s"

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        yield Final(Content.of_text("done"))

    async def check(self, session: str) -> CheckResult:
        return CheckResult()

    async def teardown(self, session: str) -> None:
        return None


def test_a_harness_without_turns_is_refused_before_the_first_task() -> None:
    spec = AgentSpec(harness=HarnessSpec(python=f"{__name__}:SingleTurn"), user=_user())
    target = AgentTarget(None, spec, None, user=UserSimulator(_user()))
    with pytest.raises(UserErr, match=r"spec.target.agent.user: .*no `turn`"):
        asyncio.run(_invoke(target, {}))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"connector": "carrier-pigeon"}, "unknown connector 'carrier-pigeon'"),
        ({"max_turns": 0}, r"maxTurns: expected 1 to 100, got 0"),
        ({"max_turns": 101}, r"maxTurns: expected 1 to 100, got 101"),
        ({"model": ""}, "model is required"),
        ({"stop_token": "  "}, "stopToken"),
        ({"max_usd": 0.0}, "maxUsd"),
    ],
)
def test_a_bad_simulator_is_refused_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(UserErr, match=message) as e:
        UserSimulator(_user(**fields))
    assert "spec.target.agent.user" in e.value.message


def test_a_model_simulator_needs_its_client() -> None:
    with pytest.raises(UserErr, match="needs its model client"):
        UserSimulator(_user(connector="anthropic", model="m"))


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ("not an object", "expected an object"),
        ({"mood": "grumpy"}, "unknown field"),
        ({"turns": "one string"}, "expected a list"),
        ({"turns": ["ok", 3]}, "every turn must be text"),
        ({"hidden": ["a"]}, "hidden: expected text"),
    ],
)
def test_a_bad_sample_user_fails_that_task_naming_the_sample(user: Any, message: str) -> None:
    with pytest.raises(TargetError, match=message) as e:
        _run(_user(), {"user": user})
    assert "sample 's1': metadata.user" in e.value.message


SPEC = """
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: sim}}
spec:
  target:
    agent:
      model: {{connector: scripted, model: good}}
      user: {user}
  environment:
    tools: [{{function: "{module}:lookup"}}]
  dataset: {{path: tasks.jsonl}}
  evaluators: [{{ref: exact-match}}]
"""


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ("{persona: x}", "missing required field 'model'"),
        ("{model: {connector: scripted, model: t}, maxTurns: 0}", "maxTurns"),
        ("{model: {connector: carrier-pigeon, model: t, baseUrl: 'http://x/v1'}}", "connector"),
        ("{model: {connector: openai-compatible, model: t}}", "baseUrl"),
    ],
)
def test_the_spec_refuses_a_bad_user_naming_the_field(
    tmp_path: Path, user: str, message: str
) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    with pytest.raises(SpecError, match=message) as e:
        run_spec_from_yaml(SPEC.format(user=user, module=__name__), base_dir=tmp_path)
    assert "user" in str(e.value)


def test_the_manifest_describes_the_simulator_without_its_secret() -> None:
    spec = _user(
        connector="openai-compatible",
        base_url="http://127.0.0.1:9/v1",
        model="u",
        secret_ref="env:SIM_KEY",
    )
    target = AgentTarget(
        _agent(), AgentSpec(user=spec), ENV, user=UserSimulator(spec, FakeChat("u"))
    )
    described = target.describe()["user"]
    assert described["model"] == "u"
    assert described["max_turns"] == 10
    assert "SIM_KEY" not in str(described)
