"""A run's tasks (sample x trial) as ``evalsi runs show --tasks`` lists them: the output, each
evaluator's verdict and, when the target returned one, the trajectory's steps.

Read streaming from the store: a Run's stored outputs and its results, both in (seq, trial)
order, joined as they go; a Score run has no stored outputs, so its tasks are its results.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterator
from typing import Any

import orjson

from evalsi.core import EvaluationResult, Outcome, Step
from evalsi.datasets import read_trajectory
from evalsi.store import SqlStore

STEP_TYPES = {"llm_call": "model_call"}
"""A step's ``type`` in the task JSON, where it differs from the core step kind."""

_EXACT_INT_LIMIT = 2**53


def task_json(value: Any) -> Any:
    """A free-form JSON value of a task (an output, a tool's arguments or result, a step's
    input or output, a structured score) as every surface shows it: object keys sorted and
    whole floats as integers. A wire ``Value`` keeps neither the order of an object's keys
    nor 1.0 apart from 1, so the store's view takes the form ListRunTasks can carry, and
    ``runs show --tasks`` prints the same JSON with or without ``--server``."""
    if isinstance(value, dict):
        return {k: task_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [task_json(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INT_LIMIT:
        return int(value)
    return value


def _score_json(value: Any) -> Any:
    # A number, pass/fail or label is typed on the wire: kept as it is.
    return value if isinstance(value, bool | float | str) else task_json(value)


def step_json(step: Step) -> dict[str, Any]:
    """One trajectory step as the task JSON shows it: its ``type``, and for a tool call the
    ``tool``, its ``arguments`` and its ``result``."""
    out: dict[str, Any] = {"type": STEP_TYPES.get(step.kind, step.kind)}
    if step.name:
        out["name"] = step.name
    if step.tool_call is not None:
        out.update(
            tool=step.tool_call.name,
            arguments=task_json(step.tool_call.arguments),
            result=task_json(step.output),
        )
        if isinstance(step.input, dict) and "executed_by" in step.input:
            out["executed_by"] = step.input["executed_by"]  # the agent ran it, not evalsi
    else:
        if step.input is not None:
            out["input"] = task_json(step.input)
        if step.output is not None:
            out["output"] = task_json(step.output)
    if step.error:
        out["error"] = step.error
    if step.usage is not None:
        out["usage"] = step.usage.known()
    return out


def _verdict(result: EvaluationResult) -> dict[str, Any]:
    return {
        "evaluator": result.evaluator,
        "outcome": Outcome(result.outcome).name.lower(),
        "scores": {s.name: _score_json(s.value) for s in result.scores},
        "reason": result.reason,
    }


def iter_tasks(
    store: SqlStore, run_id: str, limit: int, *, offset: int = 0
) -> Iterator[dict[str, Any]]:
    """Up to ``limit`` tasks of the run, in (sample, trial) order, after the first ``offset``
    (a page of ListRunTasks). Read lazily: the store is read only as far as the page."""
    tasks = _tasks(store, run_id)
    try:
        yield from itertools.islice(tasks, offset, offset + max(limit, 0))
    finally:
        tasks.close()  # the store's cursors are let go at once, not when collected


def _tasks(store: SqlStore, run_id: str) -> Generator[dict[str, Any]]:
    stored = store.iter_results(run_id)
    outputs = store.iter_outputs(run_id)
    try:
        yield from _joined(stored, outputs)
    finally:
        for stream in (stored, outputs):
            close = getattr(stream, "close", None)
            if close is not None:
                close()


def _joined(
    stored: Iterator[tuple[int, int, EvaluationResult]], outputs: Iterator[Any]
) -> Iterator[dict[str, Any]]:
    graded = (
        ((seq, r.trial), r) for seq, _, r in stored if seq >= 0
    )  # dataset-scope results (seq -1) belong to no task
    verdicts = itertools.groupby(graded, key=lambda kr: kr[0])
    pending = next(verdicts, None)

    def verdicts_of(key: tuple[int, int]) -> list[EvaluationResult]:
        nonlocal pending
        while pending is not None and pending[0] < key:
            pending = next(verdicts, None)
        if pending is None or pending[0] != key:
            return []
        found = [r for _, r in pending[1]]
        pending = next(verdicts, None)
        return found

    first = next(outputs, None)
    if first is None:  # a Score run: its results are its tasks
        while pending is not None:
            (seq, trial), group = pending
            results = [r for _, r in group]
            pending = next(verdicts, None)
            yield {
                "sample_id": results[0].record_id,
                "seq": seq,
                "trial": trial,
                "scores": [_verdict(r) for r in results],
            }
        return
    for row in itertools.chain([first], outputs):
        task: dict[str, Any] = {
            "sample_id": row.record_id,
            "seq": row.seq,
            "trial": row.trial,
            "status": row.status,
            "output": None if row.output is None else task_json(orjson.loads(row.output)),
            "scores": [_verdict(r) for r in verdicts_of((row.seq, row.trial))],
        }
        if row.error:
            task["error"] = row.error
        if row.trajectory is not None:
            trajectory = read_trajectory(orjson.loads(row.trajectory), stored=True)
            task["trajectory"] = {
                "steps": [step_json(s) for s in trajectory.steps],
                "stop_reason": trajectory.stop_reason,
            }
            if trajectory.checks:
                task["trajectory"]["checks"] = [c.to_value() for c in trajectory.checks]
            if trajectory.end_state is not None:
                task["trajectory"]["end_state"] = task_json(trajectory.end_state)
        yield task
