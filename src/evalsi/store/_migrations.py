"""Versioned schema migrations, applied when a store is opened.

Each migration is a small function of a connection, written in plain SQLAlchemy DDL that both
SQLite and PostgreSQL accept (see docs/decisions/0006-store-migrations.md). ``migrate`` applies
the missing ones in order, in ONE transaction, under a lock, and records each in
``evalsi_schema_migrations``: a process killed mid-way leaves the store at the old version, and
two processes opening a store at once do not both migrate (the second waits, then finds
nothing to do). PostgreSQL DDL is transactional; so is SQLite's.

Stores made before this table existed record ``schema = 1`` in ``evalsi_meta`` only; migration 1
(create the version-1 tables that are missing) brings them under this scheme in place. The
``evalsi_meta`` row is kept at the current version so that an older evalsi, which reads only
that row, refuses a store it does not understand.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import sqlalchemy as sa

from evalsi.core import StoreError
from evalsi.store._schema import SCHEMA_VERSION, meta, schema_migrations
from evalsi.store._schema_v1 import metadata_v1


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    apply: Callable[[sa.Connection], None]


def _initial(conn: sa.Connection) -> None:
    # checkfirst: a version-1 store made before outputs or judge_cache existed gets them now
    metadata_v1.create_all(conn, checkfirst=True)


def _project_scope_and_owners(conn: sa.Connection) -> None:
    # ADD COLUMN with a constant default is a catalogue change on both engines: no table is
    # rewritten. results rows are scoped through their run (see the decision record).
    for table in ("runs", "outputs"):
        _add(conn, table, "project_id VARCHAR(64) NOT NULL DEFAULT 'default'")
        _add(conn, table, "tenant_id VARCHAR(64) NOT NULL DEFAULT ''")
    _add(conn, "runs", "host VARCHAR(255)")
    _add(conn, "runs", "owner VARCHAR(32)")
    _add(conn, "runs", "heartbeat_at FLOAT")
    conn.exec_driver_sql("CREATE INDEX runs_scope ON runs (tenant_id, project_id, created_at)")
    conn.exec_driver_sql("CREATE INDEX runs_status ON runs (status)")


def _calibrations(conn: sa.Connection) -> None:
    # Declared here, frozen, rather than taken from _schema.py: a later migration may change
    # the current table, and this one must keep creating what it created when released.
    frozen = sa.MetaData()
    table = sa.Table(
        "calibrations",
        frozen,
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("judge_key", sa.String(80), nullable=False),
        sa.Column("evaluator_ref", sa.String(256), nullable=False),
        sa.Column("template_hash", sa.String(80), nullable=False),
        sa.Column("params_hash", sa.String(80), nullable=False),
        sa.Column("metric", sa.String(256), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("labels_version", sa.String(80)),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("summary", sa.JSON, nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False, server_default="default"),
        sa.Column("tenant_id", sa.String(64), nullable=False, server_default=""),
    )
    sa.Index(
        "calibrations_key",
        table.c.judge_key,
        table.c.evaluator_ref,
        table.c.template_hash,
        table.c.params_hash,
    )
    frozen.create_all(conn)


def _traces(conn: sa.Connection) -> None:
    # Frozen like _calibrations. Spans are a rowid table (rows carry JSON of a few hundred
    # bytes, too wide for WITHOUT ROWID); one secondary index each keeps the ingest insert cheap.
    frozen = sa.MetaData()

    def scope() -> tuple[sa.Column[str], sa.Column[str]]:
        return (
            sa.Column("project_id", sa.String(64), nullable=False, server_default="default"),
            sa.Column("tenant_id", sa.String(64), nullable=False, server_default=""),
        )

    text, big = sa.Text, sa.BigInteger
    spans = sa.Table(
        "spans",
        frozen,
        *scope(),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("parent_span_id", sa.String(16), nullable=False),
        sa.Column("name", text, nullable=False),
        sa.Column("kind", sa.Integer, nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("service", sa.String(255), nullable=False),
        sa.Column("start_ns", big, nullable=False),
        sa.Column("end_ns", big, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("status_message", text),
        sa.Column("session_id", text, nullable=False),
        sa.Column("model", text, nullable=False),
        sa.Column("view_name", text, nullable=False),
        sa.Column("scope", text),
        sa.Column("attributes", text),
        sa.Column("events", text),
        sa.Column("resource", text),
        sa.Column("view", text),
        sa.PrimaryKeyConstraint("project_id", "trace_id", "span_id"),
    )
    traces = sa.Table(
        "traces",
        frozen,
        *scope(),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("service", sa.String(255), nullable=False),
        sa.Column("root_name", text, nullable=False),
        sa.Column("start_ns", big, nullable=False),
        sa.Column("end_ns", big, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("span_count", sa.Integer, nullable=False),
        sa.Column("error", sa.Integer, nullable=False),
        sa.Column("session_id", text, nullable=False),
        sa.Column("user_id", text, nullable=False),
        sa.Column("input_preview", text, nullable=False),
        sa.Column("output_preview", text, nullable=False),
        sa.Column("record", text),
        sa.Column("completed_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("project_id", "trace_id"),
    )
    feedback = sa.Table(
        "trace_feedback",
        frozen,
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        *scope(),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("session_id", text, nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("value", sa.Float),
        sa.Column("label", text, nullable=False),
        sa.Column("comment", text, nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("time_ns", big, nullable=False),
        sa.Column("received_at", sa.Float, nullable=False),
    )
    sa.Index("spans_start", spans.c.project_id, spans.c.start_ns)
    sa.Index("traces_start", traces.c.project_id, traces.c.start_ns, traces.c.trace_id)
    sa.Index("traces_session", traces.c.project_id, traces.c.session_id, traces.c.start_ns)
    sa.Index("trace_feedback_trace", feedback.c.project_id, feedback.c.trace_id)
    sa.Index("trace_feedback_session", feedback.c.project_id, feedback.c.session_id)
    sa.Index("trace_feedback_received", feedback.c.project_id, feedback.c.received_at)
    frozen.create_all(conn)


def _feedback_key_and_links(conn: sa.Connection) -> None:
    _add(conn, "spans", "links TEXT")  # OTLP span links, kept as received
    # Feedback re-sent (an exporter retrying a span with a feedback event, a client retrying
    # PostFeedback) is stored once: rows get a key, unique per project.
    _add(conn, "trace_feedback", "key VARCHAR(64)")
    conn.exec_driver_sql("UPDATE trace_feedback SET key = 'pk:' || CAST(pk AS VARCHAR(20))")
    conn.exec_driver_sql(
        "CREATE UNIQUE INDEX trace_feedback_key ON trace_feedback (project_id, key)"
    )


def _span_events(conn: sa.Connection) -> None:
    # Frozen like _calibrations. A rowid table on SQLite (retention deletes by rowid batches);
    # the (project, time) index is retention's, reads go through the primary key.
    frozen = sa.MetaData()
    events = sa.Table(
        "span_events",
        frozen,
        sa.Column("project_id", sa.String(64), nullable=False, server_default="default"),
        sa.Column("tenant_id", sa.String(64), nullable=False, server_default=""),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("time_ns", sa.BigInteger, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("attributes", sa.Text),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("project_id", "trace_id", "span_id", "key"),
    )
    sa.Index("span_events_time", events.c.project_id, events.c.time_ns)
    frozen.create_all(conn)


def _output_trajectory(conn: sa.Connection) -> None:
    _add(conn, "outputs", "trajectory TEXT")


def _reviews(conn: sa.Connection) -> None:
    # Frozen like _calibrations. Keyed by the result and the reviewer: a re-import upserts.
    frozen = sa.MetaData()
    sa.Table(
        "reviews",
        frozen,
        sa.Column("run", sa.Integer, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("trial", sa.Integer, nullable=False),
        sa.Column("evaluator", sa.Integer, nullable=False),
        sa.Column("reviewer", sa.String(256), nullable=False),
        sa.Column("record_id", sa.Text, nullable=False),
        sa.Column("approval", sa.String(16), nullable=False),
        sa.Column("verdict", sa.Text),
        sa.Column("rationale", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(80), nullable=False),
        sa.Column("imported_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("run", "seq", "trial", "evaluator", "reviewer"),
    )
    frozen.create_all(conn)


def _identity(conn: sa.Connection) -> None:
    # Frozen like _calibrations: projects, API keys (hashes only), role bindings, the audit log.
    frozen = sa.MetaData()
    sa.Table(
        "projects",
        frozen,
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("created_by", sa.String(512), nullable=False),
    )
    sa.Table(
        "api_keys",
        frozen,
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("hash", sa.String(80), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("role", sa.String(128), nullable=False),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("created_by", sa.String(512), nullable=False),
        sa.Column("expires_at", sa.Float),
        sa.Column("revoked_at", sa.Float),
    )
    sa.Table(
        "role_bindings",
        frozen,
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("role", sa.String(128), nullable=False),
        sa.Column("subject", sa.String(2048), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("created_by", sa.String(512), nullable=False),
    )
    audit = sa.Table(
        "audit_events",
        frozen,
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("principal", sa.String(512), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("resource", sa.Text, nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("decided_by", sa.Text, nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("source", sa.String(128), nullable=False),
        sa.Column("detail", sa.JSON, nullable=False),
    )
    sa.Index("audit_events_scope", audit.c.project_id, audit.c.time)
    frozen.create_all(conn)
    _add(conn, "runs", "created_by VARCHAR(512) NOT NULL DEFAULT ''")


def _cassettes(conn: sa.Connection) -> None:
    frozen = sa.MetaData()
    sa.Table(
        "cassette_blobs",
        frozen,
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("body", sa.LargeBinary, nullable=False),
    )
    frozen.create_all(conn)
    _add(conn, "outputs", "cassette TEXT")


def _shards(conn: sa.Connection) -> None:
    frozen = sa.MetaData()
    sa.Table(
        "shards",
        frozen,
        sa.Column("run", sa.Integer, nullable=False),
        sa.Column("shard", sa.String(64), nullable=False),
        sa.Column("tasks", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("worker", sa.String(255)),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("run", "shard"),
    )
    frozen.create_all(conn)


def _shared_limits(conn: sa.Connection) -> None:
    frozen = sa.MetaData()
    sa.Table(
        "run_spend",
        frozen,
        sa.Column("run", sa.Integer, nullable=False),
        sa.Column("session", sa.String(64), nullable=False),
        sa.Column("spender", sa.String(255), nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.Column("usd", sa.Float, nullable=False),
        sa.Column("usd_unknown", sa.Integer, nullable=False),
        sa.Column("calls", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("run", "session", "spender"),
    )
    sa.Table(
        "rate_windows",
        frozen,
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("slot", sa.BigInteger, nullable=False),
        sa.Column("requests", sa.Float, nullable=False),
        sa.Column("tokens", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("key", "slot"),
    )
    frozen.create_all(conn)


def _watch_claims(conn: sa.Connection) -> None:
    frozen = sa.MetaData()
    claims = sa.Table(
        "trace_claims",
        frozen,
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("last_at", sa.Float, nullable=False),
        sa.Column("root_at", sa.Float),
        sa.Column("batches", sa.Integer, nullable=False),
        sa.Column("claimed_by", sa.String(64)),
        sa.Column("claimed_at", sa.Float),
        sa.Column("claimed_batches", sa.Integer),
        sa.Column("done_at", sa.Float),
        sa.PrimaryKeyConstraint("project_id", "trace_id"),
    )
    sa.Index("trace_claims_done", claims.c.done_at)
    sa.Table(
        "leases",
        frozen,
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    frozen.create_all(conn)
    # partial: only open traces are scanned for their deadlines (both dialects take WHERE)
    for column in ("root_at", "last_at"):
        conn.exec_driver_sql(
            f"CREATE INDEX trace_claims_{column[:4]} ON trace_claims ({column}) "
            "WHERE done_at IS NULL"
        )


def _add(conn: sa.Connection, table: str, column: str) -> None:
    conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column}")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _initial),
    Migration(
        2, "project_id and tenant_id on project-scoped rows; run owners", _project_scope_and_owners
    ),
    Migration(3, "judge calibrations", _calibrations),
    Migration(4, "spans, traces and trace feedback (Watch)", _traces),
    Migration(
        5,
        "span links; a key on trace feedback, so a re-sent signal is stored once",
        _feedback_key_and_links,
    ),
    Migration(6, "span events received as OTLP log records", _span_events),
    Migration(7, "the trajectory an agent target returned, with its output", _output_trajectory),
    Migration(8, "human reviews of results, apart from the automatic scores", _reviews),
    Migration(
        9, "identity: projects, API keys, role bindings, the audit log; created_by", _identity
    ),
    Migration(10, "agent cassettes: an index per task, responses kept once by sha256", _cassettes),
    Migration(11, "a cluster run's shards of tasks, queued and finished", _shards),
    Migration(12, "a cluster run's spend and rate limits, shared by its workers", _shared_limits),
    Migration(13, "trace claims and named leases: Watch across server replicas", _watch_claims),
)
"""In order; append only. A migration, once released, is never edited."""

assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))


def migrate(engine: sa.Engine, location: str) -> list[int]:
    """Bring the store to ``SCHEMA_VERSION``; returns the versions applied (often none)."""
    with engine.connect() as conn:  # the common case, an up-to-date store, takes no lock
        if _check(conn, location) == SCHEMA_VERSION:
            return []
    with _locked(engine) as conn:
        version = _check(conn, location)  # another process may have migrated meanwhile
        schema_migrations.create(conn, checkfirst=True)  # the runner's own bookkeeping
        applied = []
        for migration in MIGRATIONS[version:]:
            migration.apply(conn)
            conn.execute(
                schema_migrations.insert().values(
                    version=migration.version, name=migration.name, applied_at=time.time()
                )
            )
            applied.append(migration.version)
        if applied:
            conn.execute(meta.delete().where(meta.c.key == "schema"))
            conn.execute(meta.insert().values(key="schema", value=str(SCHEMA_VERSION)))
        return applied


def store_version(conn: sa.Connection) -> int:
    """The schema version a store is at: 0 for an empty database or a version-1 store made
    before migrations were recorded (migration 1 is idempotent on those)."""
    inspector = sa.inspect(conn)
    recorded = 0
    if inspector.has_table(schema_migrations.name):
        top = conn.execute(sa.select(sa.func.max(schema_migrations.c.version))).scalar()
        recorded = int(top or 0)
    if inspector.has_table(meta.name):
        row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema")).first()
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            return int(row[0])  # a newer evalsi's store, even without our table
    return recorded


def _check(conn: sa.Connection, location: str) -> int:
    version = store_version(conn)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{location}: this store was written by a newer evalsi (schema {version}); "
            "upgrade evalsi",
            hint=f"this evalsi reads store schemas up to {SCHEMA_VERSION}",
        )
    return version


@contextlib.contextmanager
def _locked(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction that holds the store's migration lock until it commits."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            # per schema, so stores in different schemas of one database do not wait on each other
            conn.execute(
                sa.text(
                    "SELECT pg_advisory_xact_lock("
                    "hashtext('evalsi.migrate:' || coalesce(current_schema(), '')))"
                )
            )
            yield conn
        return
    with engine.connect() as conn:
        # BEGIN IMMEDIATE takes SQLite's write lock up front (a second opener waits on the busy
        # timeout); the driver must not open its own deferred transaction meanwhile.
        dbapi = conn.connection.driver_connection
        saved = dbapi.isolation_level  # type: ignore[union-attr]
        dbapi.isolation_level = None  # type: ignore[union-attr]
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.exec_driver_sql("ROLLBACK")
                raise
            conn.exec_driver_sql("COMMIT")
        finally:
            dbapi.isolation_level = saved  # type: ignore[union-attr]
