"""Promotion from a run (rows, ids, provenance, filters, bounds) and shadow replay (the recorded
run, the candidate run, regressions and exit codes), over Python targets in a SQLite store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from evalsi.core import DatasetError, UserError
from evalsi.runs import execute_run
from evalsi.runs._promote import PromoteStats, promote_run, row_id
from evalsi.runs._shadow import candidate_inputs, check_rows, shadow_async
from evalsi.specs import RunSpec, run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS

# The target answers by a table; the reference says what is right.
GOOD = {f"q{i}": f"a{i}" for i in range(40)}


def perfect(text: str) -> str:
    return GOOD.get(text, "?")


def odd_wrong(text: str) -> str:
    """Wrong on every odd question: the production behaviour to promote."""
    n = int(text[1:])
    return "wrong" if n % 2 else GOOD[text]


def always_wrong(text: str) -> str:
    return "wrong"


def boom(text: str) -> str:
    raise RuntimeError("target down")


def _spec(tmp: Path, target: str, rows: list[dict[str, Any]], trials: int = 1) -> RunSpec:
    (tmp / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_spec_from_yaml(
        f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: qa}}
spec:
  target: {{python: "{__name__}:{target}"}}
  dataset: {{path: data.jsonl}}
  trials: {trials}
  evaluators: [{{ref: exact-match}}]
""",
        base_dir=tmp,
    )


ROWS = [
    {"id": f"s{i}", "input": f"q{i}", "reference": f"a{i}", "metadata": {"n": i}} for i in range(40)
]


def _run(tmp: Path, target: str, rows: list[dict[str, Any]] = ROWS, trials: int = 1) -> Any:
    db = SqlStore.open(tmp / "s.db")
    result = asyncio.run(execute_run(_spec(tmp, target, rows, trials), store=db, registry=BUILTINS))
    return db, result.run_id


def _promote(db: SqlStore, run_id: str, **kw: Any) -> list[dict[str, Any]]:
    return list(promote_run(db, run_id, clock=lambda: 1_700_000_000.0, **kw))


def _write(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


# -- promotion ----------------------------------------------------------------------------------


def test_failing_tasks_become_rows_with_their_behaviour_and_provenance(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "odd_wrong")
    rows = _promote(db, run_id)
    assert [r["id"] for r in rows] == [f"s{i}" for i in range(1, 40, 2)]
    first = rows[0]
    assert first["input"] == "q1"
    assert first["reference"] == "a1"
    assert first["output"] == "wrong"
    promoted = first["metadata"].pop("promoted")
    assert first["metadata"] == {"n": 1}
    assert promoted == {
        "format": 1,
        "from": "run",
        "run_id": run_id,
        "sample_id": "s1",
        "trial": 0,
        "reasons": [
            {
                "evaluator": "exact-match",
                "metric": "exact-match",
                "outcome": "failed",
                "detail": promoted["reasons"][0]["detail"],
            }
        ],
        "at": "2023-11-14T22:13:20+00:00",
    }
    assert promoted["reasons"][0]["detail"]  # the evaluator's own explanation


def test_all_tasks_limit_and_stats(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "odd_wrong")
    assert len(_promote(db, run_id, failing_only=False)) == 40
    stats = PromoteStats()
    rows = _promote(db, run_id, limit=3, stats=stats)
    assert [r["id"] for r in rows] == ["s1", "s3", "s5"]
    assert stats.rows == 3
    assert stats.seen == 6  # the scan stopped at the limit
    with pytest.raises(UserError, match="--limit"):
        _promote(db, run_id, limit=0)


def test_a_run_that_passes_everything_promotes_nothing(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "perfect")
    assert _promote(db, run_id) == []


def test_a_target_error_is_failing_with_its_reason(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "boom", ROWS[:2])
    rows = _promote(db, run_id)
    assert [r["id"] for r in rows] == ["s0", "s1"]
    reason = rows[0]["metadata"]["promoted"]["reasons"][0]
    assert reason["outcome"] == "error"
    assert "target down" in reason["detail"]


def test_trials_get_their_own_ids_or_only_the_first(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "always_wrong", ROWS[:2], trials=3)
    ids = [r["id"] for r in _promote(db, run_id)]
    assert (
        ids
        == ["s0", "s0#1", "s0#2", "s1", "s1#1", "s1#2"]
        == [row_id(s, t) for s in ("s0", "s1") for t in range(3)]
    )
    first = _promote(db, run_id, trials="first")
    assert [r["id"] for r in first] == ["s0", "s1"]


def test_a_repeated_sample_id_is_promoted_once(tmp_path: Path) -> None:
    rows = [{**ROWS[1], "id": "dup"}, {**ROWS[3], "id": "dup"}]
    db, run_id = _run(tmp_path, "odd_wrong", rows)
    stats = PromoteStats()
    assert [r["id"] for r in _promote(db, run_id, stats=stats)] == ["dup"]
    assert stats.skipped_duplicates == 1


def test_unknown_evaluator_and_a_score_run_are_refused(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "odd_wrong")
    with pytest.raises(UserError, match="no such evaluator"):
        _promote(db, run_id, evaluators=["nope"])
    assert len(_promote(db, run_id, evaluators=["exact-match"])) == 20
    import evalsi

    score = evalsi.evaluate([{"output": "a", "reference": "b"}], ["exact-match"], store=db)
    with pytest.raises(UserError, match="score run"):
        _promote(db, score.run_id)


def test_promoted_rows_grade_back_as_what_was_recorded(tmp_path: Path) -> None:
    import evalsi

    db, run_id = _run(tmp_path, "odd_wrong")
    path = _write(tmp_path / "rows.jsonl", _promote(db, run_id))
    again = evalsi.evaluate(path, ["exact-match"], store=db)
    assert again.metric("exact-match").n == 20
    assert again.metric("exact-match").mean == 0.0


# -- shadow -------------------------------------------------------------------------------------


def _shadow(tmp: Path, db: SqlStore, target: str, rows: str, **kw: Any) -> Any:
    async def execute(spec: RunSpec, store: SqlStore) -> Any:
        return await execute_run(spec, store=store, registry=BUILTINS)

    return asyncio.run(
        shadow_async(
            _spec(tmp, target, ROWS),
            rows,
            execute=execute,
            registry=BUILTINS,
            store=db,
            inputs_dir=tmp / "inputs",
            **kw,
        )
    )


def test_a_better_candidate_improves_and_exits_0(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "odd_wrong")
    rows = _write(tmp_path / "rows.jsonl", _promote(db, run_id, failing_only=False))
    result = _shadow(tmp_path, db, "perfect", rows)
    m = result.comparison.metric("exact-match")
    assert (m.n_paired, m.mean_a, m.mean_b, m.verdict) == (40, 0.5, 1.0, "improved")
    assert result.regressions == []
    assert result.exit_code == 0
    doc = result.to_dict()
    assert doc["recorded_run"] == result.recorded_run != doc["candidate_run"]
    assert doc["regressions"] == []


def test_a_candidate_equal_to_the_recording_is_no_regression(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "odd_wrong")
    rows = _write(tmp_path / "rows.jsonl", _promote(db, run_id, failing_only=False))
    result = _shadow(tmp_path, db, "odd_wrong", rows)
    m = result.comparison.metric("exact-match")
    assert m.delta == 0.0
    assert m.verdict == "no significant change"
    assert result.exit_code == 0


def test_a_worse_candidate_regresses_with_the_paired_statistics(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "perfect")
    rows = _write(tmp_path / "rows.jsonl", _promote(db, run_id, failing_only=False))
    result = _shadow(tmp_path, db, "odd_wrong", rows)
    assert result.exit_code == 1
    (reg,) = result.to_dict()["regressions"]
    assert reg["delta"] == -0.5
    assert reg["ci"][1] < 0
    m = result.comparison.metric("exact-match")
    # the same pairs, computed directly: 20 of 40 went from pass to fail, none the other way
    recorded = np.ones(40)
    candidate = np.array([0.0 if i % 2 else 1.0 for i in range(40)])
    assert m.delta == pytest.approx(float(np.mean(candidate - recorded)))
    table = [
        [
            int(np.sum((recorded == 1) & (candidate == 1))),
            int(np.sum((recorded == 1) & (candidate == 0))),
        ],
        [
            int(np.sum((recorded == 0) & (candidate == 1))),
            int(np.sum((recorded == 0) & (candidate == 0))),
        ],
    ]
    direct = sm_mcnemar(table, exact=True)
    assert m.mcnemar is not None
    assert m.mcnemar.p_value == pytest.approx(direct.pvalue)


def test_one_row_is_insufficient_data_not_a_regression(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "perfect")
    rows = _write(tmp_path / "rows.jsonl", _promote(db, run_id, failing_only=False, limit=1))
    result = _shadow(tmp_path, db, "always_wrong", rows)
    assert result.comparison.metric("exact-match").verdict == "insufficient data"
    assert result.exit_code == 0


def test_all_fail_on_both_sides_is_no_change(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "always_wrong")
    rows = _write(tmp_path / "rows.jsonl", _promote(db, run_id))
    result = _shadow(tmp_path, db, "always_wrong", rows)
    assert result.comparison.metric("exact-match").mean_a == 0.0
    assert result.exit_code == 0


def test_no_rows_and_repeated_ids_are_refused(tmp_path: Path) -> None:
    empty = _write(tmp_path / "empty.jsonl", [])
    with pytest.raises(UserError, match="no rows"):
        check_rows(empty)
    dup = _write(tmp_path / "dup.jsonl", [{"id": "x", "input": "q1"}, {"id": "x", "input": "q2"}])
    with pytest.raises(UserError, match="repeats"):
        check_rows(dup)


def test_a_candidate_that_fails_on_the_rows_is_a_regression(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "perfect")
    rows = _write(tmp_path / "rows.jsonl", _promote(db, run_id, failing_only=False, limit=5))
    result = _shadow(tmp_path, db, "boom", rows)  # nothing scored: no metric can pair them
    assert result.comparison.metrics == [] or result.regressions == []
    assert result.target_errors == 5
    assert result.exit_code == 1
    assert result.to_dict()["regressions"] == [{"metric": "target_error", "count": 5}]


def test_the_candidates_samples_never_carry_the_recorded_behaviour(tmp_path: Path) -> None:
    db, run_id = _run(tmp_path, "odd_wrong")
    rows = _write(tmp_path / "rows.jsonl", _promote(db, run_id, failing_only=False))
    result = _shadow(tmp_path, db, "perfect", rows)
    (inputs,) = (tmp_path / "inputs").iterdir()
    again = _shadow(tmp_path, db, "perfect", rows)  # the same rows: the same inputs file
    assert [p.name for p in (tmp_path / "inputs").iterdir()] == [inputs.name]
    assert again.rows == result.rows == 40
    for line in inputs.read_text().splitlines():
        row = json.loads(line)
        assert not set(row) & {"output", "trajectory", "usage"}
        assert set(row["metadata"]) == {"n", "promoted"}  # provenance kept
    # what the candidate's samples held, read back through its stored run
    samples = list(promote_run(db, result.candidate_run, failing_only=False))
    assert len(samples) == 40
    for sample in samples:
        assert set(sample["metadata"]) == {"n", "promoted"}
        assert sample["output"] == sample["reference"]  # the candidate's own answer


def test_a_row_whose_metadata_holds_recorded_keys_is_stripped_too(tmp_path: Path) -> None:
    rows = _write(
        tmp_path / "rows.jsonl",
        [
            {
                "id": "a",
                "input": "q1",
                "output": "old",
                "usage": {"input_tokens": 3},
                "metadata": {"output": "leak", "keep": 1},
            }
        ],
    )
    path = candidate_inputs(rows, tmp_path / "inputs")
    (row,) = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert row == {"id": "a", "input": "q1", "metadata": {"keep": 1}}


def test_step_times_cross_the_wire_as_strings_and_read_back_as_ints(tmp_path: Path) -> None:
    from evalsi.datasets import open_dataset
    from evalsi.runs import wire_safe
    from evalsi.wire import struct_to_proto

    big = 1_796_284_368_903_806_028  # a time in ns: past 2**53
    step = {"kind": "llm_call", "name": "m", "start_time_unix_nano": big}
    for trajectory in ({"steps": [step]}, [step]):  # a run's form and a trace record's
        row = {"id": "r", "input": "q", "trajectory": trajectory}
        with pytest.raises(ValueError, match="2\\*\\*53"):
            struct_to_proto(row)
        safe = wire_safe(row)
        struct_to_proto(safe)  # now a Struct holds it
        path = _write(tmp_path / "one.jsonl", [safe])
        (record,) = next(iter(open_dataset(path).iter_batches(10)))
        assert record.trajectory is not None
        assert record.trajectory.steps[0].start_time_unix_nano == big
    assert wire_safe({"id": "x"}) == {"id": "x"}
    bad = _write(
        tmp_path / "bad.jsonl",
        [{"id": "b", "trajectory": [{**step, "start_time_unix_nano": "-1"}]}],
    )
    with pytest.raises(DatasetError, match="start_time_unix_nano"):
        list(open_dataset(bad).iter_batches(10))
