"""Background writers: results are committed while grading goes on.

Writing is about half the work of a Score run, and most of it holds the GIL (building rows,
binding parameters), so a writer *thread* barely overlaps with grading. For a long run on a
file store, the writer becomes a separate *process*: the grading process serialises each batch's
columns with orjson (cheap, in C) and sends the bytes down a pipe; the writer process decodes
them and upserts into the same SQLite file (WAL lets both have it open). Short runs, in-memory
stores and non-SQLite URLs keep the thread, since a process costs a second interpreter start.

Either way the queue is bounded (memory stays flat when the disk is slower than grading), every
message is committed on its own (what was sent before a crash is kept), and an error in the
writer is raised in the caller on its next submit or at close.
"""

from __future__ import annotations

import contextlib
import fcntl
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from types import TracebackType

from evalsi.core import ResultBatch, StoreError
from evalsi.store._rows import encode_batches
from evalsi.store._sql import SqlStore

Item = Sequence[tuple[int, int, ResultBatch]]

PROCESS_AFTER_BATCHES = 8
"""A run that has submitted this many batches moves its writes to a writer process."""


class _InlineWriter:
    """Writes on the caller's thread: for in-memory SQLite, whose connection cannot be shared."""

    def __init__(self, store: SqlStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id

    def submit(self, item: Item) -> None:
        self.store.write_batches(self.run_id, item)

    def close(self) -> None:
        return None


class _ThreadWriter:
    def __init__(self, store: SqlStore, run_id: str, depth: int = 4) -> None:
        self.store = store
        self.run_id = run_id
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
                self.store.write_batches(self.run_id, item)
            except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
                self._error = e

    def raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, StoreError):
                raise error
            raise StoreError(f"writing results failed: {type(error).__name__}: {error}") from error

    def submit(self, item: Item) -> None:
        self.raise_error()
        self._queue.put(item)

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self.raise_error()


class _ProcessWriter:
    def __init__(self, store: SqlStore, run_id: str) -> None:
        # A plain subprocess, not multiprocessing: spawn would re-import the user's __main__.
        self._process = subprocess.Popen(
            [sys.executable, "-m", "evalsi.store._writer_process", store.sqlite_path, run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._process.stdin is not None
        self._inbox = self._process.stdin
        if hasattr(fcntl, "F_SETPIPE_SZ"):
            # A pipe that holds a whole message lets grading go on while the writer writes.
            with contextlib.suppress(OSError):
                fcntl.fcntl(self._inbox.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        self._closed = False

    def _finish(self) -> tuple[str, int]:
        """The writer's last word and exit code, once it has exited; pipes closed."""
        assert self._process.stdout is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self._inbox.close()
        message = self._process.stdout.read().decode().strip()
        self._process.stdout.close()
        return message, self._process.wait()

    def _failure(self) -> StoreError:
        message, code = self._finish()
        return StoreError(f"writing results failed: {message or f'writer exit code {code}'}")

    def raise_error(self) -> None:
        if self._process.poll() is not None and not self._closed:
            self._closed = True
            raise self._failure()

    def submit(self, item: Item) -> None:
        self.raise_error()
        data = encode_batches(item)
        try:
            self._inbox.write(len(data).to_bytes(8, "little") + data)
        except (BrokenPipeError, OSError):
            self._closed = True
            raise self._failure() from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(BrokenPipeError, OSError):
            self._inbox.write((0).to_bytes(8, "little"))
        message, code = self._finish()
        if code != 0 or message != "ok":
            raise StoreError(f"writing results failed: {message or f'writer exit code {code}'}")


class BackgroundWriter:
    """Commits submitted batches in the background; use as a context manager.

    ``submit`` takes ``(evaluator_index, first_seq, batch)`` tuples. The first batches go
    through a thread; after ``PROCESS_AFTER_BATCHES`` submissions on a SQLite file store the
    writer moves to a process (see the module docstring).
    """

    def __init__(self, store: SqlStore, run_id: str, *, allow_process: bool = True) -> None:
        self.store = store
        self.run_id = run_id
        self.submitted = 0
        self._can_move = allow_process and store.is_sqlite_file
        self._writer: _InlineWriter | _ThreadWriter | _ProcessWriter
        if store.engine.dialect.name == "sqlite" and not store.is_sqlite_file:
            self._writer = _InlineWriter(store, run_id)  # one in-memory connection, one thread
        else:
            self._writer = _ThreadWriter(store, run_id)

    def submit(self, item: Item) -> None:
        self.submitted += 1
        if self._can_move and self.submitted == PROCESS_AFTER_BATCHES:
            self._writer.close()  # flush the thread first: writes stay in order
            self._writer = _ProcessWriter(self.store, self.run_id)
        self._writer.submit(item)

    def close(self) -> None:
        """Wait until everything submitted is committed."""
        self._writer.close()

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
