"""The results write path on a plain DB-API connection, free of SQLAlchemy.

Shared by the store itself and by the writer process, which must start fast (a second
interpreter that imports SQLAlchemy spends ~150 ms doing so). Holds the row layout of the
``results`` table (see ``_schema``), the multi-row upsert, and the wire form of a
``ResultBatch`` sent to the writer process.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from typing import Any, NamedTuple

import orjson

from evalsi.core import ResultBatch, Score, Usage


class OutputRow(NamedTuple):
    """One (sample, trial) of a Run as the ``outputs`` table holds it (JSON columns as text)."""

    seq: int
    trial: int
    record_id: str
    status: str  # ok | target_error | skipped | infra_error | cancelled
    kind: str | None = None
    output: str | None = None
    usage: str | None = None
    error: str | None = None
    attempts: int = 1
    trajectory: str | None = None  # JSON of the target's Trajectory.to_value()
    cassette: str | None = None  # the task's core.Cassette.index(); its blobs written with it


TaskResults = tuple[int, Sequence[int], ResultBatch]
"""``(evaluator_index, seqs, batch)``: entry ``i`` of the batch is the sample at ``seqs[i]``."""


COLUMNS = (
    "run",
    "seq",
    "trial",
    "evaluator",
    "record_id",
    "outcome",
    "kind",
    "value",
    "text",
    "extra",
)
CHUNK = 4096  # rows per statement: 7 parameters each, under SQLite's 32,766 (and PG's 65,535)


def sqlite_pragmas(conn: Any) -> None:
    """Per-connection settings: WAL (readers never block the writer), NORMAL sync, waits.

    WAL is a property of the database file: once one connection has set it, the others only
    read it. Switching needs a moment of exclusive access, so processes opening a new store
    together retry (SQLite may answer "locked" at once, without its busy handler).
    """
    cur = conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")
    for attempt in range(_WAL_ATTEMPTS):
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or attempt == _WAL_ATTEMPTS - 1:
                raise
            time.sleep(0.05)
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


_WAL_ATTEMPTS = 100  # x 50 ms: concurrent first opens of one store settle well within this


class RowWriter:
    """Upserts result batches of one run through a DB-API connection, one commit per call."""

    def __init__(self, conn: Any, run: int, *, mark: str = "?") -> None:
        self.conn = conn
        self.run = run
        self.mark = mark
        self._statements: dict[tuple[int, int, int], str] = {}

    def _upsert(self, trial: int, evaluator: int, rows: int) -> str:
        """One multi-row upsert per chunk: one driver call, one parse, one step.

        The run, trial and evaluator are the same for every row of a batch, so they are
        written into the statement as integer literals (ours, never user data) instead of being
        bound thousands of times; statements for full chunks are cached.
        """
        key = (trial, evaluator, rows)
        sql = self._statements.get(key)
        if sql is None:
            m = self.mark
            constants = (int(self.run), m, int(trial), int(evaluator), *([m] * 6))
            values = "(" + ", ".join(str(c) for c in constants) + ")"
            sql = (
                f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES "
                + ", ".join([values] * rows)
                + " ON CONFLICT (run, seq, trial, evaluator) DO UPDATE SET "
                + ", ".join(f"{c}=excluded.{c}" for c in COLUMNS[4:])
            )
            if rows == CHUNK:
                if len(self._statements) > 64:
                    self._statements.clear()
                self._statements[key] = sql
        return sql

    def write(self, batches: Iterable[tuple[int, int, ResultBatch]]) -> int:
        """Upsert ``(evaluator_index, first_seq, batch)`` tuples and commit; returns the rows."""
        written = 0
        try:
            cur = self.conn.cursor()
            for index, first_seq, batch in batches:
                n = len(batch)
                if batch.scores.count(None) == n:
                    extra: Iterable[str | None] = repeat(None, n)
                else:
                    extra = [scores_json(s) if s is not None else None for s in batch.scores]
                rows = list(
                    zip(
                        range(first_seq, first_seq + n),
                        batch.ids,
                        batch.outcome,
                        batch.kind,
                        batch.value,
                        batch.text,
                        extra,
                        strict=False,  # `extra` may be an endless repeat
                    )
                )
                for start in range(0, n, CHUNK):
                    chunk = rows[start : start + CHUNK]
                    sql = self._upsert(batch.trial, index, len(chunk))
                    cur.execute(sql, list(chain.from_iterable(chunk)))
                written += n
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            raise
        return written


def scores_json(scores: list[Score]) -> str:
    return orjson.dumps([score_dict(s) for s in scores]).decode()


def score_dict(s: Score) -> dict[str, Any]:
    out: dict[str, Any] = {"name": s.name, s.kind: s.value}
    if s.explanation:
        out["explanation"] = s.explanation
    if s.confidence is not None:
        out["confidence"] = s.confidence
    if s.cost is not None:
        out["cost"] = {k: v for k in s.cost.__slots__ if (v := getattr(s.cost, k)) is not None}
    if s.metadata:
        out["metadata"] = s.metadata
    return out


def scores_from_dicts(items: list[dict[str, Any]]) -> list[Score]:
    """The inverse of ``score_dict`` over a list."""
    out = []
    for item in items:
        cost = item.get("cost")
        out.append(
            Score(
                name=item.get("name", ""),
                number=item.get("number"),
                passed=item.get("passed"),
                label=item.get("label"),
                structured=item.get("structured"),
                explanation=item.get("explanation", ""),
                confidence=item.get("confidence"),
                cost=Usage(**cost) if cost else None,
                metadata=item.get("metadata", {}),
            )
        )
    return out


def encode_batches(item: Iterable[tuple[int, int, ResultBatch]]) -> bytes:
    """The bytes a writer process receives for one submission (orjson, columns as lists)."""
    return orjson.dumps(
        [
            [
                index,
                first_seq,
                b.trial,
                b.evaluator,
                b.ref,
                b.metric,
                b.ids,
                b.outcome,
                b.kind,
                b.value,
                b.text,
                None
                if b.scores.count(None) == len(b)
                else [
                    [score_dict(s) for s in full] if full is not None else None for full in b.scores
                ],
            ]
            for index, first_seq, b in item
        ]
    )


def decode_batches(data: bytes) -> list[tuple[int, int, ResultBatch]]:
    """The inverse of ``encode_batches``."""
    out = []
    for (
        index,
        first_seq,
        trial,
        name,
        ref,
        metric,
        ids,
        outcome,
        kind,
        value,
        text,
        full,
    ) in orjson.loads(data):
        batch = ResultBatch(name, ref, metric, ids, trial=trial)
        batch.outcome, batch.kind, batch.value, batch.text = outcome, kind, value, text
        if full is not None:
            batch.scores = [scores_from_dicts(s) if s is not None else None for s in full]
        out.append((index, first_seq, batch))
    return out
