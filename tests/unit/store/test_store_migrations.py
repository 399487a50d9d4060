"""Schema migrations run when a store is opened: fresh stores, stores made before migrations
were recorded (schema 1 in ``evalsi_meta`` only), newer stores, failed migrations.

Every test runs on SQLite and on PostgreSQL. The version-1 DDL below is what evalsi wrote
before this change (taken from the stores it made), so upgrading it is upgrading a real store.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from evalsi.core import ResultBatch, StoreError
from evalsi.store import SqlStore
from evalsi.store import _migrations as migrations_module
from evalsi.store._migrations import MIGRATIONS, Migration
from evalsi.store._schema import SCHEMA_VERSION, metadata

V1_TABLES = {
    "evalsi_meta": """CREATE TABLE evalsi_meta (
        "key" VARCHAR(64) NOT NULL, value TEXT NOT NULL, PRIMARY KEY ("key"))""",
    "runs": """CREATE TABLE runs (
        pk {serial} NOT NULL, id VARCHAR(64) NOT NULL, name VARCHAR(256) NOT NULL,
        kind VARCHAR(32) NOT NULL, status VARCHAR(32) NOT NULL, created_at FLOAT NOT NULL,
        finished_at FLOAT, pid INTEGER, records INTEGER NOT NULL, spec JSON NOT NULL,
        manifest JSON, summary JSON, error TEXT, PRIMARY KEY (pk), UNIQUE (id))""",
    "results": """CREATE TABLE results (
        run INTEGER NOT NULL, seq INTEGER NOT NULL, trial INTEGER NOT NULL,
        evaluator INTEGER NOT NULL, record_id TEXT NOT NULL, outcome INTEGER NOT NULL,
        kind INTEGER, value FLOAT, text TEXT, extra TEXT,
        PRIMARY KEY (run, seq, trial, evaluator)){rowid}""",
    "outputs": """CREATE TABLE outputs (
        run INTEGER NOT NULL, seq INTEGER NOT NULL, trial INTEGER NOT NULL,
        record_id TEXT NOT NULL, status VARCHAR(16) NOT NULL, kind VARCHAR(32), output TEXT,
        usage TEXT, error TEXT, attempts INTEGER NOT NULL, PRIMARY KEY (run, seq, trial)){rowid}""",
    "judge_cache": """CREATE TABLE judge_cache (
        "key" VARCHAR(80) NOT NULL, text TEXT NOT NULL, usage JSON, created_at FLOAT NOT NULL,
        PRIMARY KEY ("key"))""",
}
ALL = list(range(1, SCHEMA_VERSION + 1))
"""Every migration this evalsi has, in order."""
NEXT = SCHEMA_VERSION + 1
"""The version of a migration from the future (a newer evalsi)."""
SPEC = '{"evaluators": [{"name": "em", "ref": "builtin/exact-match@1.0.0", "params": {}}]}'


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def engine(store_url: str) -> Iterator[sa.Engine]:
    """A plain engine on the same database, to play the part of an older evalsi."""
    url = store_url if "://" in store_url else f"sqlite:///{store_url}"
    eng = sa.create_engine(url)
    yield eng
    eng.dispose()


def make_v1_store(engine: sa.Engine, tables: tuple[str, ...] = tuple(V1_TABLES)) -> None:
    """What evalsi 0.x left on disk: the version-1 tables, schema 1, a finished run."""
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        for name in tables:
            ddl = V1_TABLES[name].format(
                serial="SERIAL" if pg else "INTEGER", rowid="" if pg else " WITHOUT ROWID"
            )
            conn.exec_driver_sql(ddl)
        conn.exec_driver_sql("CREATE INDEX runs_created ON runs (created_at)")
        conn.exec_driver_sql("INSERT INTO evalsi_meta VALUES ('schema', '1')")
        conn.execute(
            sa.text(
                "INSERT INTO runs (id, name, kind, status, created_at, finished_at, pid, "
                "records, spec) VALUES ('20260101-000000-aaaaaa', 'old', 'score', 'done', "
                ":t, :t, 1, 2, :spec)"
            ),
            {"t": time.time() - 100, "spec": SPEC},
        )
        conn.exec_driver_sql(
            "INSERT INTO results VALUES (1, 0, 0, 0, 'a', 1, 2, 1.0, NULL, NULL), "
            "(1, 1, 0, 0, 'b', 1, 2, 0.0, NULL, NULL)"
        )


def columns(engine: sa.Engine) -> dict[str, set[str]]:
    inspector = sa.inspect(engine)
    return {t: {c["name"] for c in inspector.get_columns(t)} for t in metadata.tables}


def runs_indexes(engine: sa.Engine) -> set[str]:
    """Its plain indexes (PostgreSQL may list the one behind UNIQUE (id) too)."""
    return {str(ix["name"]) for ix in sa.inspect(engine).get_indexes("runs") if not ix["unique"]}


def expected_columns() -> dict[str, set[str]]:
    return {name: set(table.columns.keys()) for name, table in metadata.tables.items()}


def versions(engine: sa.Engine) -> list[tuple[int, str]]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT version, name FROM evalsi_schema_migrations ORDER BY version"
        )
        return [(int(v), str(n)) for v, n in rows]


def meta_schema(engine: sa.Engine) -> str:
    with engine.connect() as conn:
        query = "SELECT value FROM evalsi_meta WHERE " + '"key"' + " = 'schema'"
        return str(conn.exec_driver_sql(query).scalar_one())


def test_a_fresh_store_runs_every_migration_once(store_url: str, engine: sa.Engine) -> None:
    store = SqlStore.open(store_url)
    store.close()
    assert store.migrations_applied == [m.version for m in MIGRATIONS] == ALL
    assert versions(engine) == [(m.version, m.name) for m in MIGRATIONS]
    assert meta_schema(engine) == str(SCHEMA_VERSION)
    assert columns(engine) == expected_columns()  # the migrations build what queries expect
    assert runs_indexes(engine) == {ix.name for ix in metadata.tables["runs"].indexes}
    again = SqlStore.open(store_url)
    again.close()
    assert again.migrations_applied == []
    assert len(versions(engine)) == len(ALL)


def test_migrations_record_when_they_ran(store_url: str, engine: sa.Engine) -> None:
    before = time.time()
    SqlStore.open(store_url).close()
    with engine.connect() as conn:
        stamps = [
            t for (t,) in conn.exec_driver_sql("SELECT applied_at FROM evalsi_schema_migrations")
        ]
    assert len(stamps) == len(ALL)
    assert all(before - 1 <= t <= time.time() + 1 for t in stamps)


def test_a_version_1_store_is_upgraded_in_place(store_url: str, engine: sa.Engine) -> None:
    make_v1_store(engine)
    store = SqlStore.open(store_url)
    try:
        assert store.migrations_applied == ALL
        assert columns(engine) == expected_columns()
        assert runs_indexes(engine) == {"runs_created", "runs_scope", "runs_status"}
        old = store.get_run("20260101-000000-aaaaaa")
        assert (old.name, old.status, old.records) == ("old", "done", 2)
        assert (old.project_id, old.tenant_id) == ("default", "")
        assert [r.record_id for _, _, r in store.iter_results(old.id)] == ["a", "b"]
        with engine.connect() as conn:
            scoped = conn.exec_driver_sql(
                "SELECT DISTINCT runs.project_id, runs.tenant_id FROM results "
                "JOIN runs ON runs.pk = results.run"
            )
            assert list(scoped) == [("default", "")]
        new = store.create_run(kind="score", spec={"evaluators": []}, project_id="support")
        batch = ResultBatch("em", "builtin/exact-match@1.0.0", "exact-match", ["x"])
        batch.kind[0], batch.value[0] = 2, 1.0
        store.write_batches(new.id, [(0, 0, batch)])
        assert store.count_results(new.id) == 1
        assert [r.id for r in store.list_runs()] == [new.id, old.id]
    finally:
        store.close()
    assert meta_schema(engine) == str(SCHEMA_VERSION)
    assert [v for v, _ in versions(engine)] == ALL


def test_a_version_1_store_without_the_later_tables_gets_them(
    store_url: str, engine: sa.Engine
) -> None:
    make_v1_store(engine, tables=("evalsi_meta", "runs", "results"))
    store = SqlStore.open(store_url)
    try:
        assert columns(engine) == expected_columns()
        store.judge_cache_put("k", "yes", {})
        assert store.judge_cache_get("k") == ("yes", {})
    finally:
        store.close()


def test_a_store_of_a_newer_evalsi_is_refused(store_url: str, engine: sa.Engine) -> None:
    SqlStore.open(store_url).close()
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO evalsi_schema_migrations (version, name, applied_at) "
            f"VALUES ({NEXT}, 'from the future', 0)"
        )
    with pytest.raises(StoreError, match=rf"written by a newer evalsi \(schema {NEXT}\); upgrade"):
        SqlStore.open(store_url)


def test_a_later_migration_applies_to_an_existing_store(
    store_url: str, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    SqlStore.open(store_url).close()

    def add_labels(conn: sa.Connection) -> None:
        conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN labels TEXT")

    monkeypatch.setattr(migrations_module, "SCHEMA_VERSION", NEXT)
    monkeypatch.setattr(
        migrations_module, "MIGRATIONS", (*MIGRATIONS, Migration(NEXT, "labels", add_labels))
    )
    store = SqlStore.open(store_url)
    store.close()
    assert store.migrations_applied == [NEXT]
    assert [v for v, _ in versions(engine)] == [*ALL, NEXT]
    assert meta_schema(engine) == str(NEXT)
    assert "labels" in {c["name"] for c in sa.inspect(engine).get_columns("runs")}


def test_a_failing_migration_leaves_the_store_as_it_was(
    store_url: str, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_v1_store(engine)

    def half_done(conn: sa.Connection) -> None:
        conn.exec_driver_sql("CREATE TABLE half_done (x INTEGER)")
        conn.exec_driver_sql("SELECT * FROM no_such_table")

    monkeypatch.setattr(migrations_module, "SCHEMA_VERSION", NEXT)
    monkeypatch.setattr(
        migrations_module, "MIGRATIONS", (*MIGRATIONS, Migration(NEXT, "broken", half_done))
    )
    with pytest.raises(StoreError, match="cannot open the store"):
        SqlStore.open(store_url)
    inspector = sa.inspect(engine)
    assert not inspector.has_table("half_done")
    assert not inspector.has_table("evalsi_schema_migrations")  # the real ones rolled back too
    assert "project_id" not in {c["name"] for c in inspector.get_columns("runs")}
    assert meta_schema(engine) == "1"
    monkeypatch.undo()
    store = SqlStore.open(store_url)  # the fixed evalsi upgrades it
    store.close()
    assert store.migrations_applied == ALL
