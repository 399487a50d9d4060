"""Ingest worker processes: how OTLP ingest uses more than one core.

Per span, ingest is Python work under one GIL: decoding (~20 µs), the mappers (~15 µs),
encoding and storing the row (~30 µs with SQLite's own work); one process stored ~9k spans/s
on the 2-core development machine. ``traces.ingestWorkers`` processes (spawned, not forked:
the server has loaded grpcio) each take an export request's bytes, decode, redact, normalise,
encode AND store its spans on their own connection, commit, and send back only the
``Batch`` of compact ``SpanRef``s, feedback and partial-success counts. The server's process
keeps what needs one place: the byte budget, assembly, trace rows and the online policies.

The pool starts on the first export request, not with the server: a server that never
receives traces never spawns it. An export is answered 200 only after its worker committed,
as on the event loop; a worker that dies fails its request with 503 and the pool restarts.

Requests that wait for a worker (two groups a worker are in the pool at most) go to it
together (``MAX_GROUP_BYTES`` at most) and their spans are committed in one transaction, as
the event loop's writer groups its commits: one 512-span request a transaction cost ~40 µs
of SQLite work a span, four ~32 (measured), and the workers take turns at SQLite's write
lock less often. A request alone is sent at once: grouping never makes a sender wait for
another.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import gc
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from evalsi.core import UserError
from evalsi.server.otlp._decode import DecodeError, decode_body
from evalsi.store import SqlStore, TraceStore
from evalsi.traces import Batch, Overloaded, RedactionRule, Redactor, prepare, store_failure

log = logging.getLogger("evalsi.server")

MAX_AUTO_WORKERS = 8
RESPAWN_AFTER_S = 2.0  # after a worker died (or could not start): 503s, then a new pool
ORPHAN_CHECK_S = 1.0  # how often a worker checks that the server is still its parent
WORKER_RETRY_AFTER_S = 1.0
# OTLP ingest allocates a dict or list per attribute of every span, and open traces keep
# many alive: under CPython's default thresholds (700, 10, 10) the collector took a third of
# the loop's time at full ingest (bench/otlp_ingest.py). Fewer, larger young collections, in
# the server process (``serve``) and in its ingest workers alike.
GC_THRESHOLDS = (20_000, 50, 100)

MAX_GROUP_BYTES = 2 << 20
"""Decompressed bytes of waiting requests one worker takes at once (one transaction); a
worker holds their decoded spans together, so this bounds its memory too."""

# A worker's answer: ("ok", Batch) | ("undecodable" | "refused", message, hint) | ("busy", message).
_Answer = tuple[Any, ...]
# (project, body, media type, keep_rows): one request for a worker.
_Task = tuple[str, bytes, str, bool]
_Waiting = tuple[_Task, "asyncio.Future[_Answer]"]


def worker_count(configured: int | None, store: SqlStore) -> int:
    """``traces.ingestWorkers`` resolved: ``auto`` is one per CPU (at most 8) when another
    process can open the store (a SQLite file or PostgreSQL), else 0 (in-process)."""
    shared = store.is_sqlite_file or store.engine.dialect.name == "postgresql"
    if configured is not None:
        if configured and not shared:
            raise UserError(
                f"traces.ingestWorkers: {configured} needs a store other processes can open "
                f"(a SQLite file or PostgreSQL), not {store.location}",
                hint="set traces.ingestWorkers: 0, or use a file store",
            )
        return configured
    return min(_cpus(), MAX_AUTO_WORKERS) if shared else 0


def _cpus() -> int:
    """The CPUs this process may run on (its affinity, as a container's cpuset sets it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class IngestPool:
    """``workers`` processes preparing and storing export requests; see the module doc."""

    def __init__(
        self,
        workers: int,
        store: SqlStore,
        redaction: Sequence[RedactionRule],
        *,
        claims: bool = False,
    ):
        """``claims``: the workers' span batches upsert their traces' claims (a cluster's
        replicas, decision 0019: ``TraceStore(claims=True)``)."""
        if workers < 1:
            raise ValueError("an ingest pool needs at least one worker")
        self.workers = workers
        # The URL with its password: the workers open the store themselves.
        self._location = (
            store.engine.url.render_as_string(hide_password=False)
            if "://" in store.location
            else str(store.engine.url.database)
        )
        self._rules = tuple(redaction)
        self._claims = claims
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._broken_until = 0.0  # after a worker died: no new pool before then
        # requests waiting for a worker, and the groups of them in the workers (event loop only)
        self._waiting: collections.deque[_Waiting] = collections.deque()
        self._running = 0

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise Overloaded("the server is stopping; retry", WORKER_RETRY_AFTER_S)
            if self._pool is None:
                wait = self._broken_until - time.monotonic()
                if wait > 0:  # a pool that cannot start must not be respawned per request
                    raise Overloaded(
                        "the ingest workers failed; retrying them shortly", max(wait, 1.0)
                    )
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(self._location, self._rules, os.getpid(), self._claims),
                )
            return self._pool

    async def prepare(
        self, project: str, raw: bytes, kind: str, *, keep_rows: bool = False
    ) -> Batch:
        """Decodes, prepares and stores one uncompressed export body of media type ``kind``
        in a worker; with ``keep_rows`` the stored rows come back too (``Batch.kept``: the
        policies grade the project's traces from them). Raises ``DecodeError`` (400),
        ``UserError`` for rows the store refused (400) or ``Overloaded`` (503) when the store
        or a worker failed."""
        self._executor()  # refused at once when stopping or restarting
        answer: asyncio.Future[_Answer] = asyncio.get_running_loop().create_future()
        self._waiting.append(((project, raw, kind, keep_rows), answer))
        self._dispatch()
        return _batch_of(await answer)

    def _dispatch(self) -> None:
        """Waiting requests to the workers, shared out evenly, in groups of at most
        ``MAX_GROUP_BYTES`` (a request alone goes at once, whatever its size)."""
        # A group a worker is on and one queued behind it: a worker done with its group takes
        # the next at once instead of waiting a turn of the event loop for it.
        limit = 2 * self.workers
        while self._waiting and self._running < limit:
            share = -(-len(self._waiting) // (limit - self._running))
            group = [self._waiting.popleft()]
            size = len(group[0][0][1])
            while (
                self._waiting
                and len(group) < share
                and size + len(self._waiting[0][0][1]) <= MAX_GROUP_BYTES
            ):
                group.append(self._waiting.popleft())
                size += len(group[-1][0][1])
            try:
                pool = self._executor()
                future = pool.submit(_work_group, [task for task, _ in group])
            except Overloaded as e:
                _settle(group, e)
                continue
            except BrokenProcessPool as e:  # found dead before this group went in
                self._reset(pool)
                _settle(group, _died(e))
                continue
            except RuntimeError as e:  # submitted as the pool shut down (the server stopping)
                _settle(group, Overloaded(f"the ingest workers are stopping ({e}); retry"))
                continue
            self._running += 1
            future.add_done_callback(
                functools.partial(self._from_worker, asyncio.get_running_loop(), pool, group)
            )

    def _from_worker(
        self,
        loop: asyncio.AbstractEventLoop,
        pool: ProcessPoolExecutor,
        group: list[_Waiting],
        future: Future[list[_Answer]],
    ) -> None:
        """In the pool's thread: the group's answers go to the event loop."""
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(self._answered, pool, group, future)

    def _answered(
        self, pool: ProcessPoolExecutor, group: list[_Waiting], future: Future[list[_Answer]]
    ) -> None:
        self._running -= 1
        try:
            answers = future.result()
        except BrokenProcessPool as e:
            # Every request in the workers fails with it (CPython stops the pool): the senders
            # retry, and spans a worker had committed are upserted again, not doubled.
            self._reset(pool)
            _settle(group, _died(e))
        except CancelledError as e:  # cancelled as the pool shut down
            _settle(group, Overloaded(f"the ingest workers are stopping ({e}); retry"))
        except Exception as e:  # noqa: BLE001 - raised to each request, as it came
            _settle(group, e)
        else:
            for (_, waiting), answer in zip(group, answers, strict=True):
                if not waiting.done():
                    waiting.set_result(answer)
        self._dispatch()

    def _reset(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is broken:
                self._pool = None
                self._broken_until = time.monotonic() + RESPAWN_AFTER_S
                log.error("an ingest worker died; a new pool starts in %.0f s", RESPAWN_AFTER_S)
        broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Waits for the requests in the workers, then stops them (blocking); later
        requests are refused with ``Overloaded``."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


# -- in the worker process --------------------------------------------------------------------

_WORKER: tuple[TraceStore, Redactor] | None = None


def _start_worker(
    location: str, rules: tuple[RedactionRule, ...], server: int, claims: bool = False
) -> None:
    global _WORKER
    # A worker holds its own end of the task pipe, so it would wait forever for tasks from a
    # server killed with SIGKILL: it watches for that instead.
    watch = threading.Thread(target=_exit_with, args=(server,), name="evalsi-orphan-watch")
    watch.daemon = True
    watch.start()
    _WORKER = (TraceStore(SqlStore.open(location), claims=claims), Redactor(rules))
    # As in the server: what start-up built is out of the collector's sight, and a request's
    # thousands of short-lived objects do not trigger a collection every few hundred.
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _exit_with(server: int) -> None:
    while os.getppid() == server:
        time.sleep(ORPHAN_CHECK_S)
    os._exit(0)  # the server is gone: nothing will read this worker's answers


def _work_group(tasks: list[_Task]) -> list[_Answer]:
    """Decodes and prepares each request, stores the spans of all in one transaction, and
    answers each; one request's failure is its own (the others are stored without it)."""
    assert _WORKER is not None, "the ingest worker was not started"
    store, redactor = _WORKER
    answers: list[_Answer | None] = [None] * len(tasks)
    ready: list[tuple[int, Batch]] = []
    for i, (project, raw, kind, _) in enumerate(tasks):
        try:
            decoded = decode_body(raw, kind)
        except UserError as e:  # exceptions cross back as plain tuples (their pickling drops hints)
            answers[i] = ("undecodable", e.message, e.hint or "")
            continue
        try:  # failures answered as in-process ingest answers them
            batch = prepare(
                project,
                decoded.spans,
                redactor,
                rejected=decoded.rejected,
                error_message=decoded.error_message,
            )
        except Exception as e:  # noqa: BLE001 - a span the row encoder refuses
            answers[i] = _failed(e)
            continue
        ready.append((i, batch))
    writing = [(i, b) for i, b in ready if b.rows]
    try:
        if writing:
            store.write_rows([row for _, b in writing for row in b.rows or ()])
    except Exception as e:  # noqa: BLE001 - a row the store refuses, or a store down
        if len(writing) == 1:
            answers[writing[0][0]] = _failed(e)
        else:  # one request's bad rows must not fail the others: each on its own
            for i, b in writing:
                try:
                    store.write_rows(b.rows or [])
                except Exception as each:  # noqa: BLE001 - this request's answer
                    answers[i] = _failed(each)
    for i, batch in ready:
        if answers[i] is None:  # stored: only the refs go back (and the rows, when the
            keep = tasks[i][3]  # policies grade from them)
            batch.kept, batch.rows = (batch.rows if keep else None), None
            answers[i] = ("ok", batch)
    assert all(a is not None for a in answers)
    return answers  # type: ignore[return-value]


def _failed(error: Exception) -> _Answer:
    failure = store_failure(error)
    if isinstance(failure, UserError):
        return ("refused", failure.message, failure.hint or "")
    return ("busy", str(failure))


def _batch_of(answer: _Answer) -> Batch:
    """A worker's answer as the batch stored, or the error its sender gets."""
    if answer[0] == "ok":
        batch: Batch = answer[1]
        return batch
    if answer[0] == "undecodable":
        raise DecodeError(answer[1], hint=answer[2] or None)
    if answer[0] == "refused":
        raise UserError(answer[1], hint=answer[2] or None)
    raise Overloaded(answer[1], WORKER_RETRY_AFTER_S)


def _died(e: BrokenProcessPool) -> Overloaded:
    return Overloaded(f"an ingest worker process died ({e}); retry", WORKER_RETRY_AFTER_S)


def _settle(group: list[_Waiting], error: Exception) -> None:
    for _, waiting in group:
        if not waiting.done():
            waiting.set_exception(error)
