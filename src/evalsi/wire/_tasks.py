"""A run's tasks (the dicts ``evalsi.runs.iter_tasks`` yields, the shape ``runs show --tasks``
prints) to and from ``RunTask`` messages, for ListRunTasks.

The shape has one home, ``runs._tasks``; this module only carries it. Keys absent from a task
stay absent across the wire (message presence), and free-form values are read back in the
store view's form (``task_json``: keys sorted, whole numbers as integers), so a client prints
the same JSON as the store.
"""

from __future__ import annotations

from typing import Any

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi.core import Check, JsonValue, Score, Usage
from evalsi.runs import task_json
from evalsi.wire._json import _set_value, value_from_proto
from evalsi.wire._records import _set_usage, _usage_from_proto
from evalsi.wire._results import score_from_proto, score_to_proto


def task_to_proto(task: dict[str, Any]) -> pb.RunTask:
    """One task as ``iter_tasks`` gives it, as a ``RunTask``."""
    out = pb.RunTask(sample_id=task["sample_id"], seq=task["seq"], trial=task["trial"])
    if "status" in task:
        out.status = task["status"]
    if "output" in task:
        _set_value(out.output, task["output"])
    for verdict in task["scores"]:
        v = out.scores.add(
            evaluator=verdict["evaluator"], outcome=verdict["outcome"], reason=verdict["reason"]
        )
        v.scores.extend(score_to_proto(_score(n, x)) for n, x in verdict["scores"].items())
    if "error" in task:
        out.error = task["error"]
    if "trajectory" in task:
        trajectory = task["trajectory"]
        out.trajectory.stop_reason = trajectory["stop_reason"]
        for step in trajectory["steps"]:
            _set_step(out.trajectory.steps.add(), step)
        for check in trajectory.get("checks", ()):
            out.trajectory.checks.add(
                name=check["name"], passed=check["passed"], detail=check.get("detail", "")
            )
        if "end_state" in trajectory:
            _set_value(out.trajectory.end_state, trajectory["end_state"])
    return out


def task_from_proto(message: pb.RunTask) -> dict[str, Any]:
    """The task dict a ``RunTask`` carries, keys in ``iter_tasks``' order."""
    task: dict[str, Any] = {
        "sample_id": message.sample_id,
        "seq": message.seq,
        "trial": message.trial,
    }
    if message.HasField("status"):
        task["status"] = message.status
    if message.HasField("output"):
        task["output"] = _json(message.output)
    task["scores"] = [
        {
            "evaluator": v.evaluator,
            "outcome": v.outcome,
            "scores": {s.name: _score_value(s) for s in v.scores},
            "reason": v.reason,
        }
        for v in message.scores
    ]
    if message.HasField("error"):
        task["error"] = message.error
    if message.HasField("trajectory"):
        t = message.trajectory
        task["trajectory"] = {
            "steps": [_step_from_proto(s) for s in t.steps],
            "stop_reason": t.stop_reason,
        }
        if t.checks:
            task["trajectory"]["checks"] = [
                Check(c.name, c.passed, c.detail).to_value() for c in t.checks
            ]
        if t.HasField("end_state"):
            task["trajectory"]["end_state"] = _json(t.end_state)
    return task


def _json(message: Any) -> Any:
    return task_json(value_from_proto(message))


def _score_value(message: Any) -> Any:
    score = score_from_proto(message)
    return task_json(score.structured) if score.kind == "structured" else score.value


def _score(name: str, value: JsonValue) -> Score:
    """A verdict's ``{name: value}`` back as a ``Score`` of the kind the value shows."""
    if isinstance(value, bool):
        return Score(name=name, passed=value)
    if isinstance(value, float):
        return Score(name=name, number=value)
    if isinstance(value, str):
        return Score(name=name, label=value)
    return Score(name=name, structured=value)  # ints and JSON stay exactly as they were


def _set_step(out: pb.TaskStep, step: dict[str, Any]) -> None:
    out.type = step["type"]
    out.name = step.get("name", "")
    if "tool" in step:
        out.tool = step["tool"]
    for key in ("arguments", "result", "input", "output"):
        if key in step:
            _set_value(getattr(out, key), step[key])
    out.error = step.get("error", "")
    if "usage" in step:
        _set_usage(out.usage, Usage(**step["usage"]))


def _step_from_proto(message: pb.TaskStep) -> dict[str, Any]:
    step: dict[str, Any] = {"type": message.type}
    if message.name:
        step["name"] = message.name
    if message.HasField("tool"):
        step["tool"] = message.tool
    for key in ("arguments", "result", "input", "output"):
        if message.HasField(key):
            step[key] = _json(getattr(message, key))
    if message.error:
        step["error"] = message.error
    if message.HasField("usage"):
        step["usage"] = _usage_from_proto(message.usage).known()
    return step
