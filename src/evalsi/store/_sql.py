"""The SQL store: runs and results over SQLAlchemy Core (SQLite embedded, or PostgreSQL).

Writes are batched upserts through the driver's ``executemany`` (the hot path: millions of
rows); every batch is committed, so a process killed half way leaves what it wrote readable.
Opening a store applies the schema migrations it lacks (``_migrations.py``); the runs table's
queries are in ``_runs.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy import event

from evalsi.core import (
    EvaluationResult,
    Outcome,
    ResultBatch,
    RunInfo,
    Score,
    StoreError,
    UserError,
    decode_score,
    require_extra,
)
from evalsi.store._migrations import migrate
from evalsi.store._rows import (
    COLUMNS,
    OutputRow,
    RowWriter,
    TaskResults,
    scores_from_dicts,
    scores_json,
    sqlite_pragmas,
)
from evalsi.store._runs import RunKey, RunTable, new_run_id
from evalsi.store._schema import judge_cache, outputs, results

__all__ = ["OutputRow", "RunInfo", "SqlStore", "TaskResults", "new_run_id"]

SCOPE_COLUMNS = ("project_id", "tenant_id")
"""Written with each output row from its run's values, never updated."""

OUTPUT_COLUMNS = (
    "seq",
    "trial",
    "record_id",
    "status",
    "kind",
    "output",
    "usage",
    "error",
    "attempts",
    "trajectory",
    "cassette",
)


def _not_a_directory(path: Path) -> str:
    """Why ``path`` cannot be a directory when a part of it is a file ("" when none is)."""
    for part in (path, *path.parents):
        if part.exists():
            return "" if part.is_dir() else f"{part} is a file, not a directory"
    return ""


class SqlStore(RunTable):
    """Runs and results in one SQL database.

    Example:
        >>> store = SqlStore.open(":memory:")
        >>> run = store.create_run(kind="score", spec={"evaluators": []})
        >>> store.get_run(run.id).status
        'running'
    """

    def __init__(self, engine: sa.Engine, *, location: str) -> None:
        self.engine = engine
        self.location = location
        self.closed = False  # after close(), a read would open a connection nobody closes
        self._keys: dict[str, RunKey] = {}
        self._beat = None
        try:
            # the schema versions this open applied (usually none)
            self.migrations_applied: list[int] = migrate(engine, location)
        except BaseException as e:
            engine.dispose()  # a refused store leaves no connection behind
            if isinstance(e, sa.exc.SQLAlchemyError):
                # The driver's own error, without SQLAlchemy's wrapper and web link.
                cause = getattr(e, "orig", None) or e
                raise StoreError(
                    f"cannot open the store at {location}: {type(cause).__name__}: {cause}"
                ) from e
            raise
        self._mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        self._raw: Any = None
        # The raw connection serves write_batches and write_tasks from any thread (the
        # scheduler, the server's handlers, the policy engine): one writer at a time.
        self._raw_lock = threading.RLock()
        self._cache_conn: Any = None
        self._rows: RowWriter | None = None

    @property
    def sqlite_path(self) -> str:
        """The database file of a SQLite store ("" when in memory or not SQLite)."""
        return str(self.engine.url.database or "") if self.is_sqlite_file else ""

    @property
    def is_sqlite_file(self) -> bool:
        """A SQLite database in a file (which another process may open too)."""
        return self.engine.dialect.name == "sqlite" and self._shared()

    @classmethod
    def open(cls, location: str | os.PathLike[str]) -> SqlStore:
        """Open a store: a SQLite file path, ``:memory:``, or a SQLAlchemy URL
        (``postgresql+psycopg://user@host/db``; ``postgresql://`` means the same)."""
        text = str(location)
        if "://" in text:
            if text.startswith("postgresql://"):  # the driver is psycopg 3 (the postgres extra)
                text = "postgresql+psycopg://" + text[len("postgresql://") :]
            if text.startswith("postgresql+psycopg://"):
                require_extra("a PostgreSQL store", "postgres", "psycopg")
            engine = sa.create_engine(text)
        else:
            if text != ":memory:":
                path = Path(text)
                if path.is_dir():
                    raise UserError(f"--store {text}: is a directory; give a database file path")
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    why = _not_a_directory(path.parent) or e.strerror or str(e)
                    raise StoreError(
                        f"cannot create the store directory {path.parent}: {why}",
                        hint="give --store a path in a directory this process can write",
                    ) from e
            engine = sa.create_engine(
                "sqlite://" if text == ":memory:" else f"sqlite:///{text}",
                poolclass=sa.pool.StaticPool if text == ":memory:" else None,
            )
            event.listen(engine, "connect", lambda conn, _record: sqlite_pragmas(conn))
        if "://" in text:  # a URL may hold a password: messages show it masked
            text = engine.url.render_as_string(hide_password=True)
        return cls(engine, location=text)

    # -- results --------------------------------------------------------------------------------
    def write_batches(self, run_id: str, batches: Iterable[tuple[int, int, ResultBatch]]) -> int:
        """Upsert ``(evaluator_index, first_seq, batch)`` in one transaction; returns the rows.

        Entry ``i`` of a batch is the record at position ``first_seq + i``.
        """
        try:
            with self._raw_lock:
                return self._writer(run_id).write(batches)
        except StoreError:
            self._drop_raw()
            raise
        except Exception as e:
            self._drop_raw()
            raise StoreError(f"cannot write results to {self.location}: {e}") from e

    def _writer(self, run_id: str) -> RowWriter:
        pk = self._run_pk(run_id)
        if self._rows is None or self._rows.run != pk:
            self._rows = RowWriter(self._raw_connection(), pk, mark=self._mark)
        return self._rows

    def _raw_connection(self) -> Any:
        if self._raw is None:
            self._raw = self.engine.raw_connection()
        return self._raw

    def _drop_raw(self) -> None:
        """Forget the raw connection after a failed write: it may be the one that was lost
        (a database restart, a killed backend), and the next write opens a fresh one."""
        raw, self._raw, self._rows = self._raw, None, None
        if raw is not None:
            with contextlib.suppress(Exception):
                raw.invalidate()  # a pooled connection that is gone is not given out again
            with contextlib.suppress(Exception):
                raw.close()

    def iter_results(
        self,
        run_id: str,
        *,
        evaluator: int | None = None,
        outcome: Outcome | None = None,
        batch: int = 5000,
    ) -> Iterator[tuple[int, int, EvaluationResult]]:
        """Yield ``(seq, evaluator_index, result)`` in task-key order, streaming."""
        info = self.get_run(run_id)
        specs: Sequence[dict[str, Any]] = info.evaluators
        query = sa.select(results).where(results.c.run == self._run_pk(run_id))
        if evaluator is not None:
            query = query.where(results.c.evaluator == evaluator)
        if outcome is not None:
            query = query.where(results.c.outcome == int(outcome))
        query = query.order_by(results.c.seq, results.c.trial, results.c.evaluator)
        with self.engine.connect() as conn:
            cursor = conn.execution_options(yield_per=batch).execute(query)
            try:
                for row in cursor.mappings():
                    spec = specs[row["evaluator"]] if row["evaluator"] < len(specs) else {}
                    yield row["seq"], row["evaluator"], _decode(row, spec)
            finally:  # a caller that stops early must not leave a server-side cursor open
                cursor.close()

    # -- outputs of a Run ------------------------------------------------------------------------
    def write_tasks(
        self,
        run_id: str,
        rows: Sequence[OutputRow],
        graded: Iterable[TaskResults] = (),
        blobs: Mapping[str, bytes] | None = None,
    ) -> None:
        """Upsert target outputs and their results in ONE transaction, with the cassette
        responses (``blobs``, by sha256) the rows' cassettes name.

        A task is complete only when its output and every evaluator's result are stored, so
        writing both atomically means a process killed at any instant leaves each task either
        complete or absent (and redone on resume), never half graded.
        """
        pk, *scope = self._run_key(run_id)
        m = self._mark
        out_cols = ("run", *OUTPUT_COLUMNS, *SCOPE_COLUMNS)
        out_sql = (
            f"INSERT INTO outputs ({', '.join(out_cols)}) VALUES "
            f"({', '.join([m] * len(out_cols))}) ON CONFLICT (run, seq, trial) "
            "DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in OUTPUT_COLUMNS[2:])
        )
        res_sql = (
            f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES "
            f"({', '.join([m] * len(COLUMNS))}) ON CONFLICT (run, seq, trial, evaluator) "
            "DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in COLUMNS[4:])
        )
        with self._raw_lock:
            self._write_tasks(pk, scope, out_sql, res_sql, rows, graded, blobs or {})

    def _write_tasks(
        self,
        pk: int,
        scope: Sequence[Any],
        out_sql: str,
        res_sql: str,
        rows: Sequence[OutputRow],
        graded: Iterable[TaskResults],
        blobs: Mapping[str, bytes],
    ) -> None:
        conn = self._raw_connection()
        try:
            cur = conn.cursor()
            if blobs:
                m = self._mark
                cur.executemany(
                    f"INSERT INTO cassette_blobs (sha256, body) VALUES ({m}, {m}) "
                    "ON CONFLICT (sha256) DO NOTHING",
                    list(blobs.items()),
                )
            if rows:
                cur.executemany(out_sql, [(pk, *row, *scope) for row in rows])
            for index, seqs, batch in graded:
                params = [
                    (
                        pk,
                        seq,
                        batch.trial,
                        index,
                        batch.ids[i],
                        batch.outcome[i],
                        batch.kind[i],
                        batch.value[i],
                        batch.text[i],
                        scores_json(full) if (full := batch.scores[i]) is not None else None,
                    )
                    for i, seq in enumerate(seqs)
                ]
                if params:
                    cur.executemany(res_sql, params)
            conn.commit()
        except BaseException as e:
            try:
                conn.rollback()
            except Exception:  # noqa: BLE001 - the connection itself is gone
                self._drop_raw()
            if isinstance(e, Exception):
                self._drop_raw()
                raise StoreError(f"cannot write outputs to {self.location}: {e}") from e
            raise

    async def write_tasks_async(
        self,
        run_id: str,
        rows: Sequence[OutputRow],
        graded: Iterable[TaskResults] = (),
        blobs: Mapping[str, bytes] | None = None,
    ) -> None:
        """``write_tasks`` from a coroutine: off the event loop when the store is a server
        (PostgreSQL: a commit waits on the network, and the loop has target calls to serve
        meanwhile), in line for SQLite (a local commit is quicker than a thread hop)."""
        if self.engine.dialect.name == "sqlite":
            self.write_tasks(run_id, rows, graded, blobs)
        else:
            await asyncio.to_thread(self.write_tasks, run_id, rows, list(graded), blobs)

    def write_outputs(self, run_id: str, rows: Sequence[OutputRow]) -> None:
        self.write_tasks(run_id, rows)

    def iter_outputs(self, run_id: str, *, batch: int = 5000) -> Iterator[OutputRow]:
        """Every stored (sample, trial) output of a run, in (seq, trial) order, streaming."""
        cols = [outputs.c[name] for name in OUTPUT_COLUMNS]
        query = (
            sa.select(*cols)
            .where(outputs.c.run == self._run_pk(run_id))
            .order_by(outputs.c.seq, outputs.c.trial)
        )
        with self.engine.connect() as conn:
            for row in conn.execution_options(yield_per=batch).execute(query):
                yield OutputRow(*row)

    def cassette_index(self, run_id: str) -> dict[tuple[str, int], str]:
        """Every recorded task's cassette index by (record id, trial), in (seq, trial) order."""
        query = (
            sa.select(outputs.c.record_id, outputs.c.trial, outputs.c.cassette)
            .where(outputs.c.run == self._run_pk(run_id))
            .where(outputs.c.cassette.is_not(None))
            .order_by(outputs.c.seq, outputs.c.trial)
        )
        with self.engine.connect() as conn:
            return {(str(r), int(t)): str(c) for r, t, c in conn.execute(query)}

    def cassette_blobs(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The cassette responses named by ``keys`` (sha256), those stored. On the raw
        connection: a replay asks for a task's responses as it starts the task."""
        wanted = sorted(set(keys))
        found: dict[str, bytes] = {}
        m = self._mark
        with self._raw_lock:
            cur = self._raw_connection().cursor()
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                cur.execute(
                    "SELECT sha256, body FROM cassette_blobs WHERE sha256 IN "
                    f"({', '.join([m] * len(chunk))})",
                    chunk,
                )
                found.update((str(k), bytes(b)) for k, b in cur.fetchall())
        return found

    def output_counts(self, run_id: str) -> dict[str, int]:
        """How many (sample, trial) tasks ended in each status."""
        query = (
            sa.select(outputs.c.status, sa.func.count())
            .where(outputs.c.run == self._run_pk(run_id))
            .group_by(outputs.c.status)
        )
        with self.engine.connect() as conn:
            return {str(status): int(n) for status, n in conn.execute(query)}

    def task_failures(self, run_id: str) -> list[tuple[str, str, int, str]]:
        """``(status, kind, count, example error)`` of a run's ``infra_error`` and
        ``target_error`` tasks, grouped by status and kind, the most frequent first."""
        query = (
            sa.select(
                outputs.c.status, outputs.c.kind, sa.func.count(), sa.func.min(outputs.c.error)
            )
            .where(outputs.c.run == self._run_pk(run_id))
            .where(outputs.c.status.in_(("infra_error", "target_error")))
            .group_by(outputs.c.status, outputs.c.kind)
        )
        with self.engine.connect() as conn:
            found = [
                (str(status), str(kind or status), int(n), str(example or ""))
                for status, kind, n, example in conn.execute(query)
            ]
        return sorted(found, key=lambda f: (-f[2], f[0], f[1]))

    def completed_tasks(self, run_id: str, evaluators: int) -> dict[tuple[int, int], str]:
        """``(seq, trial)`` → record id of the tasks a resume may skip: output stored as ``ok``,
        ``target_error`` or ``skipped`` and a result stored for each of ``evaluators`` that is
        not an infrastructure failure (those are retried on resume)."""
        pk = self._run_pk(run_id)
        infra = sa.and_(
            results.c.outcome == int(Outcome.ERROR), results.c.text.like("infra_error(%")
        )
        graded = (
            sa.select(results.c.seq, results.c.trial)
            .where(results.c.run == pk)
            .where(sa.not_(infra))
            .group_by(results.c.seq, results.c.trial)
            .having(sa.func.count() >= evaluators)
            .subquery()
        )
        query = (
            sa.select(outputs.c.seq, outputs.c.trial, outputs.c.record_id)
            .join(graded, sa.and_(graded.c.seq == outputs.c.seq, graded.c.trial == outputs.c.trial))
            .where(outputs.c.run == pk)
            .where(outputs.c.status.in_(("ok", "target_error", "skipped")))
        )
        with self.engine.connect() as conn:
            return {(int(s), int(t)): str(rid) for s, t, rid in conn.execute(query)}

    def has_results(self, run_id: str, seq: int, trial: int) -> bool:
        """Whether any evaluator's result for task ``(seq, trial)`` of the run is stored."""
        query = (
            sa.select(results.c.seq)
            .where(results.c.run == self._run_pk(run_id))
            .where(results.c.seq == seq, results.c.trial == trial)
            .limit(1)
        )
        with self.engine.connect() as conn:
            return conn.execute(query).first() is not None

    def count_results(self, run_id: str) -> int:
        with self.engine.connect() as conn:
            query = sa.select(sa.func.count()).where(results.c.run == self._run_pk(run_id))
            return int(conn.execute(query).scalar_one())

    # -- judge cache ----------------------------------------------------------------------------
    def judge_cache_get(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """The cached judge answer under ``key``: (text, usage of the original call), or None."""
        # A warm re-run looks up every judge call here: plain DBAPI, no statement building.
        if self._cache_conn is None:
            self._cache_conn = self.engine.raw_connection()
        cursor = self._cache_conn.cursor()
        try:
            cursor.execute(f"SELECT text, usage FROM judge_cache WHERE key = {self._mark}", (key,))
            row = cursor.fetchone()
        except Exception as e:  # the DBAPI's own error types differ per backend
            raise StoreError(f"cannot read the judge cache in {self.location}: {e}") from e
        finally:
            cursor.close()
        if self.engine.dialect.name != "sqlite":
            self._cache_conn.rollback()  # end the read transaction (SQLite autocommits reads)
        if row is None:
            return None
        usage = row[1]
        if isinstance(usage, (str, bytes)):
            usage = orjson.loads(usage)
        return str(row[0]), dict(usage or {})

    def judge_cache_put(self, key: str, text: str, usage: dict[str, Any]) -> None:
        """Remember a judge answer (the first answer under a key wins)."""
        row = {"key": key, "text": text, "usage": usage, "created_at": time.time()}
        insert: Any
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(judge_cache).values(row).on_conflict_do_nothing())
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"cannot write the judge cache in {self.location}: {e}") from e

    def ping(self) -> None:
        """``StoreError`` unless the store answers now (a worker waiting out a restart)."""
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"{self.location} does not answer: {e}") from e

    def close(self) -> None:
        self._stop_heartbeat()
        if self._cache_conn is not None:
            self._cache_conn.close()
            self._cache_conn = None
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        self.engine.dispose()
        self.closed = True


def _decode(row: Any, spec: dict[str, Any]) -> EvaluationResult:
    name = str(spec.get("name", ""))
    ref = str(spec.get("ref", ""))
    metric = ref.split("@", 1)[0].rsplit("/", 1)[-1] or name  # unnamed scores: the evaluator's name
    scores: list[Score] = []
    if row["extra"]:
        scores = scores_from_dicts(orjson.loads(row["extra"]))
    elif row["outcome"] == Outcome.SCORED:
        scores = decode_score(metric, row["kind"], row["value"], row["text"])
    return EvaluationResult(
        record_id=row["record_id"],
        evaluator=name,
        evaluator_ref=ref,
        outcome=Outcome(row["outcome"]),
        scores=scores,
        reason=(row["text"] or "") if row["outcome"] != Outcome.SCORED else "",
        trial=row["trial"],
    )
