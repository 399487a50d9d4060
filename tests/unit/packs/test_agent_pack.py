"""The agent pack's registration and manifests, and the same scores whichever way a record came
in: a dataset row with a ``trajectory`` field, or steps built directly as a trace gives them."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from evalsi.core import Outcome, Record, Step, ToolCall, Trajectory, Usage
from evalsi.datasets import FieldMap, record_from_dict
from evalsi.evaluators import Evaluator, RecordRunner
from evalsi.packs import BUILTIN_PACKS, builtin_registry
from evalsi.packs.agent import EVALUATORS

NAMES = (
    "tool-call-accuracy",
    "trajectory-match",
    "loop-detection",
    "step-efficiency",
    "session-goal-completion",
    "policy-violations",
    "approval-requests",
    "fault-recovery",
    "tool-called",
    "tool-not-called",
    "tool-order",
    "tool-count",
    "final-answer",
    "no-tool-error",
    "within-budget",
    "task-success",
    "agent-efficiency",
)


def test_registered_as_a_pack() -> None:
    assert BUILTIN_PACKS["agent"].evaluators == EVALUATORS
    assert tuple(e.name for e in EVALUATORS) == NAMES
    assert BUILTIN_PACKS["agent"].extra == ""
    reg = builtin_registry(entry_points=False)
    assert {reg.resolve(n).ref for n in NAMES} == {f"builtin/{n}@1.0.0" for n in NAMES}


@pytest.mark.parametrize("ev", EVALUATORS, ids=lambda e: e.name)
def test_manifest_contract(ev: Evaluator) -> None:
    m = ev.manifest
    assert m.pack == "agent"
    assert m.description.endswith(".")
    assert m.outputs[0].name == ev.name
    assert "examples/agent/" in m.example  # trips, harness-steps or predicates.jsonl
    doc = inspect.getdoc(ev.target) or ""
    for spec in ev.params:
        assert f"    {spec.name}: " in doc, f"{ev.name}: param {spec.name} is not documented"
    # the judge reads the conversation; final-answer the output; task-success the checks
    if ev.name not in ("session-goal-completion", "final-answer", "task-success"):
        assert m.requires == ("trajectory",)


# The same session twice: as a dataset row (arguments as a JSON string, OpenAI nesting) and as
# the steps a trace gives (a ToolCall with parsed arguments, usage on the LLM spans).
ROW: dict[str, Any] = {
    "id": "s1",
    "input": "Weather in Oslo and Bergen?",
    "reference": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}},
                                 {"name": "get_weather", "arguments": {"city": "Bergen"}}]},
    "trajectory": [
        {"kind": "llm_call", "name": "m", "usage": {"input_tokens": 90, "output_tokens": 10},
         "start_time_unix_nano": 1_000_000_000, "end_time_unix_nano": 1_400_000_000},
        {"kind": "tool_call", "name": "get_weather",
         "tool_call": {"id": "c1", "function": {"name": "get_weather",
                                                "arguments": "{\"city\": \"Oslo\"}"}},
         "start_time_unix_nano": 1_400_000_000, "end_time_unix_nano": 1_600_000_000},
        {"kind": "tool_call", "name": "get_weather",
         "tool_call": {"name": "get_weather", "arguments": {"city": "Oslo"}},
         "start_time_unix_nano": 1_600_000_000, "end_time_unix_nano": 1_800_000_000},
        {"kind": "llm_call", "name": "m", "usage": {"total_tokens": 50},
         "start_time_unix_nano": 1_800_000_000, "end_time_unix_nano": 2_000_000_000},
    ],
}  # fmt: skip


def row_record() -> Record:
    return record_from_dict(ROW, FieldMap(), line=1, path="session.jsonl")


def from_trace() -> Record:
    steps = [
        Step(kind="llm_call", name="m", usage=Usage(input_tokens=90, output_tokens=10),
             start_time_unix_nano=1_000_000_000, end_time_unix_nano=1_400_000_000),
        Step(kind="tool_call", name="get_weather",
             tool_call=ToolCall("get_weather", {"city": "Oslo"}, "c1"),
             start_time_unix_nano=1_400_000_000, end_time_unix_nano=1_600_000_000),
        Step(kind="tool_call", name="get_weather",
             tool_call=ToolCall("get_weather", '{"city":"Oslo"}'),
             start_time_unix_nano=1_600_000_000, end_time_unix_nano=1_800_000_000),
        Step(kind="llm_call", name="m", usage=Usage(total_tokens=50),
             start_time_unix_nano=1_800_000_000, end_time_unix_nano=2_000_000_000),
    ]  # fmt: skip
    row = row_record()
    return Record(id="s1", input=row.input, reference=row.reference, trajectory=Trajectory(steps))


def scores(record: Record, name: str, params: dict[str, Any]) -> dict[str, Any]:
    bound = builtin_registry(entry_points=False).resolve(name).bind(params)
    (result,) = asyncio.run(RecordRunner(bound).run_async([record]))
    assert result.outcome is Outcome.SCORED, result.reason
    return {s.name: (s.value, s.explanation) for s in result.scores}


@pytest.mark.parametrize(
    ("name", "params", "want"),
    [
        # agent: get_weather(Oslo) twice; reference: Oslo then Bergen → 1 of 2 right
        ("tool-call-accuracy", {}, {"tool-call-accuracy": 0.5, "tool-name-accuracy": 1.0,
                                    "tool-args-accuracy": 0.5}),
        ("trajectory-match", {"match_args": True, "mode": "unordered"},
         {"trajectory-match": False}),
        ("loop-detection", {"threshold": 2}, {"loop-detection": False, "redundant-calls": 1}),
        ("step-efficiency", {"max_tokens": 200},  # 100 + 50 tokens of the llm steps; 1000 ms
         {"step-efficiency": True, "agent-steps": 4.0, "agent-tokens": 150.0,
          "agent-latency-ms": 1000.0, "tokens-budget-used": 0.75}),
    ],
)  # fmt: skip
def test_runs_and_traces_score_alike(
    name: str, params: dict[str, Any], want: dict[str, Any]
) -> None:
    row = scores(row_record(), name, params)
    trace = scores(from_trace(), name, params)
    assert row == trace
    assert {k: v for k, (v, _) in row.items()} == want
