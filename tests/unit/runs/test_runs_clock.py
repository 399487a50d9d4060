"""The engine is handed its clock: a Score run, a Run and a grade of it record when they were
created and ended, and how long they took, from the clock the caller gives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from evalsi.runs import execute_run, grade_run, score_async
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS


class Ticks:
    """Unix seconds that advance 10 s per reading, from 2001-09-09."""

    def __init__(self) -> None:
        self.now = 1_000_000_000.0

    def __call__(self) -> float:
        self.now += 10.0
        return self.now


def echo(question: str) -> str:
    return question


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    rows = [
        {"id": str(i), "input": f"q{i}", "output": f"q{i}", "reference": f"q{i}"} for i in range(3)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _times(store: SqlStore, run_id: str) -> tuple[float, float | None]:
    info = store.get_run(run_id)
    return info.created_at, info.finished_at


def test_score_run_and_grade_take_their_times_from_the_clock(tmp_path: Path) -> None:
    data, db = _data(tmp_path), tmp_path / "s.db"
    clock = Ticks()
    scored = asyncio.run(
        score_async(data, ["exact-match"], store=db, registry=BUILTINS, clock=clock)
    )
    spec = RunSpec(
        name="clocked",
        target=TargetSpec(kind="python", python=f"{__name__}:echo"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
    )
    ran = asyncio.run(execute_run(spec, store=db, registry=BUILTINS, clock=clock))
    graded = asyncio.run(grade_run(db, ran.run_id, ["exact-match"], registry=BUILTINS, clock=clock))
    store = SqlStore.open(db)
    try:
        stamps = [_times(store, r) for r in (scored.run_id, ran.run_id, graded.run_id)]
        assert all(1_000_000_000 < c < f <= clock.now for c, f in stamps if f is not None)
        assert [f for _, f in stamps] == sorted(f for _, f in stamps if f is not None)
        for run_id in (ran.run_id, graded.run_id):  # spend: whole ticks of the clock
            seconds = (store.get_run(run_id).summary or {})["spend"]["seconds"]
            assert seconds > 0
            assert seconds % 10 == 0
    finally:
        store.close()
