"""``save_run``: a finished run and its results in one transaction, read back exactly as the
same run written with ``create_run`` + ``write_batches`` + ``finish_run``; all or nothing; safe
from several threads. On SQLite and on PostgreSQL."""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import ResultBatch, StoreError, UserError
from evalsi.store import SqlStore

SPEC: dict[str, Any] = {
    "evaluators": [
        {"name": "em", "ref": "builtin/exact-match@1.0.0", "params": {}},
        {"name": "c", "ref": "builtin/contains@1.0.0", "params": {"substring": "é"}},
    ],
    "gates": ["metric('em').mean > 0.5"],
}
SUMMARY: dict[str, Any] = {"metrics": [{"mean": 0.5, "ci": [None, 1.0]}], "gates": [], "n": "ü"}
MANIFEST: dict[str, Any] = {"seed": 0, "evaluators": [], "nested": {"a": [1, 2.5, True]}}


@pytest.fixture(params=["sqlite", "postgresql", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        url = str(tmp_path / "s.db")
    elif request.param == "memory":
        url = ":memory:"
    else:
        url = str(request.getfixturevalue("pg_url"))
    db = SqlStore.open(url)
    yield db
    db.close()


def batch(n: int, *, start: int = 0, evaluator: str = "em") -> ResultBatch:
    b = ResultBatch(
        evaluator, f"builtin/{evaluator}@1.0.0", evaluator, [f"r{start + i}" for i in range(n)]
    )
    for i in range(n):
        b.kind[i], b.value[i] = 2, float(i % 2)
    b.text[0] = "why"
    return b


BATCHES = [(0, 0, batch(3)), (1, 0, batch(3, evaluator="c")), (1, -1, batch(1, evaluator="c"))]


def _comparable(store: SqlStore, run_id: str) -> tuple[dict[str, Any], list[Any]]:
    info = dataclasses.asdict(store.get_run(run_id))
    for key in ("id", "created_at", "finished_at", "heartbeat_at"):
        info.pop(key)
    return info, list(store.iter_results(run_id))


def test_a_saved_run_reads_back_like_one_written_step_by_step(store: SqlStore) -> None:
    saved = store.save_run(
        kind="score", spec=SPEC, name="nightly", status="done", records=3, summary=SUMMARY,
        manifest=MANIFEST, batches=BATCHES,
    )  # fmt: skip
    stepped = store.create_run(kind="score", spec=SPEC, name="nightly").id
    store.write_batches(stepped, BATCHES)
    store.finish_run(stepped, status="done", records=3, summary=SUMMARY, manifest=MANIFEST)
    assert _comparable(store, saved) == _comparable(store, stepped)
    info = store.get_run(saved)
    assert (info.status, info.name, info.records, info.summary) == ("done", "nightly", 3, SUMMARY)
    assert info.finished_at is not None
    assert info.finished_at >= info.created_at
    assert store.count_results(saved) == 7
    assert store.list_runs(limit=1)[0].id == stepped  # newest first: ids and times are real
    assert store.count_runs_by_status()["done"] == 2


def test_a_failed_run_is_saved_without_results(store: SqlStore) -> None:
    run_id = store.save_run(
        kind="score", spec=SPEC, status="failed", records=0, summary=None, manifest=None,
        error="boom",
    )  # fmt: skip
    info = store.get_run(run_id)
    assert (info.status, info.error, info.summary, info.manifest) == ("failed", "boom", None, None)
    assert store.count_results(run_id) == 0


def test_nothing_is_stored_when_a_batch_cannot_be_written(store: SqlStore) -> None:
    def batches() -> Iterator[tuple[int, int, ResultBatch]]:
        yield (0, 0, batch(2))
        raise RuntimeError("the grader broke half way")

    with pytest.raises(StoreError, match="the grader broke half way"):
        store.save_run(
            kind="score", spec=SPEC, status="done", records=2, summary=SUMMARY, manifest=None,
            batches=batches(), run_id="half",
        )  # fmt: skip
    assert store.list_runs() == []
    # The connection went back clean: the next save works.
    run_id = store.save_run(
        kind="score", spec=SPEC, status="done", records=3, summary=SUMMARY, manifest=None,
        batches=BATCHES[:1],
    )  # fmt: skip
    assert store.count_results(run_id) == 3


def test_bad_arguments_are_refused_before_anything_is_written(store: SqlStore) -> None:
    with pytest.raises(UserError, match="status 'odd'"):
        store.save_run(
            kind="score", spec=SPEC, status="odd", records=0, summary=None, manifest=None
        )
    with pytest.raises(UserError, match="project_id"):
        store.save_run(
            kind="score", spec=SPEC, status="done", records=0, summary=None, manifest=None,
            project_id="no spaces",
        )  # fmt: skip
    taken = store.save_run(
        kind="score", spec=SPEC, status="done", records=0, summary=None, manifest=None
    )
    with pytest.raises(StoreError):  # the id is unique
        store.save_run(
            kind="score", spec=SPEC, status="done", records=0, summary=None, manifest=None,
            run_id=taken,
        )  # fmt: skip
    assert len(store.list_runs()) == 1


def test_saves_from_several_threads_at_once(store: SqlStore) -> None:
    if store.location == ":memory:":
        assert not store.any_thread  # its one connection belongs to the opening thread
        return
    assert store.any_thread
    ids: list[str] = []
    errors: list[BaseException] = []

    def save(worker: int) -> None:
        try:
            for i in range(10):
                ids.append(
                    store.save_run(
                        kind="score",
                        spec=SPEC,
                        status="done",
                        records=50,
                        summary=SUMMARY,
                        manifest=None,
                        batches=[(0, 0, batch(50, start=worker * 1000 + i))],
                    )
                )
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=save, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(ids)) == 40
    assert all(store.count_results(i) == 50 for i in ids)


def test_json_values_round_trip_as_the_sqlalchemy_path_writes_them(store: SqlStore) -> None:
    if store.engine.dialect.name == "postgresql":
        pytest.skip("PostgreSQL's json type has no NaN (neither path can store one)")
    summary = {"metrics": [{"std": math.nan, "mean": math.inf}]}
    saved = store.save_run(
        kind="score", spec=SPEC, status="done", records=0, summary=summary, manifest=None
    )
    info = store.get_run(saved).summary
    assert info is not None
    assert math.isnan(info["metrics"][0]["std"])
    assert info["metrics"][0]["mean"] == math.inf
