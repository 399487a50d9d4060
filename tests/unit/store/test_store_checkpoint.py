"""Ingest's WAL checkpoints run in a thread of their own (``store/_checkpoint.py``), and the
multi-row statements come in a few sizes only (``_trace_rows.chunks``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalsi.core import Span
from evalsi.store import SqlStore, TraceStore
from evalsi.store import _checkpoint as checkpoint_module
from evalsi.store._checkpoint import Checkpointer, checkpoint
from evalsi.store._trace_rows import chunks

PAGE = 4096


def spans(first: int, n: int, attribute_bytes: int = 8000) -> list[Span]:
    """Spans of one trace each, about ``attribute_bytes`` a row."""
    return [
        Span(f"{i:032x}", f"{i:016x}", name="op", attributes={"text": "x" * attribute_bytes})
        for i in range(first, first + n)
    ]


def wait_for(condition: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_writer_leaves_checkpoints_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "s.db"
    store = SqlStore.open(str(db))
    ts = TraceStore(store)
    before = db.stat().st_size
    pokes: list[Checkpointer] = []
    poke = Checkpointer.poke
    monkeypatch.setattr(Checkpointer, "poke", lambda self: pokes.append(self))
    # ~2,000 pages of WAL: over SQLite's own threshold (1000), it would have checkpointed
    for first in range(0, 1000, 100):
        ts.write_spans("default", spans(first, 100))
    assert len(pokes) == 1  # CHECKPOINT_ROWS rows were committed
    assert db.stat().st_size == before  # nothing was copied into the database file

    poke(pokes[-1])
    assert wait_for(lambda: db.stat().st_size > 1000 * PAGE)
    assert ts.get_trace("default", f"{999:032x}") is not None
    ts.close()
    store.close()


def test_a_checkpoint_once_enough_rows_are_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    pokes: list[Checkpointer] = []
    monkeypatch.setattr(Checkpointer, "poke", lambda self: pokes.append(self))
    checkpointer = Checkpointer("unused.db")
    for rows in (400, 400):
        checkpointer.committed(rows)
    assert pokes == []
    checkpointer.committed(400)
    assert len(pokes) == 1
    checkpointer.committed(999)
    assert len(pokes) == 1  # counted afresh


def test_the_thread_ends_when_idle_and_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_module, "IDLE_S", 0.05)
    monkeypatch.setattr(checkpoint_module, "CHECKPOINT_ROWS", 1)
    db = tmp_path / "s.db"
    store = SqlStore.open(str(db))
    ts = TraceStore(store)
    ts.write_spans("default", spans(0, 10))
    checkpointer = ts._checkpointer
    assert checkpointer is not None
    assert wait_for(lambda: checkpointer._thread is None)
    size = db.stat().st_size
    ts.write_spans("default", spans(10, 100))  # the next commit starts it again
    assert wait_for(lambda: db.stat().st_size > size)
    ts.close()
    assert checkpointer._thread is None
    store.close()


class FakeConnection:
    """Answers ``PRAGMA wal_checkpoint`` as SQLite does: (busy, WAL pages, pages copied)."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.asked: list[str] = []

    def execute(self, sql: str) -> FakeConnection:
        self.asked.append(sql)
        return self

    def fetchone(self) -> tuple[int, int, int]:
        return (0, self.pages, self.pages)


@pytest.mark.parametrize(("pages", "restarts"), [(100, False), (101, True)])
def test_a_wal_past_the_limit_is_restarted(pages: int, restarts: bool) -> None:
    conn = FakeConnection(pages)
    checkpoint(conn, restart_pages=100)  # type: ignore[arg-type]
    expected = ["PRAGMA wal_checkpoint(PASSIVE)"]
    if restarts:
        expected.append("PRAGMA wal_checkpoint(RESTART)")
    assert conn.asked == expected


def test_the_wal_stays_bounded_under_two_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_module, "RESTART_PAGES", 256)  # 1 MB
    monkeypatch.setattr(checkpoint_module, "CHECKPOINT_ROWS", 25)  # at every commit
    db = tmp_path / "s.db"
    store = SqlStore.open(str(db))
    writers = [TraceStore(SqlStore.open(str(db))) for _ in range(2)]
    errors: list[BaseException] = []

    def write(ts: TraceStore, base: int) -> None:
        try:
            for i in range(60):  # ~50 pages a commit, 12 MB of WAL each
                ts.write_spans("default", spans(base + i * 25, 25))
                time.sleep(0.005)  # as an ingest worker decodes its next request
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [
        threading.Thread(target=write, args=(ts, n * 10_000)) for n, ts in enumerate(writers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    wal = db.with_name(db.name + "-wal")
    assert wal.stat().st_size < 4 << 20  # of 24 MB written (without restarts: 8-12 MB)
    for ts in writers:
        ts.close()
        ts.store.close()
    store.close()


@given(st.integers(0, 5000), st.sampled_from([1, 8, 1024]))
def test_chunks_are_powers_of_two_in_order(n: int, limit: int) -> None:
    items = list(range(n))
    found = list(chunks(items, limit))
    assert [i for c in found for i in c] == items
    assert all(len(c) <= limit and len(c) & (len(c) - 1) == 0 for c in found)
    # whole chunks of the limit first, then at most one of each smaller size
    smaller = [len(c) for c in found if len(c) < limit]
    assert smaller == sorted(set(smaller), reverse=True)
