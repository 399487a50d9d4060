"""Migration 8 (the reviews table) and review rows, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from evalsi.core import UserError
from evalsi.store import Review, SqlStore, read_reviews, save_reviews
from evalsi.store import _migrations as migrations_module
from evalsi.store._migrations import MIGRATIONS
from evalsi.store._schema import SCHEMA_VERSION, reviews

SPEC = {
    "evaluators": [
        {"name": "em", "ref": "builtin/exact-match@1.0.0", "params": {}},
        {"name": "has", "ref": "builtin/contains@1.0.0", "params": {"values": ["o"]}},
    ]
}


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def engine(store_url: str) -> Iterator[sa.Engine]:
    url = store_url if "://" in store_url else f"sqlite:///{store_url}"
    eng = sa.create_engine(url)
    yield eng
    eng.dispose()


def _review(run_id: str, seq: int, reviewer: str, **changes: object) -> Review:
    values: dict[str, object] = {
        "run_id": run_id,
        "seq": seq,
        "trial": 0,
        "evaluator": 1,
        "record_id": f"r{seq}",
        "reviewer": reviewer,
        "approval": "approved",
        "verdict": None,
        "rationale": "checked by hand",
        "fingerprint": "sha256:" + "0" * 64,
        "imported_at": 1.0,
    }
    values.update(changes)
    return Review(**values)  # type: ignore[arg-type]


def _old_run(engine: sa.Engine) -> Any:
    import json

    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO runs (id, name, kind, status, created_at, records, spec) "
            "VALUES ('20260101-000000-bbbbbb', 'before', 'score', 'done', 1.0, 1, "
            f"'{json.dumps(SPEC)}')"
        )
        pk = conn.exec_driver_sql("SELECT pk FROM runs").scalar_one()
        conn.exec_driver_sql(
            f"INSERT INTO results VALUES ({pk}, 0, 0, 0, 'r0', 1, 2, 1.0, NULL, NULL)"
        )
    return type("Old", (), {"id": "20260101-000000-bbbbbb"})


def test_a_version_7_store_gains_the_reviews_table(
    store_url: str, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:  # the evalsi before this migration
        m.setattr(migrations_module, "SCHEMA_VERSION", 7)
        m.setattr(migrations_module, "MIGRATIONS", MIGRATIONS[:7])
        SqlStore.open(store_url).close()
    # What that evalsi wrote: a run and one result (raw SQL: today's code writes columns, such
    # as runs.created_by, that a version-7 store does not have).
    run = _old_run(engine)
    assert not sa.inspect(engine).has_table("reviews")
    store = SqlStore.open(store_url)
    try:
        assert store.migrations_applied == list(range(8, SCHEMA_VERSION + 1))
        inspector = sa.inspect(engine)
        assert {c["name"] for c in inspector.get_columns("reviews")} == set(reviews.columns.keys())
        key = inspector.get_pk_constraint("reviews")["constrained_columns"]
        assert key == ["run", "seq", "trial", "evaluator", "reviewer"]
        assert store.get_run(run.id).name == "before"  # nothing already stored is touched
        assert store.count_results(run.id) == 1
        assert read_reviews(store, run.id) == []
        save_reviews(store, run.id, [_review(run.id, 0, "ann")])
        assert [r.reviewer for r in read_reviews(store, run.id)] == ["ann"]
    finally:
        store.close()


def test_reviews_upsert_per_reviewer_and_read_in_result_order(store_url: str) -> None:
    store = SqlStore.open(store_url)
    try:
        run = store.create_run(kind="score", spec=SPEC).id
        other = store.create_run(kind="score", spec=SPEC).id
        saved = save_reviews(
            store,
            run,
            [
                _review(run, 2, "bob", verdict={"passed": False}, approval="rejected"),
                _review(run, 1, "bob"),
                _review(run, 1, "ann"),
            ],
        )
        assert saved == 3
        save_reviews(store, other, [_review(other, 1, "ann")])
        # ann reviews the same result again: her review is replaced, bob's stays
        save_reviews(store, run, [_review(run, 1, "ann", rationale="second look", imported_at=2.0)])
        got = read_reviews(store, run)
        assert [(r.seq, r.reviewer) for r in got] == [(1, "ann"), (1, "bob"), (2, "bob")]
        assert (got[0].rationale, got[0].imported_at) == ("second look", 2.0)
        assert got[2].verdict == {"passed": False}
        assert got[2].approval == "rejected"
        assert {r.evaluator_name for r in got} == {"has"}  # the index named by the run's spec
        assert got[0].to_dict()["evaluator"] == "has"
        assert len(read_reviews(store, other)) == 1
    finally:
        store.close()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"approval": "maybe"}, "approval is 'maybe'"),
        ({"rationale": "  "}, "needs a reviewer and a rationale"),
        ({"reviewer": ""}, "needs a reviewer and a rationale"),
        ({"run_id": "another"}, "cannot be stored with run"),
    ],
)
def test_a_review_that_says_nothing_is_not_stored(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = store.create_run(kind="score", spec=SPEC).id
        good = _review(run, 0, "ann")
        with pytest.raises(UserError, match=message):
            save_reviews(store, run, [good, dataclasses.replace(good, seq=1, **changes)])
        assert read_reviews(store, run) == []  # the good one neither: nothing half stored
    finally:
        store.close()
