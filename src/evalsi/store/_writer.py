"""A background writer: results are committed on a second thread while grading goes on.

SQLite (like PostgreSQL's driver) releases the GIL while it works, so writing batch *i* while
batch *i+1* is graded uses the second core. The queue is bounded, so memory stays flat when the
disk is slower than grading; an error on the writer thread is raised on the next submit/close.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from types import TracebackType

from evalsi.core import ResultBatch, StoreError
from evalsi.store._sql import SqlStore

Item = Sequence[tuple[int, int, ResultBatch]]


class BackgroundWriter:
    """Use as a context manager; ``submit`` a batch of ``(evaluator, first_seq, batch)``."""

    def __init__(self, store: SqlStore, run_id: str, *, depth: int = 4) -> None:
        self.store = store
        self.run_id = run_id
        self.rows = 0
        self._queue: queue.Queue[Item | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="evalsi-writer", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is not None:
                continue  # drain: the first error is what the caller hears about
            try:
                self.rows += self.store.write_batches(self.run_id, item)
            except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
                self._error = e

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, StoreError):
                raise error
            raise StoreError(f"writing results failed: {type(error).__name__}: {error}") from error

    def submit(self, item: Item) -> None:
        self._raise()
        self._queue.put(item)

    def close(self) -> None:
        """Wait until everything submitted is committed."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self._raise()

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Flush even when the caller failed: what was graded before the failure is kept.
        try:
            self.close()
        except StoreError:
            if exc is None:
                raise
