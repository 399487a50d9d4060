"""Execute and grade apart: ``execute_only`` stores outputs, ``grade_run`` grades them into a new
run without calling the target, and ``rerun_run`` replays a run from the spec it stored."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from pathlib import Path

import pytest

from evalsi.core import UserError
from evalsi.runs import grade_run, rerun_run, stored_spec
from evalsi.runs._execute import execute_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from tests.integration.run_support import fast_retries, model_spec, write_qa
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, Fault, StubLLM

_CALLS = {"n": 0}
_LOCK = threading.Lock()


def counted_answer(question: str) -> str:
    """Right for 2 of 3 questions, raises for every fifth: deterministic, and counts its calls."""
    with _LOCK:
        _CALLS["n"] += 1
    i = int(question[1:])
    if i % 5 == 4:
        raise ValueError(f"cannot answer {question}")
    return f"a{i}" if i % 3 else f"A{i} maybe"


def _spec(data: Path, *, trials: int = 3, evaluators: tuple[str, ...] = ()) -> RunSpec:
    return RunSpec(
        name="grade-it",
        target=TargetSpec(
            kind="python", python="tests.integration.test_int_run_grade:counted_answer"
        ),
        dataset=DatasetSpec(source=str(data)),
        evaluators=tuple(EvaluatorEntry(ref=e) for e in evaluators)
        or (
            EvaluatorEntry(ref="exact-match"),
            EvaluatorEntry(ref="contains", params={"values": ["a"]}),
        ),
        trials=trials,
        max_concurrency=4,
        seed=3,
    )


def _figures(result: object) -> list[dict[str, object]]:
    return list(result.to_dict()["metrics"])  # type: ignore[attr-defined]


def test_execute_only_then_grade_matches_a_one_shot_run(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 15)
    spec = _spec(data)
    db = tmp_path / "s.db"
    executed = asyncio.run(execute_run(spec, store=db, execute_only=True, registry=BUILTINS))
    assert executed.status == "done"
    assert executed.metrics == []
    assert executed.tasks == {"ok": 36, "target_error": 9}
    store = SqlStore.open(db)
    info = store.get_run(executed.run_id)
    assert (info.kind, info.status, info.spec["graded"], info.spec["evaluators"]) == (
        "run", "done", False, []
    )  # fmt: skip
    assert info.summary is not None
    assert info.summary["graded"] is False
    assert store.count_results(executed.run_id) == 0

    before = _CALLS["n"]
    graded = asyncio.run(
        grade_run(
            db,
            executed.run_id,
            ["exact-match", "contains"],
            params={"contains": {"values": ["a"]}},
            registry=BUILTINS,
        )
    )
    assert _CALLS["n"] == before  # the target is never called
    one_shot = asyncio.run(execute_run(spec, store=tmp_path / "one.db", registry=BUILTINS))
    assert graded.run_id != executed.run_id
    assert _figures(graded) == _figures(one_shot)
    assert graded.tasks == one_shot.tasks == {"ok": 36, "target_error": 9}
    m = graded.metric("exact-match")
    assert (m.n, m.errors) == (36, 9)
    assert m.pass_at_k == one_shot.metric("exact-match").pass_at_k
    assert set(m.pass_at_k) == {"1", "2", "3"}

    g = store.get_run(graded.run_id)
    assert g.kind == "grade"
    assert g.status == "done"
    assert g.spec["source_run"] == executed.run_id
    assert g.manifest is not None
    assert g.manifest["source_run"]["id"] == executed.run_id
    assert g.manifest["source_run"]["dataset_version"] == executed.dataset_version
    assert executed.dataset_version is not None


def test_grade_with_another_evaluator_set_and_a_gate(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 6)
    db = tmp_path / "s.db"
    executed = asyncio.run(
        execute_run(_spec(data, trials=1), store=db, execute_only=True, registry=BUILTINS)
    )
    result = asyncio.run(
        grade_run(
            db,
            executed.run_id,
            [{"ref": "exact-match", "params": {"ignore_case": True}, "name": "em-ci"}],
            gates=["metric('em-ci').mean >= 0.5"],
            max_evaluator_error_rate=0.5,  # one target error in six
            registry=BUILTINS,
        )
    )
    m = result.metric("em-ci")
    assert (m.n, m.errors) == (5, 1)
    assert m.mean == pytest.approx(3 / 5)  # s0 and s3 answer "A0 maybe": wrong either way
    assert result.gates[0]["verdict"] == "passed"
    assert result.exit_code == 0
    again = asyncio.run(
        grade_run(db, executed.run_id, ["length"], registry=BUILTINS)
    )  # graded runs can be regraded
    assert again.metric("length").n == 5


def test_infra_errors_of_the_source_are_counted_never_graded(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 4)
    answers = {f"q{i}": f"a{i}" for i in range(4)}
    with StubLLM(answers=answers) as stub:
        stub.schedule(Fault(status=500), Fault(status=502), path=OPENAI_PATH)
        spec = model_spec(stub.openai_url, data, concurrency=1)
        executed = asyncio.run(
            execute_run(
                spec,
                store=tmp_path / "s.db",
                resilience=fast_retries(2),
                execute_only=True,
                registry=BUILTINS,
            )
        )
        calls = stub.calls(OPENAI_PATH)
        graded = asyncio.run(
            grade_run(tmp_path / "s.db", executed.run_id, ["exact-match"], registry=BUILTINS)
        )
        assert stub.calls(OPENAI_PATH) == calls
    assert executed.tasks == {"ok": 3, "infra_error": 1}
    m = graded.metric("exact-match")
    assert (m.n, m.mean, m.errors, m.infra_errors) == (3, 1.0, 0, 1)
    assert graded.tasks == {"ok": 3, "infra_error": 1}


def test_bad_source_and_changed_dataset_are_clear_errors(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 5)
    db = tmp_path / "s.db"
    executed = asyncio.run(
        execute_run(_spec(data, trials=1), store=db, execute_only=True, registry=BUILTINS)
    )
    with pytest.raises(UserError, match="no run 'nope'"):
        asyncio.run(grade_run(db, "nope", ["exact-match"], registry=BUILTINS))
    score = SqlStore.open(db).create_run(kind="score", spec={"evaluators": []})
    with pytest.raises(UserError, match="is a score run"):
        asyncio.run(grade_run(db, score.id, ["exact-match"], registry=BUILTINS))
    write_qa(data, 6)  # one more sample: another version
    with pytest.raises(UserError, match="changed since run"):
        asyncio.run(grade_run(db, executed.run_id, ["exact-match"], registry=BUILTINS))
    kinds = [r.kind for r in SqlStore.open(db).list_runs()]
    assert "grade" not in kinds  # nothing half made


def test_execute_only_resume_redoes_only_the_missing_tasks(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 10)
    db = tmp_path / "s.db"
    spec = _spec(data, trials=2)
    executed = asyncio.run(execute_run(spec, store=db, execute_only=True, registry=BUILTINS))
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM outputs WHERE seq >= 6")
    before = _CALLS["n"]
    resumed = asyncio.run(execute_run(spec, store=db, resume=executed.run_id, registry=BUILTINS))
    assert _CALLS["n"] - before == 8
    assert resumed.run_id == executed.run_id
    assert resumed.tasks == executed.tasks == {"ok": 16, "target_error": 4}
    assert resumed.metrics == []
    assert SqlStore.open(db).count_results(executed.run_id) == 0
    graded = asyncio.run(execute_run(spec, store=tmp_path / "one.db", registry=BUILTINS))
    with pytest.raises(UserError, match="cannot be resumed with --execute-only"):
        asyncio.run(
            execute_run(
                spec,
                store=tmp_path / "one.db",
                resume=graded.run_id,
                execute_only=True,
                registry=BUILTINS,
            )
        )


def test_rerun_makes_a_new_run_with_equal_figures(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 9)
    db = tmp_path / "s.db"
    spec = dataclasses.replace(_spec(data, trials=2), gates=("metric('exact-match').mean >= 0.1",))
    first = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    info = SqlStore.open(db).get_run(first.run_id)
    assert stored_spec(info).spec_hash == spec.spec_hash
    before = _CALLS["n"]
    again = asyncio.run(rerun_run(db, first.run_id, registry=BUILTINS))
    assert _CALLS["n"] - before == 18
    assert again.run_id != first.run_id
    assert _figures(again) == _figures(first)
    assert again.gates == first.gates
    executed = asyncio.run(execute_run(spec, store=db, execute_only=True, registry=BUILTINS))
    replayed = asyncio.run(rerun_run(db, executed.run_id, registry=BUILTINS))
    assert replayed.metrics == []
    assert replayed.tasks == executed.tasks
    graded = asyncio.run(grade_run(db, executed.run_id, ["exact-match"], registry=BUILTINS))
    regraded = asyncio.run(rerun_run(db, graded.run_id, registry=BUILTINS))
    assert regraded.run_id != graded.run_id
    assert _figures(regraded) == _figures(graded)
