"""The SQL store: upserts under the task key, round trips, run lookup, the writers.

The store tests run on SQLite and on PostgreSQL (``store_url``); the writer process and the
schema check through ``sqlite3`` are SQLite-only."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.core import (
    EvaluationResult,
    NotFoundError,
    Outcome,
    ResultBatch,
    Score,
    StoreError,
    Usage,
    UserError,
)
from evalsi.store import BackgroundWriter, SqlStore
from evalsi.store import _writer as writer_module
from evalsi.store._sql import OutputRow

SPEC = {
    "evaluators": [
        {"name": "em", "ref": "builtin/exact-match@1.0.0", "params": {}},
        {"name": "len", "ref": "builtin/length@1.0.0", "params": {}},
    ]
}


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite file, or a fresh PostgreSQL schema (skipped when the server is unreachable)."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    db = SqlStore.open(store_url)
    yield db
    db.close()


def batch(metric: str, n: int, start: int = 0) -> ResultBatch:
    b = ResultBatch("em", "builtin/exact-match@1.0.0", metric, [f"r{start + i}" for i in range(n)])
    for i in range(n):
        b.kind[i], b.value[i] = 2, float(i % 2)
    return b


def test_upsert_under_the_task_key_never_double_counts(store: SqlStore) -> None:
    run = store.create_run(kind="score", spec=SPEC)
    store.write_batches(run.id, [(0, 0, batch("exact-match", 10))])
    store.write_batches(run.id, [(0, 0, batch("exact-match", 10))])  # a retried batch
    store.write_batches(run.id, [(0, 5, batch("exact-match", 10, start=5))])  # overlapping
    assert store.count_results(run.id) == 15
    seqs = [seq for seq, _, _ in store.iter_results(run.id)]
    assert seqs == list(range(15))


def test_results_round_trip_through_the_columns(store: SqlStore) -> None:
    run = store.create_run(kind="score", spec=SPEC)
    results = [
        EvaluationResult(
            "a",
            "em",
            "builtin/exact-match@1.0.0",
            Outcome.SCORED,
            [Score(name="exact-match", passed=False, explanation="differs")],
        ),
        EvaluationResult(
            "b",
            "em",
            "builtin/exact-match@1.0.0",
            Outcome.SKIPPED,
            reason="record has no reference",
        ),
        EvaluationResult(
            "c", "em", "builtin/exact-match@1.0.0", Outcome.ERROR, reason="ValueError: boom"
        ),
        EvaluationResult(
            "d",
            "em",
            "builtin/exact-match@1.0.0",
            Outcome.SCORED,
            [
                Score(name="exact-match", passed=True),
                Score(name="similarity", number=0.5, confidence=0.9, cost=Usage(input_tokens=3)),
            ],
        ),
        EvaluationResult(
            "e",
            "em",
            "builtin/exact-match@1.0.0",
            Outcome.SCORED,
            [Score(name="exact-match", label="cat")],
        ),
        EvaluationResult(
            "f",
            "em",
            "builtin/exact-match@1.0.0",
            Outcome.SCORED,
            [Score(name="exact-match", structured={"k": [1, 2]})],
        ),
    ]
    store.write_batches(run.id, [(0, 0, ResultBatch.of(results, "exact-match"))])
    back = [r for _, _, r in store.iter_results(run.id)]
    for got, want in zip(back, results, strict=True):
        assert got.record_id == want.record_id
        assert got.outcome == want.outcome
        assert got.reason == want.reason
        assert got.scores == want.scores


def test_get_run_by_prefix_latest_and_errors(store: SqlStore) -> None:
    a = store.create_run(kind="score", spec=SPEC, run_id="20260101-000000-aaaaaa")
    b = store.create_run(kind="score", spec=SPEC, run_id="20260101-000000-aabbbb")
    assert store.get_run("latest").id == b.id
    assert store.get_run("20260101-000000-aaa").id == a.id
    with pytest.raises(UserError, match="ambiguous"):
        store.get_run("20260101-000000-aa")
    with pytest.raises(UserError, match="no run 'nope'"):
        store.get_run("nope")
    with pytest.raises(UserError, match="no run '20260101_%'"):
        store.get_run("20260101_%")  # LIKE wildcards are escaped, not matched
    huge = "2" * 60_000  # SQLite refuses a LIKE pattern this long: never sent, and not echoed
    with pytest.raises(NotFoundError, match=r"no run '2{80}\.\.\.'") as caught:
        store.get_run(huge)
    assert len(str(caught.value)) < 300


def test_a_running_run_whose_process_is_gone_reads_as_interrupted(store: SqlStore) -> None:
    run = store.create_run(kind="score", spec=SPEC)
    assert store.get_run(run.id).status == "running"
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE runs SET pid = 999999999")
    assert store.get_run(run.id).status == "interrupted"


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a directory"):
        SqlStore.open(tmp_path)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    SqlStore.open(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("UPDATE evalsi_meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(StoreError, match=r"written by a newer evalsi \(schema 99\); upgrade"):
        SqlStore.open(tmp_path / "s.db")


@pytest.mark.parametrize("location", [":memory:", "file"])
def test_background_writer_moves_to_a_process_on_file_stores(
    tmp_path: Path, location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "PROCESS_AFTER_BATCHES", 3)
    store = SqlStore.open(":memory:" if location == ":memory:" else tmp_path / "s.db")
    run = store.create_run(kind="score", spec=SPEC)
    with BackgroundWriter(store, run.id) as writer:
        for k in range(8):
            writer.submit([(0, k * 50, batch("exact-match", 50, start=k * 50))])
        kind = type(writer._writer).__name__
    assert kind == ("_InlineWriter" if location == ":memory:" else "_ProcessWriter")
    assert store.count_results(run.id) == 400
    results = [r for _, _, r in store.iter_results(run.id)]
    assert [r.scores[0].passed for r in results[:4]] == [False, True, False, True]


def test_writer_process_errors_reach_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "PROCESS_AFTER_BATCHES", 1)
    store = SqlStore.open(tmp_path / "s.db")
    run = store.create_run(kind="score", spec=SPEC)
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("DELETE FROM runs")  # the writer process will not find its run

    def write_many() -> None:
        with BackgroundWriter(store, run.id) as writer:
            for k in range(50):
                writer.submit([(0, k * 10, batch("exact-match", 10, start=k * 10))])

    with pytest.raises(StoreError, match="writing results failed"):
        write_many()


def test_outputs_and_results_written_together_and_read_back(store: SqlStore) -> None:
    run = store.create_run(kind="run", spec=SPEC)
    rows = [
        OutputRow(0, 0, "a", "ok", output='"x"', usage='{"input_tokens": 2}'),
        OutputRow(1, 0, "b", "infra_error", kind="timeout", error="timed out", attempts=3),
    ]
    graded = batch("exact-match", 1)
    store.write_tasks(run.id, rows, [(0, [0], graded)])
    store.write_tasks(run.id, rows[:1])  # an upsert, not a second row
    assert list(store.iter_outputs(run.id)) == rows
    assert store.output_counts(run.id) == {"ok": 1, "infra_error": 1}
    assert store.completed_tasks(run.id, evaluators=1) == {(0, 0): "a"}
    assert store.count_results(run.id) == 1


def test_runs_finish_reopen_and_list(store: SqlStore) -> None:
    run = store.create_run(kind="score", spec=SPEC, name="first")
    store.set_progress(run.id, 7)
    store.finish_run(
        run.id, status="done", records=7, summary={"m": {"mean": 0.5}}, manifest={"v": 1}
    )
    got = store.get_run(run.id)
    assert (got.status, got.records, got.summary, got.manifest) == (
        "done",
        7,
        {"m": {"mean": 0.5}},
        {"v": 1},
    )
    assert got.evaluators == SPEC["evaluators"]
    assert store.reopen_run(run.id).status == "running"
    assert [r.id for r in store.list_runs()] == [run.id]


def test_judge_cache_keeps_the_first_answer(store: SqlStore) -> None:
    assert store.judge_cache_get("k") is None
    store.judge_cache_put("k", "yes", {"input_tokens": 5})
    store.judge_cache_put("k", "no", {})
    assert store.judge_cache_get("k") == ("yes", {"input_tokens": 5})


def test_large_batches_are_chunked_under_the_parameter_limits(store: SqlStore) -> None:
    run = store.create_run(kind="score", spec=SPEC)
    assert store.write_batches(run.id, [(0, 0, batch("exact-match", 10_000))]) == 10_000
    assert store.count_results(run.id) == 10_000


def test_background_writer_thread_on_any_store(store: SqlStore) -> None:
    run = store.create_run(kind="score", spec=SPEC)
    with BackgroundWriter(store, run.id) as writer:
        for k in range(4):
            writer.submit([(0, k * 50, batch("exact-match", 50, start=k * 50))])
    assert store.count_results(run.id) == 200


def test_postgresql_urls_use_psycopg(pg_url: str) -> None:
    store = SqlStore.open(pg_url.replace("postgresql+psycopg://", "postgresql://"))
    try:
        assert store.engine.url.drivername == "postgresql+psycopg"
        assert not store.is_sqlite_file
        assert store.sqlite_path == ""
    finally:
        store.close()
