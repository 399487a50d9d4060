"""Migration 3 (the calibrations table) and the calibration rows, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from evalsi.core import UserError
from evalsi.store import (
    CalibrationKey,
    SqlStore,
    latest_calibration,
    list_calibrations,
    save_calibration,
)
from evalsi.store import _migrations as migrations_module
from evalsi.store._migrations import MIGRATIONS
from evalsi.store._schema import SCHEMA_VERSION, calibrations

JUDGE = {"name": "default", "connector": "openai-compatible", "model": "qwen", "params": {}}


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


def test_a_version_2_store_gains_the_calibrations_table(
    store_url: str, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:  # the evalsi before this migration
        m.setattr(migrations_module, "SCHEMA_VERSION", 2)
        m.setattr(migrations_module, "MIGRATIONS", MIGRATIONS[:2])
        SqlStore.open(store_url).close()
    with engine.begin() as conn:  # what that evalsi wrote (today's code writes later columns)
        conn.exec_driver_sql(
            "INSERT INTO runs (id, name, kind, status, created_at, records, spec) "
            "VALUES ('20260101-000000-cccccc', 'before', 'score', 'done', 1.0, 0, "
            "'{\"evaluators\": []}')"
        )
    run = type("Old", (), {"id": "20260101-000000-cccccc"})
    assert not sa.inspect(engine).has_table("calibrations")
    store = SqlStore.open(store_url)
    try:
        assert store.migrations_applied == list(range(3, SCHEMA_VERSION + 1))
        inspector = sa.inspect(engine)
        columns = {c["name"] for c in inspector.get_columns("calibrations")}
        assert columns == set(calibrations.columns.keys())  # what the queries expect
        indexes = {ix["name"] for ix in inspector.get_indexes("calibrations")}
        assert "calibrations_key" in indexes
        assert store.get_run(run.id).name == "before"  # nothing already stored is touched
        with engine.connect() as conn:
            top = conn.exec_driver_sql("SELECT max(version) FROM evalsi_schema_migrations")
            assert top.scalar_one() == SCHEMA_VERSION
    finally:
        store.close()


def test_calibrations_are_found_by_key_newest_first(store_url: str) -> None:
    store = SqlStore.open(store_url)
    try:
        key = CalibrationKey.of(JUDGE, "builtin/llm-judge@1.0.0", "sha256:t", {"rubric": "r"})
        assert latest_calibration(store, key) is None
        first = save_calibration(
            store, key, metric="llm-judge", run_id="r1", labels_version="sha256:l", n=40,
            summary={"agreement": {"n": 40}},
        )  # fmt: skip
        second = save_calibration(
            store, key, metric="llm-judge", run_id="r2", labels_version=None, n=41, summary={}
        )
        found = latest_calibration(store, key)
        assert found is not None
        assert (found.id, found.run_id, found.n, found.labels_version) == (
            second.id,
            "r2",
            41,
            None,
        )
        assert [c.id for c in list_calibrations(store)] == [second.id, first.id]
        assert list_calibrations(store)[1].summary == {"agreement": {"n": 40}}
        assert list_calibrations(store, project_id="support") == []
        for changed in (
            CalibrationKey.of(JUDGE, "builtin/llm-judge@1.1.0", "sha256:t", {"rubric": "r"}),
            CalibrationKey.of(JUDGE, "builtin/llm-judge@1.0.0", "sha256:u", {"rubric": "r"}),
            CalibrationKey.of(JUDGE, "builtin/llm-judge@1.0.0", "sha256:t", {"rubric": "s"}),
            CalibrationKey.of(
                {**JUDGE, "model": "llama"}, "builtin/llm-judge@1.0.0", "sha256:t", {"rubric": "r"}
            ),
        ):
            assert latest_calibration(store, changed) is None
        assert latest_calibration(store, key, project_id="support") is None
        with pytest.raises(UserError, match="project_id"):
            save_calibration(
                store, key, metric="m", run_id="r", labels_version=None, n=1, summary={},
                project_id="no spaces",
            )  # fmt: skip
    finally:
        store.close()
