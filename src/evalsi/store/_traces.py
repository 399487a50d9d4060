"""Spans, assembled traces and feedback in the SQL store (the Watch way in).

``write`` is the ingest hot path: span rows and per-trace summary rows built with orjson and
written on one DB-API connection (``_trace_rows.RowsWriter``: multi-row upserts on SQLite, COPY
on PostgreSQL), one transaction per call, keyed by (project, trace id, span id) so a re-sent
export never duplicates a span. (A summary row through SQLAlchemy cost ~1 ms, its own
transaction and a turn at SQLite's write lock: trace completion fell behind ingest and the
open traces piled up.) On a SQLite file its commits leave WAL checkpoints to a thread of
their own (``_checkpoint.py``): in the commit, they made the writer wait for the disk.
Everything else (the queries, feedback, retention) goes through SQLAlchemy Core. Every query
is scoped by ``project_id``; a query in one project never sees another's rows.

``add_span_events`` stores events of a span that arrive apart from it (OTLP log records such
as GenAI ``gen_ai.user.message`` events, often sent before their span) in ``span_events``, keyed
by a hash of what they say so a re-sent one is stored once; reads merge them into their span
(``_trace_queries.py``) before the view is built, and retention expires them by their time.

Measured on the 2-core development machine, 512-span batches of ~12-attribute spans:
``write_spans`` alone stores 55-85k spans/s on SQLite (WAL) and 33-37k on PostgreSQL. Called
from a worker thread (``asyncio.to_thread``) while another thread builds spans, the pipeline
ran at 24-47k spans/s on SQLite and ~22-24k on PostgreSQL (the database on the same cores); a
writer process fed orjson frames (as for results, ADR 0003) measured the same within noise
(34-40k, ~22k), so the thread it is: simpler, works for in-memory stores, and leaves the
second core to decoding and online evaluation.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson
import sqlalchemy as sa

from evalsi.core import (
    Feedback,
    Span,
    SpanEvent,
    SpanView,
    StoreError,
    TraceSummary,
    UserError,
    preview,
)
from evalsi.store._checkpoint import Checkpointer
from evalsi.store._runs import check_project_id
from evalsi.store._schema import runs, span_events, trace_feedback, traces
from evalsi.store._trace_queries import MAX_PAGE, TraceQueries
from evalsi.store._trace_rows import (
    CHUNK,
    MAX_SERVICE,
    RowsWriter,
    chunks,
    dumps,
    in_ids,
    span_event_row,
    span_rows,
)

if TYPE_CHECKING:
    from evalsi.store._sql import SqlStore

__all__ = [
    "DELETE_BATCH",
    "MAX_PAGE",
    "TraceStore",
]


def feedback_key(feedback: Feedback, time_ns: int) -> str:
    """What identifies a signal: 32 hex digits of a hash of all it says."""
    f = feedback
    fields = (f.trace_id, f.session_id, f.name, f.value, f.label, f.comment, f.source, time_ns)
    return hashlib.sha256(orjson.dumps(fields)).hexdigest()[:32]


DELETE_BATCH = 5000
"""Rows per retention delete: each batch is its own short transaction, so ingest waits at most
one batch for SQLite's write lock."""


class TraceStore(TraceQueries):
    """Spans, traces and feedback of a ``SqlStore``; safe to share between threads.

    Example:
        >>> from evalsi.core import Span
        >>> from evalsi.store import SqlStore
        >>> store = TraceStore(SqlStore.open(":memory:"))
        >>> store.write_spans("default", [Span("0" * 31 + "1", "0" * 15 + "1", name="chat")])
        >>> [s.name for s in store.get_trace("default", "0" * 31 + "1").spans]
        ['chat']
    """

    def __init__(
        self,
        store: SqlStore,
        *,
        views: Callable[[Span], SpanView] | None = None,
        claims: bool = False,
    ) -> None:
        """``views``: how a read span gets its view (``evalsi.traces.normalize``); views are
        not stored, so without it read spans have none. ``claims``: every span batch also
        upserts its traces in ``trace_claims`` (a cluster's replicas, PostgreSQL only: see
        ``store._trace_claims``)."""
        self.store = store
        self.claims = claims
        self.views = views
        self.engine = store.engine
        self._pg = self.engine.dialect.name == "postgresql"
        if claims and not self._pg:
            raise StoreError(
                f"trace claims need PostgreSQL (a cluster's store), not {store.location}"
            )
        self._writer: RowsWriter | None = None
        self._checkpointer: Checkpointer | None = None
        self._lock = threading.Lock()  # one writer connection, one batch at a time
        self._seq_lock = threading.Lock()
        self._last_seq = 0  # span events' arrival order (add_span_events)

    # -- ingest ------------------------------------------------------------------------------------
    def write_spans(self, project: str, batch: Sequence[Span]) -> None:
        """Upsert the spans (a re-sent span replaces its row) and commit. Traces already
        summarised get their ``span_count`` and ``error`` updated for late spans."""
        self.write({project: batch})

    def upsert_trace(self, project: str, summary: TraceSummary) -> None:
        """Write (or replace) a trace's summary row. ``span_count`` is at least the number of
        its spans already stored, so spans that landed after the assembler's snapshot count."""
        self.write({}, {project: [summary]})

    def write(
        self,
        spans_of: Mapping[str, Sequence[Span]],
        traces_of: Mapping[str, Sequence[TraceSummary]] | None = None,
    ) -> None:
        """Spans and trace summary rows of any projects in ONE transaction: ingest's group
        commit (span rows first, so a trace row counts the spans stored with it)."""
        rows: list[tuple[Any, ...]] = []
        for project, batch in spans_of.items():
            check_project_id(project)
            rows += span_rows(project, batch)
        self.write_rows(rows, traces_of)

    def write_rows(
        self,
        rows: Sequence[Sequence[Any]],
        traces_of: Mapping[str, Sequence[TraceSummary]] | None = None,
    ) -> None:
        """``write`` for span rows already encoded (``span_rows``; ingest encodes them where
        it prepares the spans, possibly in another process)."""
        # one row per trace, the last one winning: a multi-row upsert may not touch a row twice
        latest: dict[tuple[str, str], TraceSummary] = {}
        for project, summaries in (traces_of or {}).items():
            check_project_id(project)
            latest.update(((project, s.trace_id), s) for s in summaries)
        trace_rows = [trace_row(project, s) for (project, _), s in latest.items()]
        if not rows and not trace_rows:
            return
        with self._lock:
            if self._writer is None:
                self._writer = self._open_writer()
            try:
                self._writer.write(rows, trace_rows)
            except Exception as e:
                # A fresh connection next time: after a database restart this one is dead.
                with contextlib.suppress(Exception):
                    self._writer.close()
                self._writer = None
                what = "spans" if rows else "a trace"
                raise StoreError(f"cannot write {what} to {self.store.location}: {e}") from e
            if self._checkpointer is not None:
                self._checkpointer.committed(len(rows) + len(trace_rows))

    def _open_writer(self) -> RowsWriter:
        conn = self.engine.raw_connection()
        if self.store.is_sqlite_file:
            # Checkpoints happen in a thread of their own (``_checkpoint.py``), not in this
            # connection's commits; detached, so that it never serves another use unchanged.
            conn.detach()
            conn.cursor().execute("PRAGMA wal_autocheckpoint=0")
            if self._checkpointer is None:
                self._checkpointer = Checkpointer(self.store.sqlite_path)
        return RowsWriter(conn, pg=self._pg, claims=self.claims)

    # -- feedback ----------------------------------------------------------------------------------
    def add_feedback(self, project: str, feedback: Feedback) -> bool:
        """Store a late signal for a trace or a session (at least one id is needed).

        Idempotent: the same signal sent again (same ids, name, value, label, comment, source
        and time) is stored once. Returns whether it was new. Set ``time_unix_nano`` to make
        retries of one signal the same; without it the time received is used.
        """
        check_project_id(project)
        f = feedback
        if not f.trace_id and not f.session_id:
            raise UserError("feedback: give a trace_id or a session_id to attach it to")
        if not f.name:
            raise UserError("feedback.name: must not be empty")
        time_ns = f.time_unix_nano or time.time_ns()
        row = {
            "project_id": project,
            "trace_id": f.trace_id,
            "session_id": f.session_id,
            "name": f.name,
            "value": f.value,
            "label": f.label,
            "comment": f.comment,
            "source": f.source,
            "time_ns": time_ns,
            "received_at": time.time(),
            "key": feedback_key(f, time_ns),
        }
        insert: Any
        if self._pg:
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        statement = (
            insert(trace_feedback)
            .values(row)
            .on_conflict_do_nothing()
            .returning(trace_feedback.c.pk)  # a row back only when it was inserted
        )
        try:
            with self.engine.begin() as conn:
                return conn.execute(statement).first() is not None
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"cannot write feedback to {self.store.location}: {e}") from e

    # -- events received apart from their span -----------------------------------------------------
    def add_span_events(self, project: str, events: Sequence[tuple[str, str, SpanEvent]]) -> int:
        """Store ``(trace id, span id, event)`` triples (OTLP log records that are events of a
        span) in one transaction; reads merge them into their span's ``events``, whenever
        the span is stored. Idempotent: an event sent again (same trace, span, name, time and
        attributes) is stored once. Returns how many were new."""
        check_project_id(project)
        with self._seq_lock:  # increasing across calls: nanoseconds at receipt, then place
            base = max(time.time_ns(), self._last_seq + 1)
            self._last_seq = base + len(events)
        rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        for i, (trace_id, span_id, event) in enumerate(events):
            row = span_event_row(project, trace_id, span_id, event, seq=base + i, pg=self._pg)
            rows.setdefault((trace_id, span_id, row["key"]), row)  # a batch may repeat one
        if not rows:
            return 0
        insert: Any
        if self._pg:
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        # executemany of one statement, compiled once and cached (a multi-row VALUES clause
        # is compiled anew for every batch, ~100 us a row); SQLAlchemy batches it into
        # INSERT ... VALUES pages itself. A row back per row inserted: the count of new ones
        # (rowcount is -1 for an executemany on psycopg).
        statement = insert(span_events).on_conflict_do_nothing().returning(span_events.c.key)
        try:
            with self.engine.begin() as conn:
                added = len(conn.execute(statement, list(rows.values())).all())
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"cannot write span events to {self.store.location}: {e}") from e
        return added

    def traces_with_events(self, project: str, trace_ids: Sequence[str]) -> set[str]:
        """Which of these traces have events stored apart from their spans (their rows are
        built from the store, events merged, rather than from assembly's refs)."""
        return self._trace_ids("SELECT DISTINCT trace_id FROM span_events", project, trace_ids)

    # -- retention ---------------------------------------------------------------------------------
    def delete_expired(
        self,
        now_s: float,
        default_ttl_s: float | None,
        project_ttls: Mapping[str, float | None] | None = None,
        *,
        score_key: Callable[[str], tuple[int, int]] | None = None,
    ) -> int:
        """Delete spans and traces that ended, span events that happened, and feedback received,
        more than their project's TTL before ``now_s`` (``project_ttls`` overrides
        ``default_ttl_s``; ``None`` keeps forever), and with ``score_key`` (where a policy's
        ``watch`` run keeps a trace's results: ``evalsi.policies.result_key``) the scores of the
        traces deleted. Returns the rows deleted. Deletes in short batches, each committed."""
        ttls = dict(project_ttls or {})
        deleted = 0
        for project in self._projects():
            ttl = ttls.get(project, default_ttl_s)
            if ttl is None:
                continue
            cutoff_s = now_s - ttl
            cutoff_ns = int(cutoff_s * 1e9)
            # start <= end, so "start < cutoff" is implied and lets the (project, start) index
            # find the candidates
            deleted += self._delete_batches(
                "spans", "project_id = :p AND start_ns < :c AND end_ns < :c", project, cutoff_ns
            )
            deleted += self._delete_traces(project, cutoff_ns, score_key)
            # by their own time (sent without one: when received), events whose span never
            # came included
            deleted += self._delete_batches(
                "span_events",
                "project_id = :p AND time_ns < :c AND (time_ns > 0 OR seq < :c)",
                project,
                cutoff_ns,
            )
            deleted += self._delete_batches(
                "trace_feedback", "project_id = :p AND received_at < :c", project, cutoff_s
            )
        return deleted

    def _delete_traces(
        self, project: str, cutoff_ns: int, score_key: Callable[[str], tuple[int, int]] | None
    ) -> int:
        """Expired trace rows, a batch per transaction, with the results online policies
        stored for them: a ``watch`` run keeps a trace's results at ``score_key(trace id)``."""
        runs_of: list[int] = []
        if score_key is not None:
            with self.engine.connect() as conn:
                found = conn.execute(
                    sa.select(runs.c.pk).where(runs.c.project_id == project, runs.c.kind == "watch")
                ).scalars()
                runs_of = list(found)
        pick = sa.text(
            "SELECT trace_id FROM traces WHERE project_id = :p AND start_ns < :c AND end_ns < :c "
            f"LIMIT {DELETE_BATCH}"
        )
        total = 0
        try:
            while True:
                with self.engine.begin() as conn:
                    ids = [str(r[0]) for r in conn.execute(pick, {"p": project, "c": cutoff_ns})]
                    if not ids:
                        return total
                    total += conn.execute(
                        traces.delete().where(
                            traces.c.project_id == project, traces.c.trace_id.in_(ids)
                        )
                    ).rowcount
                    if runs_of and score_key is not None:
                        keys = {score_key(t) for t in ids}
                        pairs = ", ".join(f"(:s{i}, :k{i})" for i in range(len(keys)))
                        where = ", ".join(f":r{i}" for i in range(len(runs_of)))
                        args: dict[str, Any] = {f"r{i}": r for i, r in enumerate(runs_of)}
                        for i, (seq, trial) in enumerate(keys):
                            args[f"s{i}"], args[f"k{i}"] = seq, trial
                        total += conn.execute(
                            sa.text(
                                f"DELETE FROM results WHERE run IN ({where}) "
                                f"AND (seq, trial) IN (VALUES {pairs})"
                            ),
                            args,
                        ).rowcount
                if len(ids) < DELETE_BATCH:
                    return total
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"cannot delete expired traces in {self.store.location}: {e}") from e

    def _delete_batches(self, table: str, where: str, project: str, cutoff: float) -> int:
        row = "ctid" if self._pg else "rowid"  # ours, not user data
        sql = sa.text(
            f"DELETE FROM {table} WHERE {row} IN "
            f"(SELECT {row} FROM {table} WHERE {where} LIMIT {DELETE_BATCH})"
        )
        total = 0
        while True:
            try:
                with self.engine.begin() as conn:
                    n = conn.execute(sql, {"p": project, "c": cutoff}).rowcount
            except sa.exc.SQLAlchemyError as e:
                raise StoreError(
                    f"cannot delete expired {table} in {self.store.location}: {e}"
                ) from e
            total += n
            if n < DELETE_BATCH:
                return total

    def summarized(self, project: str, trace_ids: Sequence[str]) -> set[str]:
        """Which of these traces already have a trace row."""
        return self._trace_ids("SELECT trace_id FROM traces", project, trace_ids)

    def _trace_ids(self, select: str, project: str, trace_ids: Sequence[str]) -> set[str]:
        """The trace ids ``select`` (from a table with ``project_id`` and ``trace_id``) finds
        among ``trace_ids`` in ``project``, a page at a time. Plain driver SQL: ingest asks
        this for every batch of completed traces, and through SQLAlchemy (an expanding ``IN``
        compiled per call) it cost ~0.7 ms a call, raw ~0.07 ms."""
        found: set[str] = set()
        mark = "%s" if self._pg else "?"
        if not trace_ids:
            return found
        try:
            conn = self.engine.raw_connection()  # back to the pool (rolled back) on close
            try:
                cur = conn.cursor()
                for chunk in chunks(trace_ids, CHUNK):
                    cur.execute(f"{select} {in_ids(len(chunk), mark)}", (project, *chunk))
                    found.update(str(r[0]) for r in cur.fetchall())
                cur.close()
            finally:
                conn.close()
        except (sa.exc.SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as e:
            what = "span events" if select.endswith("span_events") else "trace rows"
            raise StoreError(f"cannot read {what} in {self.store.location}: {e}") from e
        return found

    def unfinished_traces(self, within_s: float, limit: int) -> list[tuple[str, str]]:
        """``(project, trace id)`` of traces with spans stored and no trace row: left open by
        a server that stopped without completing them (a crash, a kill). Per project, among
        the spans that started within ``within_s`` of its newest one; at most ``limit``."""
        sql = sa.text(
            "SELECT DISTINCT s.trace_id FROM spans s WHERE s.project_id = :p "
            "AND s.start_ns >= (SELECT MAX(start_ns) FROM spans WHERE project_id = :p) - :w "
            "AND NOT EXISTS (SELECT 1 FROM traces t "
            "WHERE t.project_id = s.project_id AND t.trace_id = s.trace_id) LIMIT :n"
        )
        args = {"w": int(within_s * 1e9)}
        return self._per_project(sql, args, limit, "look for unfinished traces")

    def stale_event_rows(self, within_s: float, limit: int) -> list[tuple[str, str]]:
        """``(project, trace id)`` of traces whose row is older than some of their span events
        (stored apart, from OTLP log records): a server stopped between storing the events
        and building the row again. Among events timed within ``within_s`` of now."""
        sql = sa.text(
            "SELECT DISTINCT e.trace_id FROM span_events e JOIN traces t "
            "ON t.project_id = e.project_id AND t.trace_id = e.trace_id "
            "WHERE e.project_id = :p AND e.time_ns >= :since AND e.seq > t.completed_at * 1e9 "
            "LIMIT :n"
        )
        args = {"since": time.time_ns() - int(within_s * 1e9)}
        return self._per_project(sql, args, limit, "look for stale trace rows")

    def _per_project(
        self, sql: sa.TextClause, args: dict[str, Any], limit: int, what: str
    ) -> list[tuple[str, str]]:
        """``(project, trace id)`` that ``sql`` (bound to ``:p``, ``:n`` and ``args``) finds in
        each project in turn, at most ``limit`` in all."""
        found: list[tuple[str, str]] = []
        try:
            for project in self._projects():
                if len(found) >= limit:
                    break
                with self.engine.connect() as conn:
                    bound = {**args, "p": project, "n": limit - len(found)}
                    found += [(project, str(r[0])) for r in conn.execute(sql, bound)]
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"cannot {what} in {self.store.location}: {e}") from e
        return found

    def _projects(self) -> list[str]:
        """The projects with rows, by a loose index scan (one index probe per project)."""
        found: set[str] = set()
        with self.engine.connect() as conn:
            for table in ("spans", "traces", "trace_feedback", "span_events"):
                sql = (
                    f"WITH RECURSIVE p(id) AS (SELECT MIN(project_id) FROM {table} UNION ALL "
                    f"SELECT (SELECT MIN(project_id) FROM {table} WHERE project_id > p.id) "
                    "FROM p WHERE p.id IS NOT NULL) SELECT id FROM p WHERE id IS NOT NULL"
                )
                found.update(str(r[0]) for r in conn.exec_driver_sql(sql))
        return sorted(found)

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None


def trace_row(project: str, s: TraceSummary) -> tuple[Any, ...]:
    """A summary as a row of ``TRACE_COLUMNS`` (previews cut, the record as JSON text)."""
    return (
        project,
        s.trace_id,
        s.service[:MAX_SERVICE],
        s.root_name,
        s.start_time_unix_nano,
        s.end_time_unix_nano,
        s.duration_ms,
        s.span_count,
        int(s.error),
        s.session_id,
        s.user_id,
        preview(s.input_preview),
        preview(s.output_preview),
        dumps(s.record) if s.record is not None else None,
        s.completed_at,
    )
