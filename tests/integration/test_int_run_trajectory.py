"""A Run grades the trajectory its target returned, never the dataset's (issue 18, part 1).

The dataset's trajectory is the reference: its tool calls are the answer key of a sample that has
no reference. A target that returns no trajectory leaves none to grade, so agent evaluators skip
rather than silently grade the dataset's steps (the bug this pins). The trajectory is stored with
the output, so grading the Run again reads the agent's steps back.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from evalsi.connectors import TargetOutput
from evalsi.core import Content, Outcome, Step, ToolCall, Trajectory, Usage
from evalsi.runs import grade_run
from evalsi.runs._execute import execute_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS

# What each sample's dataset line says the agent should do (its trajectory: the reference).
KNOWN_GOOD = {
    "t0": [("search", {"q": "paris"}), ("book", {"city": "paris"})],
    "t1": [("search", {"q": "rome"})],
    "t2": [("search", {"q": "oslo"}), ("book", {"city": "oslo"})],
}


def agent(question: str) -> TargetOutput:
    """Does t0 right, t1 with a wrong argument, t2 without booking; stops on its answer."""
    city = question.split()[-1]
    calls = {
        "t0": [("search", {"q": "paris"}), ("book", {"city": "paris"})],
        "t1": [("search", {"q": "milan"})],
        "t2": [("search", {"q": "oslo"})],
    }[question.split()[0]]
    steps = [Step("llm_call", "stub-model", usage=Usage(input_tokens=5, output_tokens=2))]
    steps += [
        Step("tool_call", n, tool_call=ToolCall(n, args, f"c{i}"))
        for i, (n, args) in enumerate(calls)
    ]
    return TargetOutput(
        output=Content.of_text(f"done: {city}"),
        usage=Usage(input_tokens=5, output_tokens=2),
        trajectory=Trajectory(steps, stop_reason="final_answer"),
    )


def plain(question: str) -> str:
    """A target that answers without any trajectory."""
    return "done"


def _data(path: Path, with_reference: bool = False) -> Path:
    lines = []
    for sid, calls in KNOWN_GOOD.items():
        row: dict[str, object] = {
            "id": sid,
            "input": f"{sid} trip to {calls[0][1]['q']}",
            "trajectory": [
                {"kind": "tool_call", "tool_call": {"name": n, "arguments": a}} for n, a in calls
            ],
        }
        if with_reference:
            row["reference"] = {"tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}
        lines.append(orjson.dumps(row))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _spec(ref: str, data: Path, *evaluators: str) -> RunSpec:
    return RunSpec(
        name="agent",
        target=TargetSpec(kind="python", python=f"{__name__}:{ref}"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=tuple(EvaluatorEntry(ref=e) for e in evaluators),
    )


def _by_record(db: SqlStore, run_id: str, evaluator: str) -> dict[str, tuple[Outcome, object]]:
    """Each record's outcome and primary score (the one named after the evaluator)."""
    return {
        r.record_id: (r.outcome, next((s.value for s in r.scores if s.name == evaluator), None))
        for _, _, r in db.iter_results(run_id)
        if r.evaluator == evaluator
    }


def test_a_run_grades_the_targets_trajectory_against_the_datasets(tmp_path: Path) -> None:
    data = _data(tmp_path / "trips.jsonl")
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(
        execute_run(
            _spec("agent", data, "tool-call-accuracy", "trajectory-match"),
            store=db,
            registry=BUILTINS,
        )
    )
    assert result.tasks == {"ok": 3}
    accuracy = _by_record(db, result.run_id, "tool-call-accuracy")
    # the agent's calls against the dataset's: right, wrong argument, one of two
    assert accuracy == {
        "t0": (Outcome.SCORED, 1.0),
        "t1": (Outcome.SCORED, 0.0),
        "t2": (Outcome.SCORED, 0.5),
    }
    match = _by_record(db, result.run_id, "trajectory-match")
    assert {k: v[1] for k, v in match.items()} == {"t0": True, "t1": True, "t2": False}
    # stored with the output, stop reason included
    rows = {r.record_id: r for r in db.iter_outputs(result.run_id)}
    stored = orjson.loads(rows["t2"].trajectory or "null")
    assert stored["stop_reason"] == "final_answer"
    assert [s["kind"] for s in stored["steps"]] == ["llm_call", "tool_call"]
    # grading again reads the agent's steps back, not the dataset's
    again = asyncio.run(grade_run(db, result.run_id, ["tool-call-accuracy"], registry=BUILTINS))
    assert _by_record(db, again.run_id, "tool-call-accuracy") == accuracy
    db.close()


def test_a_target_without_a_trajectory_is_never_graded_on_the_datasets(tmp_path: Path) -> None:
    data = _data(tmp_path / "trips.jsonl")
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(
        execute_run(
            _spec("plain", data, "tool-call-accuracy", "loop-detection"),
            store=db,
            registry=BUILTINS,
        )
    )
    # Before the fix loop-detection scored the dataset's steps as the agent's (all passed).
    for evaluator in ("tool-call-accuracy", "loop-detection"):
        got = _by_record(db, result.run_id, evaluator)
        assert {o for o, _ in got.values()} == {Outcome.SKIPPED}, evaluator
    assert all(r.trajectory is None for r in db.iter_outputs(result.run_id))
    db.close()


def test_a_samples_own_reference_wins_over_its_trajectory(tmp_path: Path) -> None:
    data = _data(tmp_path / "trips.jsonl", with_reference=True)
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(
        execute_run(_spec("agent", data, "tool-call-accuracy"), store=db, registry=BUILTINS)
    )
    got = _by_record(db, result.run_id, "tool-call-accuracy")
    # reference: one search for "x"; t0 and t2 call search with another q, t1 too
    assert {k: v for k, (_, v) in got.items()} == {"t0": 0.0, "t1": 0.0, "t2": 0.0}
    db.close()
