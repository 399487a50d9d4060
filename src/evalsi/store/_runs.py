"""The ``runs`` table: a run's life (create, own, heartbeat, finish, claim) and the queries a
server pages through. ``SqlStore`` inherits these; results and outputs live in ``_sql.py``.

Status is stored as written, except that a ``queued`` or ``running`` run whose owner is gone
(``_owner.py``) reads as ``interrupted``; filters on status use that effective status.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import threading
import time
import weakref
from collections.abc import Collection, Iterable, Iterator
from typing import Any, NamedTuple

import sqlalchemy as sa

from evalsi.core import NotFoundError, ResultBatch, RunInfo, RunStatus, StoreError, UserError
from evalsi.store._owner import (
    HEARTBEAT_SECONDS,
    HOST,
    LIVE,
    Lease,
    now_sql,
    owner_gone,
    owner_token,
    owner_values,
)
from evalsi.store._rows import RowWriter
from evalsi.store._schema import runs

STATUSES = tuple(RunStatus)
"""Every status a run may be given (``core.RunStatus``)."""

DEFAULT_PROJECT = "default"

SCOPE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""What a project id may be: safe in a URL path, a file name, a label."""


MAX_REF_CHARS = 256
"""Longer than any run id: a longer reference is not looked up (a long LIKE pattern is work the
database may even refuse: SQLite's "LIKE or GLOB pattern too complex")."""


class RunKey(NamedTuple):
    """What child rows of a run need: its integer key and the scope they inherit."""

    pk: int
    project_id: str
    tenant_id: str


def new_run_id() -> str:
    """Sortable by time and readable: ``20261129-174501-3f9a2c81d04e``.

    48 random bits: a server can start hundreds of runs a second (one per Evaluate call), and
    with 24 bits two ids in the same second collided in a benchmark.
    """
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(6)


def check_project_id(project_id: str) -> str:
    if not isinstance(project_id, str) or not SCOPE_ID.fullmatch(project_id):
        raise UserError(
            f"project_id {project_id!r} is not valid: expected 1-64 letters, digits, '.', '_' "
            "or '-', starting with a letter or digit",
            hint=f"leave it out for the {DEFAULT_PROJECT!r} project",
        )
    return project_id


def _check_status(status: str, allowed: tuple[str, ...] = STATUSES) -> str:
    if status not in allowed:
        raise UserError(f"status {status!r} is not one of: {', '.join(allowed)}")
    return status


_SAVED_COLUMNS = (
    "id", "name", "kind", "status", "created_at", "finished_at", "records", "spec", "manifest",
    "summary", "error", "project_id", "tenant_id", "host", "pid", "owner", "created_by",
)  # fmt: skip
_JSON_COLUMNS = frozenset(("spec", "manifest", "summary"))


class RunTable:
    """The runs-table half of ``SqlStore`` (which sets ``engine`` and ``location``)."""

    engine: sa.Engine
    location: str
    _keys: dict[str, RunKey]
    _beat: _Heartbeat | None
    _save_sql: str | None = None

    # -- a run's life ---------------------------------------------------------------------------
    def create_run(
        self,
        *,
        kind: str,
        spec: dict[str, Any],
        name: str = "",
        run_id: str | None = None,
        project_id: str = DEFAULT_PROJECT,
        status: str = "running",
        at: float | None = None,
        created_by: str = "",
    ) -> RunInfo:
        """Store a new run owned by this process (``queued`` or ``running``) in ``project_id``,
        created ``at`` (unix seconds; default now); its results and outputs inherit the
        project (and the reserved tenant). ``created_by`` is the principal that started it
        (``provider/subject``; "" without authentication)."""
        check_project_id(project_id)
        _check_status(status, LIVE)
        run_id = run_id or new_run_id()
        with self.engine.begin() as conn:
            pk = conn.execute(
                runs.insert().values(
                    id=run_id,
                    name=name,
                    kind=kind,
                    status=status,
                    created_at=time.time() if at is None else at,
                    records=0,
                    spec=spec,
                    project_id=project_id,
                    tenant_id="",
                    heartbeat_at=self._now(),
                    # only when set: the column's default is "" (and a store older than
                    # schema 9, as the migration tests make one, has no such column)
                    **({"created_by": created_by} if created_by else {}),
                    **owner_values(),
                )
            ).inserted_primary_key
        assert pk is not None
        self._keys[run_id] = RunKey(int(pk[0]), project_id, "")
        self._start_heartbeat()
        return self._fetch(run_id)

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        records: int,
        summary: dict[str, Any] | None,
        manifest: dict[str, Any] | None,
        error: str | None = None,
        at: float | None = None,
    ) -> None:
        """End a run with ``status``, finished ``at`` (unix seconds; default now)."""
        with self.engine.begin() as conn:
            conn.execute(
                runs.update()
                .where(runs.c.id == run_id)
                .values(
                    status=status,
                    finished_at=time.time() if at is None else at,
                    records=records,
                    summary=summary,
                    manifest=manifest,
                    error=error,
                )
            )

    def save_run(
        self,
        *,
        kind: str,
        spec: dict[str, Any],
        status: str,
        records: int,
        summary: dict[str, Any] | None,
        manifest: dict[str, Any] | None,
        batches: Iterable[tuple[int, int, ResultBatch]] = (),
        name: str = "",
        run_id: str | None = None,
        project_id: str = DEFAULT_PROJECT,
        error: str | None = None,
        at: float | None = None,
        created_by: str = "",
    ) -> str:
        """Store a run that is already over (``at``: unix seconds, default now), with its
        results, in ONE transaction; its id.

        What ``create_run`` + ``write_batches`` + ``finish_run`` store, for a caller that has
        every result in hand before it writes (a server's one-message Evaluate): either all of
        it is committed or nothing is. One prebuilt statement per table on a pooled DB-API
        connection, so it may be called from several threads at once when ``any_thread``.
        """
        check_project_id(project_id)
        _check_status(status)
        run_id = run_id or new_run_id()
        now = time.time() if at is None else at
        values: dict[str, Any] = {
            "id": run_id, "name": name, "kind": kind, "status": status, "created_at": now,
            "finished_at": now, "records": records, "spec": spec, "manifest": manifest,
            "summary": summary, "error": error, "project_id": project_id, "tenant_id": "",
            "host": HOST, "pid": os.getpid(), "owner": owner_token(), "created_by": created_by,
        }  # fmt: skip
        params = [
            None if (v := values[c]) is None else json.dumps(v) if c in _JSON_COLUMNS else v
            for c in _SAVED_COLUMNS
        ]
        sql, mark = self._save_statement()
        try:
            conn = self.engine.raw_connection()
            try:
                cur = conn.cursor()
                try:
                    cur.execute(sql, params)
                    row: Any = cur.fetchone()
                    pk = int(row[0])
                    # Commits the run row with the results, or rolls both back.
                    RowWriter(conn, pk, mark=mark).write(batches)
                except BaseException:
                    conn.rollback()
                    raise
                finally:
                    cur.close()
            finally:
                conn.close()
        except (UserError, StoreError):
            raise
        except Exception as e:
            raise StoreError(f"cannot save run {run_id} to {self.location}: {e}") from e
        self._keys[run_id] = RunKey(pk, project_id, "")
        return run_id

    def _save_statement(self) -> tuple[str, str]:
        """The run-row insert of ``save_run`` (built once per store) and the driver's mark."""
        dialect = self.engine.dialect
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        if self._save_sql is None:
            # JSON as text, as SQLAlchemy's JSON type writes it (json.dumps); PostgreSQL casts.
            json_mark = f"CAST({mark} AS JSON)" if dialect.name == "postgresql" else mark
            marks = [json_mark if c in _JSON_COLUMNS else mark for c in _SAVED_COLUMNS]
            now = str(now_sql(dialect.name).compile(dialect=dialect))
            self._save_sql = (
                f"INSERT INTO runs ({', '.join(_SAVED_COLUMNS)}, heartbeat_at) "
                f"VALUES ({', '.join(marks)}, {now}) RETURNING pk"
            )
        return self._save_sql, mark

    @property
    def any_thread(self) -> bool:
        """Whether ``save_run`` may be called from any thread: every store but an in-memory
        SQLite one, whose single connection belongs to the thread that opened it."""
        return not isinstance(self.engine.pool, sa.pool.StaticPool)

    def reopen_run(self, run_id: str) -> RunInfo:
        """Mark a stopped or interrupted run as running again in this process (resume)."""
        with self.engine.begin() as conn:
            conn.execute(
                runs.update()
                .where(runs.c.id == run_id)
                .values(
                    status="running",
                    finished_at=None,
                    error=None,
                    heartbeat_at=self._now(),
                    **owner_values(),
                )
            )
        self._start_heartbeat()
        return self._fetch(run_id)

    def claim_run(self, run_id: str) -> RunInfo | None:
        """Take over a run that reads ``interrupted``, atomically: it becomes ``queued`` and
        owned by this process; None when it is not interrupted or another process claimed it
        first. Then resume it (``execute_run(resume=...)`` reopens it as ``running``).

        Servers sharing a store may all call this on start for the same run; one wins.
        """
        with self.engine.begin() as conn:
            row = conn.execute(self._select().where(runs.c.id == run_id)).mappings().first()
            if row is None:
                raise NotFoundError(f"no run {run_id!r} in this store")
            if self._status(row) != "interrupted":
                return None
            same = [runs.c.id == run_id, runs.c.status == row["status"]]
            same += [runs.c[c].is_not_distinct_from(row[c]) for c in ("host", "pid", "owner")]
            same.append(runs.c.heartbeat_at.is_not_distinct_from(row["heartbeat_at"]))
            won = conn.execute(
                runs.update()
                .where(*same)
                .values(
                    status="queued",
                    finished_at=None,
                    heartbeat_at=self._now(),
                    **owner_values(),
                )
            ).rowcount
        if won != 1:
            return None
        self._start_heartbeat()
        return self._fetch(run_id)

    def mark_status(self, run_id: str, status: str, *, error: str | None = None) -> RunInfo:
        """Set a run's status (``queued``, ``cancelled``...). A live status makes this process
        the owner; any other ends the run now (``finished_at``)."""
        _check_status(status)
        values: dict[str, Any] = {"status": status}
        if status in LIVE:
            values.update(finished_at=None, heartbeat_at=self._now(), **owner_values())
        else:
            values["finished_at"] = time.time()
        if error is not None:
            values["error"] = error
        with self.engine.begin() as conn:
            found = conn.execute(runs.update().where(runs.c.id == run_id).values(values)).rowcount
        if found != 1:
            raise NotFoundError(f"no run {run_id!r} in this store")
        if status in LIVE:
            self._start_heartbeat()
        return self._fetch(run_id)

    def set_summary(self, run_id: str, summary: dict[str, Any]) -> None:
        """Replace a run's summary (a live run's state, such as an online policy's counts)."""
        with self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(summary=summary))

    def set_progress(self, run_id: str, records: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(records=records))

    def heartbeat(self, run_id: str | None = None) -> int:
        """Refresh the heartbeat of the live runs this process owns (or of ``run_id`` only);
        returns how many. ``SqlStore`` calls it every ``HEARTBEAT_SECONDS`` from a thread while
        it is open, so callers need not."""
        me = owner_values()
        query = (
            runs.update()
            .where(runs.c.owner == me["owner"], runs.c.host == HOST, runs.c.pid == me["pid"])
            .where(runs.c.status.in_(LIVE))
        )
        if run_id is not None:
            query = query.where(runs.c.id == run_id)
        with self.engine.begin() as conn:
            return int(conn.execute(query.values(heartbeat_at=self._now())).rowcount)

    # -- reading --------------------------------------------------------------------------------
    def get_run(self, ref: str, *, project_id: str | None = None) -> RunInfo:
        """A run by id, unique id prefix, or ``latest``; with ``project_id``, only a run of
        that project is found (the id, the prefix and ``latest`` all resolve within it), so
        a caller scoped to one project cannot read another's runs by guessing ids."""
        if not ref.strip():
            raise UserError("a run id is empty", hint="give a run id, a unique prefix, or latest")
        select = self._select()
        if project_id is not None:
            select = select.where(runs.c.project_id == project_id)
        with self.engine.connect() as conn:
            if ref == "latest":
                query = select.order_by(runs.c.created_at.desc(), runs.c.pk.desc())
                rows = list(conn.execute(query.limit(1)).mappings())
            elif len(ref) > MAX_REF_CHARS:  # no run id is that long, nor a prefix of one
                rows = []
            else:
                rows = list(conn.execute(select.where(runs.c.id == ref)).mappings())
                if not rows:
                    escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                    like = select.where(runs.c.id.like(escaped + "%", escape="\\"))
                    rows = list(conn.execute(like.limit(2)).mappings())
        if len(rows) == 1:
            return self._info(rows[0])
        if not rows:
            where = f" in project {project_id!r}" if project_id is not None else ""
            shown = ref if len(ref) <= 80 else ref[:80] + "..."
            raise NotFoundError(
                f"no run {shown!r}{where} in this store",
                hint="`evalsi runs list` shows the runs this store holds",
            )
        raise UserError(f"run id prefix {ref!r} is ambiguous; give more characters")

    def list_runs(
        self,
        limit: int = 20,
        *,
        after: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        project_id: str | None = None,
        projects: Collection[str] | None = None,
    ) -> list[RunInfo]:
        """Newest first, at most ``limit``. ``after`` is a page cursor: the id of the last run of
        the previous page (stable while runs are added). ``status`` is the effective status.
        ``projects``: only runs of these projects (what the caller may read)."""
        if limit < 1:
            raise UserError(f"limit must be at least 1, got {limit}")
        return list(
            self._scan(limit, after, kind, status, project_id, newest_first=True, projects=projects)
        )

    def interrupted_runs(
        self, *, kind: str | None = None, project_id: str | None = None, limit: int = 10_000
    ) -> list[RunInfo]:
        """Runs a restarted server may resume, oldest first: stored ``interrupted`` (stopped by
        a signal) or left ``queued``/``running`` by an owner that is gone. Take one over with
        ``claim_run`` before resuming it, since other processes may see it too."""
        return list(self._scan(limit, None, kind, "interrupted", project_id, newest_first=False))

    def count_runs_by_status(self, project_id: str | None = None) -> dict[str, int]:
        """How many runs have each (effective) status."""
        settled = sa.select(runs.c.status, sa.func.count()).where(runs.c.status.not_in(LIVE))
        owners = sa.select(
            runs.c.status,
            runs.c.host,
            runs.c.pid,
            runs.c.owner,
            runs.c.heartbeat_at,
            self._now().label("store_now"),
        ).where(runs.c.status.in_(LIVE))
        if project_id is not None:
            settled = settled.where(runs.c.project_id == project_id)
            owners = owners.where(runs.c.project_id == project_id)
        counts: dict[str, int] = {}
        with self.engine.connect() as conn:
            for status, n in conn.execute(settled.group_by(runs.c.status)):
                counts[str(status)] = int(n)
            for row in conn.execute(owners).mappings():
                effective = self._status(row)
                counts[effective] = counts.get(effective, 0) + 1
        return counts

    # -- helpers --------------------------------------------------------------------------------
    def _scan(
        self,
        limit: int,
        after: str | None,
        kind: str | None,
        status: str | None,
        project_id: str | None,
        *,
        newest_first: bool,
        projects: Collection[str] | None = None,
    ) -> Iterator[RunInfo]:
        """Runs in (created_at, pk) order, keyset-paged; a filter on a live or ``interrupted``
        status is checked per row (it depends on the owner), so pages are read until full."""
        query = self._select()
        if kind is not None:
            query = query.where(runs.c.kind == kind)
        if project_id is not None:
            query = query.where(runs.c.project_id == project_id)
        if projects is not None:
            query = query.where(runs.c.project_id.in_(sorted(projects)))
        per_row = status is not None and (status in LIVE or status == "interrupted")
        if status is not None:
            stored = (status, *LIVE) if status == "interrupted" else (status,)
            query = query.where(runs.c.status.in_(stored))
        order = (runs.c.created_at, runs.c.pk)
        query = query.order_by(*(c.desc() for c in order) if newest_first else order)
        chunk = max(limit, 200) if per_row else limit
        with self.engine.connect() as conn:
            mark = self._cursor(conn, after) if after is not None else None
            given = 0
            while True:
                page = query if mark is None else query.where(_beyond(mark, newest_first))
                rows = list(conn.execute(page.limit(chunk)).mappings())
                for row in rows:
                    info = self._info(row)
                    if status is None or info.status == status:
                        yield info
                        given += 1
                        if given == limit:
                            return
                if len(rows) < chunk:
                    return
                mark = (rows[-1]["created_at"], rows[-1]["pk"])

    def _cursor(self, conn: sa.Connection, after: str) -> tuple[float, int]:
        row = conn.execute(
            sa.select(runs.c.created_at, runs.c.pk).where(runs.c.id == after)
        ).first()
        if row is None:
            raise UserError(
                f"page cursor {after!r} is not a run in this store",
                hint="pass the id of the last run of the previous page",
            )
        return float(row[0]), int(row[1])

    def _fetch(self, run_id: str) -> RunInfo:
        """A run by its exact id (no prefix, no ``latest``)."""
        with self.engine.connect() as conn:
            row = conn.execute(self._select().where(runs.c.id == run_id)).mappings().first()
        if row is None:
            raise NotFoundError(f"no run {run_id!r} in this store")
        return self._info(row)

    def _select(self) -> sa.Select[Any]:
        return sa.select(runs, self._now().label("store_now"))

    def _now(self) -> sa.ColumnElement[float]:
        return now_sql(self.engine.dialect.name)

    @staticmethod
    def _status(row: Any) -> str:
        status = str(row["status"])
        if status in LIVE and owner_gone(row, row["store_now"]):
            return "interrupted"
        return status

    def _info(self, row: Any) -> RunInfo:
        self._keys[row["id"]] = RunKey(row["pk"], row["project_id"], row["tenant_id"])
        return RunInfo(
            id=row["id"],
            kind=row["kind"],
            status=self._status(row),
            created_at=row["created_at"],
            name=row["name"] or "",
            finished_at=row["finished_at"],
            records=row["records"] or 0,
            spec=row["spec"] or {},
            manifest=row["manifest"],
            summary=row["summary"],
            error=row["error"],
            pid=row["pid"],
            project_id=row["project_id"],
            tenant_id=row["tenant_id"],
            host=row["host"],
            heartbeat_at=row["heartbeat_at"],
            created_by=row["created_by"] or "",
        )

    def _run_key(self, run_id: str) -> RunKey:
        key = self._keys.get(run_id)
        if key is None:
            self._fetch(run_id)
            key = self._keys[run_id]
        return key

    def _run_pk(self, run_id: str) -> int:
        return self._run_key(run_id).pk

    def _start_heartbeat(self) -> None:
        if self._beat is None and self._shared():
            self._beat = _Heartbeat(self)

    def _shared(self) -> bool:
        """Whether another process can see this store (an in-memory SQLite cannot)."""
        database = self.engine.url.database
        return self.engine.dialect.name != "sqlite" or database not in (None, "", ":memory:")

    def _stop_heartbeat(self) -> None:
        if self._beat is not None:
            self._beat.stop()
            self._beat = None


def _beyond(mark: tuple[float, int], newest_first: bool) -> sa.ColumnElement[bool]:
    created, pk = mark
    if newest_first:
        return sa.or_(
            runs.c.created_at < created, sa.and_(runs.c.created_at == created, runs.c.pk < pk)
        )
    return sa.or_(
        runs.c.created_at > created, sa.and_(runs.c.created_at == created, runs.c.pk > pk)
    )


def _beat_every() -> float:
    """Seconds between heartbeats: this module's ``HEARTBEAT_SECONDS`` when a test lowered it,
    else the lease's."""
    return min(HEARTBEAT_SECONDS, Lease.heartbeat_s)


class _Heartbeat:
    """Refreshes the heartbeat of the live runs this process owns, while the store is open.

    A thread, not the executor's job: a run waiting minutes on a slow target or a rate limit
    still beats, whatever kind of run it is. It holds the store weakly, so a store dropped
    without ``close`` does not live on.
    """

    def __init__(self, table: RunTable) -> None:
        self._table = weakref.ref(table)
        self._stop = threading.Event()
        self._token = owner_token()
        self._thread = threading.Thread(target=self._loop, name="evalsi-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(_beat_every()):
            table = self._table()
            if table is None or self._token != owner_token():  # dropped, or we were forked
                return
            # a missed beat is retried; only STALE_AFTER seconds of them would matter
            with contextlib.suppress(Exception):
                table.heartbeat()
            del table

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=_beat_every())
