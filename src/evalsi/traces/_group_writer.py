"""The writer thread of ingest: span rows and trace rows committed in groups.

Every request's rows and every trace row go through one ``GroupWriter``: a thread that drains
whatever is queued into one transaction (group commit), so SQLite's work overlaps the event
loop and two writers never contend for its lock. Each job's future settles on the event loop
once its rows are committed, or with the error a sender should get (``store_failure``).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Sequence
from typing import Any

from evalsi.core import UserError
from evalsi.store import TraceStore, TraceSummary
from evalsi.traces._sink import Overloaded

log = logging.getLogger("evalsi.traces")

# (project, span rows to store, trace rows to store, settled once they are committed, and a
# set the writer fills with the ids of those traces that had a row already, or None)
_Job = tuple[
    str, Sequence[tuple[Any, ...]], Sequence[TraceSummary], asyncio.Future[None], set[str] | None
]
_Outcome = tuple[asyncio.Future[None], BaseException | None]


class GroupWriter:
    """Commits queued rows in a thread of its own; ``start`` on the loop that will ``put``."""

    def __init__(self, store: TraceStore) -> None:
        self.store = store
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="evalsi-span-writer", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Commits what is queued, then ends the thread."""
        if self._thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(self._thread.join)
            self._thread = None
        self._loop = None

    def put(
        self,
        project: str,
        rows: Sequence[tuple[Any, ...]],
        summaries: Sequence[TraceSummary],
        existed: set[str] | None = None,
    ) -> asyncio.Future[None]:
        """Queues rows; the future settles once they are committed. With ``existed``, the
        writer first adds to it the traces of ``summaries`` that had a row: in this thread, so
        in order with every other trace-row write."""
        assert self._loop is not None, "the writer was not started"
        done: asyncio.Future[None] = self._loop.create_future()
        self._jobs.put((project, rows, summaries, done, existed))
        return done

    def _run(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None:
                return
            jobs = [first]
            while True:  # group commit: everything queued meanwhile goes in too
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._jobs.put(None)
                    break
                jobs.append(more)
            rows: list[tuple[Any, ...]] = []
            traces_of: dict[str, list[TraceSummary]] = {}
            for project, span_rows, summaries, _, existed in jobs:
                rows += span_rows
                if summaries:
                    traces_of.setdefault(project, []).extend(summaries)
                if existed is not None and summaries:
                    try:
                        existed.update(
                            self.store.summarized(project, [s.trace_id for s in summaries])
                        )
                    except Exception:
                        log.exception("cannot tell which completed traces had a row")
            try:
                self.store.write_rows(rows, traces_of)
                outcomes: list[_Outcome] = [(job[3], None) for job in jobs]
            except Exception as e:  # noqa: BLE001 - settled on each request's future
                # One request's bad rows must not fail the others grouped with it (nor make
                # their retries fail forever): each job again, on its own.
                outcomes = [(job[3], e) for job in jobs] if len(jobs) == 1 else self._each(jobs)
            assert self._loop is not None
            self._loop.call_soon_threadsafe(_settle, outcomes)

    def _each(self, jobs: list[_Job]) -> list[_Outcome]:
        outcomes: list[_Outcome] = []
        for project, rows, summaries, done, _ in jobs:
            try:
                self.store.write_rows(rows, {project: list(summaries)} if summaries else {})
                outcomes.append((done, None))
            except Exception as e:  # noqa: BLE001 - settled on this request's future
                outcomes.append((done, e))
        return outcomes


def _settle(outcomes: list[_Outcome]) -> None:
    for future, error in outcomes:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(store_failure(error))


def store_failure(error: BaseException, what: str = "spans") -> UserError | Overloaded:
    """What a sender is told when storing its spans (or span ``events``) failed: a 400 when
    the rows themselves were refused (retrying the same data cannot succeed), else a 503 to
    retry later."""
    name = type(error).__name__
    if _bad_data(error):
        log.warning("the store refused a request's %s: %s", what, error)
        return UserError(f"the store refused these {what} ({name}: {error})")
    log.error("storing %s failed: %s: %s", what, name, error)
    return Overloaded(f"the trace store could not take the {what} ({name}); retry")


def _bad_data(error: BaseException) -> bool:
    """Whether the rows themselves were refused (a value out of range, text the encoder or
    the column cannot hold), as opposed to the store being unavailable."""
    for cause in (error, error.__cause__, getattr(error, "orig", None)):
        if cause is None:
            continue
        if isinstance(cause, TypeError | ValueError | OverflowError | UnicodeError):
            return True
        names = {cls.__name__ for cls in type(cause).__mro__}
        orig = getattr(cause, "orig", None)  # SQLAlchemy wraps the driver's error
        if orig is not None:
            names |= {cls.__name__ for cls in type(orig).__mro__}
        if names & {"DataError", "IntegrityError"}:
            return True
    return False
