"""The scripted connector: a sample's known trajectory played a tool call per turn through the
real environment (blocks, approvals and faults are the environment's, not the script's), the
answer from its last ``message`` step; a missing variant or a malformed trajectory fails the
task naming the sample; the spec accepts it only as the built-in agent's model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalsi.agents import (
    Approvals,
    Budgets,
    BuiltinHarness,
    Environment,
    Fault,
    Final,
    FunctionTool,
    ScriptedModel,
    TaskSetup,
    ToolLoop,
    ToolPolicy,
    ToolSpec,
)
from evalsi.connectors import TargetError
from evalsi.core import Content, SpecError, Step, UserError
from evalsi.runs._targets import build_target
from evalsi.specs import TargetSpec, run_spec_from_yaml

CALLS: list[tuple[str, Any]] = []


def lookup(city: str) -> str:
    """Find a city."""
    CALLS.append(("lookup", city))
    return f"{city}: found"


def wipe(city: str) -> str:
    """Erase a city."""
    CALLS.append(("wipe", city))
    return "wiped"


KNOWN = {
    "good": {
        "steps": [
            {"kind": "llm_call", "name": "recorded model"},  # the loop writes its own
            {"kind": "tool_call", "tool_call": {"name": "lookup", "arguments": {"city": "Oslo"}}},
            {"kind": "policy_block", "name": "lookup"},  # the environment's to write
            {"kind": "tool_call", "tool_call": {"name": "wipe", "arguments": {"city": "Oslo"}}},
            {"kind": "message", "output": "not this one"},
            {"kind": "tool_call", "tool_call": {"name": "lookup", "arguments": {"city": "Rome"}}},
            {"kind": "message", "name": "assistant", "output": {"text": "Oslo and Rome exist."}},
        ]
    },
    "quiet": [{"kind": "tool_call", "tool_call": {"name": "lookup", "arguments": {"city": "X"}}}],
    "broken": {"steps": [{"kind": "tool_call", "tool_call": {"name": ""}}]},
}


def _setup(metadata: dict[str, Any], task_id: str = "s1") -> TaskSetup:
    return TaskSetup("run", task_id, 0, None, Content.of_text("go"), metadata=metadata)


def _environment() -> Environment:
    return Environment(
        [
            FunctionTool(lookup, ToolSpec("lookup", permission="read", declared=True)),
            FunctionTool(wipe, ToolSpec("wipe", permission="irreversible", declared=True)),
        ],
        policy=ToolPolicy(allow=frozenset({"wipe"})),
        approvals=Approvals("deny"),
        faults=[Fault("lookup", "timeout", call=2)],
    )


def _play(variant: str, metadata: dict[str, Any]) -> tuple[list[Step], Final]:
    harness = BuiltinHarness(ToolLoop(ScriptedModel(variant), Budgets(max_steps=10)), _environment)

    async def go() -> tuple[list[Step], Final]:
        session = await harness.setup(_setup(metadata))
        steps: list[Step] = []
        async for event in harness.run(session):
            if isinstance(event, Final):
                return steps, event
            steps.append(event)
        raise AssertionError("no Final")

    return asyncio.run(go())


def test_plays_each_call_through_the_real_environment_then_answers() -> None:
    CALLS.clear()
    steps, final = _play("good", {"known": KNOWN})
    assert final.output.as_text() == "Oslo and Rome exist."
    assert final.stop_reason == "final_answer"
    # the calls reached the environment: the gate denied wipe, the fault hit lookup's 2nd call
    assert CALLS == [("lookup", "Oslo")]
    kinds = [s.kind for s in steps if s.kind != "llm_call"]
    assert kinds == ["tool_call", "approval", "fault", "tool_call"]
    assert [s.error for s in steps if s.kind == "tool_call"] == ["", "lookup timed out"]
    # one model turn per call, and one for the answer
    assert [s.kind for s in steps].count("llm_call") == 4
    assert all(s.name == "good" for s in steps if s.kind == "llm_call")


def test_a_list_of_steps_is_a_trajectory_and_no_message_is_an_empty_answer() -> None:
    CALLS.clear()
    _, final = _play("quiet", {"known": KNOWN})
    assert CALLS == [("lookup", "X")]
    assert final.output.as_text() == ""


@pytest.mark.parametrize(
    ("variant", "metadata", "expected"),
    [
        ("bad", {"known": KNOWN}, "no known trajectory named 'bad'"),
        ("good", {}, "no known trajectory named 'good'"),
        ("good", {"known": "good"}, "no known trajectory named 'good'"),
        ("broken", {"known": KNOWN}, "metadata.known.broken"),
    ],
)
def test_a_sample_without_the_variant_fails_its_task_naming_both(
    variant: str, metadata: dict[str, Any], expected: str
) -> None:
    with pytest.raises(TargetError) as caught:
        ScriptedModel(variant).for_task(_setup(metadata, "sample-7"))
    assert "sample 'sample-7'" in caught.value.message
    assert expected in caught.value.message
    if variant == "bad":
        assert "broken, good, quiet" in (caught.value.hint or "")


def test_outside_the_built_in_agent_it_refuses_to_answer() -> None:
    with pytest.raises(TargetError, match="built-in agent"):
        asyncio.run(ScriptedModel("good").complete([]))


SPEC = """
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {name: scripted}
spec:
  target:
    %s
  environment:
    tools: [{function: "json:dumps"}]
  dataset: {path: scenarios.jsonl}
  evaluators: [{ref: exact-match}]
"""


def test_the_spec_takes_scripted_as_the_agents_model_without_an_endpoint(tmp_path: Any) -> None:
    (tmp_path / "scenarios.jsonl").write_text('{"input": "x"}\n')
    spec = run_spec_from_yaml(
        SPEC % "agent: {model: {connector: scripted, model: good}}", base_dir=tmp_path
    )
    assert (spec.target.kind, spec.target.connector, spec.target.model) == (
        "agent",
        "scripted",
        "good",
    )
    assert spec.target.base_url == ""
    assert spec.environment is not None
    target = build_target(spec.target, environment=spec.environment)
    assert target.describe()["model"] == {"connector": "scripted", "model": "good"}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (
            "agent: {model: {connector: scripted}}",
            "spec.target.agent.model: missing required field 'model' (the model's name; for "
            "connector scripted, the known trajectory of each sample to play",
        ),
        (
            "model: {connector: scripted, model: good}",
            "spec.target.model.connector: scripted plays a sample's known trajectory; use it as "
            "target.agent.model",
        ),
        (
            'agent: {model: {connector: scripted, model: good, baseUrl: "http://h/v1"}}',
            "spec.target.agent.model: a scripted model has no baseUrl or secretRef",
        ),
    ],
)
def test_the_spec_refuses_scripted_where_it_cannot_play(
    tmp_path: Any, target: str, expected: str
) -> None:
    (tmp_path / "scenarios.jsonl").write_text('{"input": "x"}\n')
    with pytest.raises(SpecError) as caught:
        run_spec_from_yaml(SPEC % target, base_dir=tmp_path)
    assert expected in str(caught.value)


def test_a_plain_model_target_cannot_be_scripted() -> None:
    with pytest.raises(UserError, match=r"target\.agent\.model"):
        build_target(TargetSpec(kind="model", connector="scripted", model="good"))
