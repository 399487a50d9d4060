"""The SQL store: runs and results over SQLAlchemy Core (SQLite embedded, PostgreSQL later).

Writes are batched upserts through the driver's ``executemany`` (the hot path: millions of
rows); every batch is committed, so a process killed half way leaves what it wrote readable.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy import event

from evalsi.core import (
    EvaluationResult,
    Outcome,
    ResultBatch,
    Score,
    StoreError,
    UserError,
    decode_score,
)
from evalsi.store._rows import RowWriter, scores_from_dicts, sqlite_pragmas
from evalsi.store._schema import SCHEMA_VERSION, meta, metadata, results, runs


@dataclass(slots=True)
class RunInfo:
    """A run as the store knows it."""

    id: str
    kind: str
    status: str
    created_at: float
    name: str = ""
    finished_at: float | None = None
    records: int = 0
    spec: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    error: str | None = None
    pid: int | None = None

    @property
    def evaluators(self) -> list[dict[str, Any]]:
        return list(self.spec.get("evaluators", []))


def new_run_id() -> str:
    """Sortable by time and readable: ``20261129-174501-3f9a2c``."""
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)


class SqlStore:
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
        self._pk: dict[str, int] = {}
        try:
            metadata.create_all(engine)
            with engine.begin() as conn:
                row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema")).first()
                if row is None:
                    conn.execute(meta.insert().values(key="schema", value=str(SCHEMA_VERSION)))
                elif int(row[0]) > SCHEMA_VERSION:
                    raise StoreError(
                        f"{location}: store schema v{row[0]} is newer than this evalsi "
                        f"(v{SCHEMA_VERSION})",
                        hint="upgrade evalsi",
                    )
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(
                f"cannot open the store at {location}: {e.__class__.__name__}: {e}"
            ) from e
        self._mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        self._raw: Any = None
        self._rows: RowWriter | None = None

    @property
    def sqlite_path(self) -> str:
        """The database file of a SQLite store ("" when in memory or not SQLite)."""
        return str(self.engine.url.database or "") if self.is_sqlite_file else ""

    @property
    def is_sqlite_file(self) -> bool:
        """A SQLite database in a file (which another process may open too)."""
        database = self.engine.url.database
        return self.engine.dialect.name == "sqlite" and database not in (None, "", ":memory:")

    @classmethod
    def open(cls, location: str | os.PathLike[str]) -> SqlStore:
        """Open a store: a SQLite file path, ``:memory:``, or a SQLAlchemy URL."""
        text = str(location)
        if "://" in text:
            engine = sa.create_engine(text)
        else:
            if text != ":memory:":
                path = Path(text)
                if path.is_dir():
                    raise UserError(f"--store {text}: is a directory; give a database file path")
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StoreError(f"cannot create the store directory {path.parent}: {e}") from e
            engine = sa.create_engine(
                "sqlite://" if text == ":memory:" else f"sqlite:///{text}",
                poolclass=sa.pool.StaticPool if text == ":memory:" else None,
            )
            event.listen(engine, "connect", lambda conn, _record: sqlite_pragmas(conn))
        return cls(engine, location=text)

    # -- runs -----------------------------------------------------------------------------------
    def create_run(
        self, *, kind: str, spec: dict[str, Any], name: str = "", run_id: str | None = None
    ) -> RunInfo:
        info = RunInfo(
            id=run_id or new_run_id(),
            kind=kind,
            status="running",
            created_at=time.time(),
            name=name,
            spec=spec,
            pid=os.getpid(),
        )
        with self.engine.begin() as conn:
            pk = conn.execute(
                runs.insert().values(
                    id=info.id,
                    name=name,
                    kind=kind,
                    status=info.status,
                    created_at=info.created_at,
                    pid=info.pid,
                    records=0,
                    spec=spec,
                )
            ).inserted_primary_key
        assert pk is not None
        self._pk[info.id] = int(pk[0])
        return info

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        records: int,
        summary: dict[str, Any] | None,
        manifest: dict[str, Any] | None,
        error: str | None = None,
    ) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                runs.update()
                .where(runs.c.id == run_id)
                .values(
                    status=status,
                    finished_at=time.time(),
                    records=records,
                    summary=summary,
                    manifest=manifest,
                    error=error,
                )
            )

    def set_progress(self, run_id: str, records: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(records=records))

    def list_runs(self, limit: int = 20) -> list[RunInfo]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(runs).order_by(runs.c.created_at.desc(), runs.c.pk.desc()).limit(limit)
            ).mappings()
            return [self._info(row) for row in rows]

    def get_run(self, ref: str) -> RunInfo:
        """A run by id, unique id prefix, or ``latest``."""
        with self.engine.connect() as conn:
            if ref == "latest":
                query = sa.select(runs).order_by(runs.c.created_at.desc(), runs.c.pk.desc())
                rows = list(conn.execute(query.limit(1)).mappings())
            else:
                rows = list(conn.execute(sa.select(runs).where(runs.c.id == ref)).mappings())
                if not rows:
                    escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                    like = sa.select(runs).where(runs.c.id.like(escaped + "%", escape="\\"))
                    rows = list(conn.execute(like.limit(2)).mappings())
        if len(rows) == 1:
            return self._info(rows[0])
        if not rows:
            raise UserError(
                f"no run {ref!r} in the store at {self.location}",
                hint="`evalsi runs list` shows the runs this store holds",
            )
        raise UserError(f"run id prefix {ref!r} is ambiguous; give more characters")

    def _info(self, row: Any) -> RunInfo:
        self._pk[row["id"]] = row["pk"]
        status = row["status"]
        if status == "running" and row["pid"] and not _alive(row["pid"]):
            status = "interrupted"
        return RunInfo(
            id=row["id"],
            kind=row["kind"],
            status=status,
            created_at=row["created_at"],
            name=row["name"] or "",
            finished_at=row["finished_at"],
            records=row["records"] or 0,
            spec=row["spec"] or {},
            manifest=row["manifest"],
            summary=row["summary"],
            error=row["error"],
            pid=row["pid"],
        )

    def _run_pk(self, run_id: str) -> int:
        pk = self._pk.get(run_id)
        if pk is None:
            self.get_run(run_id)
            pk = self._pk[run_id]
        return pk

    # -- results --------------------------------------------------------------------------------
    def write_batches(self, run_id: str, batches: Iterable[tuple[int, int, ResultBatch]]) -> int:
        """Upsert ``(evaluator_index, first_seq, batch)`` in one transaction; returns the rows.

        Entry ``i`` of a batch is the record at position ``first_seq + i``.
        """
        try:
            return self._writer(run_id).write(batches)
        except StoreError:
            raise
        except Exception as e:
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
            stream = conn.execution_options(yield_per=batch).execute(query).mappings()
            for row in stream:
                spec = specs[row["evaluator"]] if row["evaluator"] < len(specs) else {}
                yield row["seq"], row["evaluator"], _decode(row, spec)

    def count_results(self, run_id: str) -> int:
        with self.engine.connect() as conn:
            query = sa.select(sa.func.count()).where(results.c.run == self._run_pk(run_id))
            return int(conn.execute(query).scalar_one())

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        self.engine.dispose()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
