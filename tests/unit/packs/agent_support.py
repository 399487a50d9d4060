"""Helpers for the agent-pack tests: records with tool-call trajectories, and running a bound
evaluator over them."""

from __future__ import annotations

from typing import Any

from evalsi.core import Content, Outcome, Record, Score, Step, ToolCall, Trajectory
from evalsi.evaluators import Evaluator, RecordRunner


def tool(name: str, arguments: Any = None, **step: Any) -> Step:
    return Step(kind="tool_call", name=name, tool_call=ToolCall(name, arguments), **step)


def llm(**step: Any) -> Step:
    return Step(kind="llm_call", name="model", **step)


def agent_record(*steps: Step, reference: Any = None, **fields: Any) -> Record:
    return Record(
        id="r",
        trajectory=Trajectory(list(steps)),
        reference=None if reference is None else Content.from_value(reference),
        **fields,
    )


def run(ev: Evaluator, record: Record, **params: Any) -> dict[str, Score]:
    """The scores of one scored record, by metric name."""
    (result,) = RecordRunner(ev.bind(params)).run([record])
    assert result.outcome is Outcome.SCORED, result.reason
    return {s.name or ev.name: s for s in result.scores}


def outcome(ev: Evaluator, record: Record, **params: Any) -> tuple[Outcome, str]:
    (result,) = RecordRunner(ev.bind(params)).run([record])
    return result.outcome, result.reason
