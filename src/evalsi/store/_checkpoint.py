"""WAL checkpoints of a SQLite file store, off the ingest writer's thread.

By default SQLite checkpoints after any commit that leaves the WAL over 1000 pages, in the
committing thread: it copies the WAL into the database file and syncs both. Ingest commits
about 4 MB of WAL a transaction, so that was nearly every commit, and the writer (an ingest
worker, between two requests) waited for the disk. On the 2-core development machine (shared,
an fsync ~3 ms), two processes storing the OTLP bench's 80k span rows took 3.3-11.4 s with
checkpoints in their commits, 2.8-3.8 s with them here; in ``evalsi serve`` (the bench's
gRPC run) an ingest worker spent 1.8-5.1 s in ``write_rows``, 0.6-1.0 s of it on the CPU,
and 0.9-3.0 s with them here.

``Checkpointer`` runs them in a thread of its own, on its own connection (SQLite releases the
GIL meanwhile), once the writer has committed ``CHECKPOINT_ROWS`` rows since the last one (a
trickle of small commits is not a checkpoint, and two syncs, each); the writer's connection
checkpoints no more (``wal_autocheckpoint=0``). A PASSIVE checkpoint never waits for anyone,
but while writers keep committing it never catches up with the last commit, and the WAL only
starts over from its beginning once one has (two ingest writers grew it to 320 MB over 400k spans,
checkpointing as SQLite does by default). Past ``RESTART_PAGES`` the checkpoint restarts the
WAL instead: it holds writers off until it has (``RESTART_WAIT_MS`` at most, then gives up
until the next commit), so the WAL stays near that size. The thread ends, closing its
connection, after ``IDLE_S`` without a commit.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

log = logging.getLogger("evalsi.store")

RESTART_PAGES = 16_384
"""WAL pages (64 MB of 4 kB pages) past which a checkpoint makes writers wait until the WAL
restarts; below it, checkpoints never block them."""
RESTART_WAIT_MS = 1000
"""How long a restarting checkpoint waits for a writer's transaction or a reader to end."""
IDLE_S = 5.0
CHECKPOINT_ROWS = 1000
"""Rows committed between two checkpoints: ~2.4 MB of WAL of the bench's span rows, about
SQLite's own 1000 pages; an ingest commit of four 512-span requests is one each."""


class Checkpointer:
    """Checkpoints the WAL of the SQLite file at ``path`` in a thread, as rows are committed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._poked = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failing = False  # logged once until a checkpoint succeeds again
        self._rows = 0  # committed since the last poke

    def committed(self, rows: int) -> None:
        """The writer committed ``rows`` rows: checkpoint once enough have been."""
        self._rows += rows
        if self._rows >= CHECKPOINT_ROWS:
            self._rows = 0
            self.poke()

    def poke(self) -> None:
        """Checkpoint soon (at once when idle)."""
        self._poked.set()
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="evalsi-checkpoint", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                if not self._poked.wait(IDLE_S):
                    with self._lock:
                        if not self._poked.is_set():  # else a poke came as the wait ended
                            self._thread = None
                            return
                self._poked.clear()
                if self._closed:
                    return
                try:
                    if conn is None:
                        conn = sqlite3.connect(self.path)
                        conn.execute(f"PRAGMA busy_timeout={RESTART_WAIT_MS}")
                    checkpoint(conn, RESTART_PAGES)
                    self._failing = False
                except sqlite3.Error as e:  # the next commit tries again, on a new connection
                    if not self._failing:
                        log.warning("checkpointing %s failed: %s", self.path, e)
                    self._failing = True
                    if conn is not None:
                        conn.close()
                        conn = None
        finally:
            if conn is not None:
                conn.close()

    def close(self) -> None:
        """Ends the thread (after the checkpoint it may be running)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._poked.set()
        if thread is not None:
            thread.join()
        self._thread = None


def checkpoint(conn: sqlite3.Connection, restart_pages: int) -> None:
    """A PASSIVE checkpoint, and a RESTART when the WAL has grown past ``restart_pages``."""
    _busy, pages, _copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    if pages > restart_pages:
        conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
