"""Traces completed once for every server replica sharing a PostgreSQL store (decision 0019).

With ``cluster:`` configured, a replica does not assemble traces in memory: a trace's spans
may reach several replicas, and each would complete (and grade) the part it saw. Every replica
stores what it receives, and its span batches upsert their traces in ``trace_claims`` in the
same transaction (``TraceStore(claims=True)``). ``SharedCompletion`` runs on every replica and
keeps trying to take the ``watch`` lease (one statement every sixth of ``ttl_s``, in a task of
its own so slow grading never delays a heartbeat); the replica holding it claims the traces
whose grace has passed, reads each whole from the store (whichever replica stored its
spans), grades it through ``grade`` (the policy engine's ``on_trace``, awaited: a trace is
graded before it is done, never dropped), writes its trace row and marks it done.

A trace that already has its row was completed before: these are late spans (or a re-sent
span), and it is only given its row again, as ``Completion`` treats late spans. The order is
grade, row, done, so a holder that dies mid-way leaves its claims to the next holder
(``release_claims`` when it takes the lease): one that was graded and not yet given its row is
graded again, and its scores, keyed by the trace, replace the first ones (never a second row).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from evalsi.core import Record, Trace
from evalsi.store import (
    TraceStore,
    TraceSummary,
    acquire_lease,
    claim_due,
    finish_claims,
    reap_claims,
    release_claims,
    release_lease,
)
from evalsi.traces._parts import IngestStats
from evalsi.traces._rebuild import summarize
from evalsi.traces._records import trace_to_record

log = logging.getLogger("evalsi.traces")

LEASE = "watch"
CLAIM_BATCH = 256
"""Traces claimed at once: read, graded and settled before the next claim."""
READ_CONCURRENCY = 16
"""Traces read back (and graded) at once within a batch."""
LOOPS = 4
"""Batches completed at once by the holder (each claims its own: ``SKIP LOCKED``), so one
batch's reads and grading overlap another's writes."""
POLL_S = 0.2
"""How often the holder looks for due traces when the last look found fewer than a batch."""
REAP_EVERY_S = 60.0

Grade = Callable[[Trace, Record], Awaitable[None]]
StoreRows = Callable[[str, Sequence[TraceSummary]], Awaitable[None]]


@dataclass
class SharedStats:
    completed: int = 0  # traces completed by this replica while it held the lease
    graded: int = 0  # ... and handed to ``grade``
    rebuilt: int = 0  # ... completed before: their rows rebuilt (late spans)
    reopened: int = 0  # ... left open: spans came while they were read (read again later)
    failed: int = 0  # ... that could not be read or graded (given back, tried again)
    leases_taken: int = 0


class SharedCompletion:
    """See the module doc. ``wants(project)``: whether to grade that project's traces (a
    policy applied there); ``on_lead(held)``: told when this replica takes or loses the lease,
    before it completes anything as the holder; ``ingest_stats``: the replica's ingest
    counters, given the traces completed (and read back for grading) here."""

    def __init__(
        self,
        store: TraceStore,
        store_rows: StoreRows,
        *,
        ttl_s: float,
        grace_s: float,
        orphan_s: float,
        grade: Grade | None = None,
        wants: Callable[[str], bool] | None = None,
        on_lead: Callable[[bool], Awaitable[None]] | None = None,
        ingest_stats: IngestStats | None = None,
        batch: int = CLAIM_BATCH,
        loops: int = LOOPS,
        poll_s: float = POLL_S,
    ) -> None:
        self.store = store
        self.db = store.store
        self.store_rows = store_rows
        self.ttl_s = ttl_s
        self.grace_s = grace_s
        self.orphan_s = max(orphan_s, grace_s)
        self.grade = grade
        self.wants = wants or (lambda _project: grade is not None)
        self.on_lead = on_lead
        self.batch = batch
        self.loops = loops
        self.poll_s = poll_s
        self.held = False
        self.stats = SharedStats()
        # the replica's ingest counters (Prometheus): traces completed and read back here
        self.ingest_stats = ingest_stats or IngestStats()
        self._stop = asyncio.Event()
        self._leading = asyncio.Event()  # set while we hold the lease and have taken over
        self._tasks: list[asyncio.Task[None]] = []
        self._lead_lock = asyncio.Lock()

    async def start(self) -> None:
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._beat(), name="evalsi-watch-lease")]
        self._tasks += [
            asyncio.create_task(self._complete_loop(i == 0), name=f"evalsi-watch-completer-{i}")
            for i in range(self.loops)
        ]

    async def stop(self) -> None:
        """Finishes the batch at hand and stops renewing the lease (``release`` gives it up:
        after the policies have kept their counts, for the next holder to start from)."""
        self._stop.set()
        self._leading.set()  # wakes the completer to see the stop
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def release(self) -> None:
        """Gives the lease up if held (a clean shutdown: the next replica takes it at once
        rather than a TTL later)."""
        if self.held:
            self.held = False
            self._leading.clear()
            try:
                await asyncio.to_thread(release_lease, self.db, LEASE)
            except Exception:  # it lapses by itself
                log.warning("the watch lease could not be given up", exc_info=True)

    # -- the lease ----------------------------------------------------------------------------
    async def _beat(self) -> None:
        every = self.ttl_s / 6
        while not self._stop.is_set():
            try:
                holder = await asyncio.to_thread(acquire_lease, self.db, LEASE, self.ttl_s)
            except Exception:  # the store away: we cannot claim; the lease lapses by itself
                log.warning("the watch lease could not be renewed", exc_info=True)
                holder = None
            await self._lead(holder is not None)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), every)

    async def _lead(self, held: bool) -> None:
        async with self._lead_lock:
            if held == self.held:
                return
            self.held = held
            if held:
                self.stats.leases_taken += 1
                log.info("this replica holds the watch lease: it completes traces for all")
                try:  # claims of a holder that lost the lease are ours to complete now
                    released = await asyncio.to_thread(release_claims, self.db)
                    if released:
                        log.warning("taking over %d traces a lost replica had claimed", released)
                    if self.on_lead is not None:
                        await self.on_lead(True)
                except Exception:
                    log.exception("taking over the watch lease failed; trying again")
                    self.held = False
                    return
                self._leading.set()
            else:
                self._leading.clear()
                log.warning("this replica no longer holds the watch lease")
                if self.on_lead is not None:
                    try:
                        await self.on_lead(False)
                    except Exception:
                        log.exception("giving up the watch lease failed")

    # -- completing ---------------------------------------------------------------------------
    async def _complete_loop(self, reaps: bool) -> None:
        reaped_at = time.monotonic()
        while not self._stop.is_set():
            await self._leading.wait()
            if self._stop.is_set():
                return
            try:
                n = await self.complete_due()
            except Exception:
                log.exception("completing traces failed; trying again")
                n = 0
            if reaps and time.monotonic() - reaped_at >= REAP_EVERY_S:
                reaped_at = time.monotonic()
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(reap_claims, self.db)
            if n < self.batch:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.poll_s)

    async def complete_due(self) -> int:
        """One batch: due traces claimed, read, graded, given their rows and settled; how many
        were claimed. Only while this replica holds the lease."""
        if not self.held:
            return 0
        claimed = await asyncio.to_thread(
            claim_due, self.db, self.grace_s, self.orphan_s, self.batch
        )
        if not claimed:
            return 0
        by_project: dict[str, list[str]] = {}
        for project, trace_id, _ in claimed:
            by_project.setdefault(project, []).append(trace_id)
        settled: list[tuple[str, str]] = []
        failed: list[tuple[str, str]] = []
        for project, ids in by_project.items():
            ok = await self._complete_project(project, ids, failed)
            settled += [(project, t) for t in ok]
        if failed:
            self.stats.failed += len(failed)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(release_claims, self.db, failed)
        done = await asyncio.to_thread(finish_claims, self.db, settled)
        self.stats.reopened += len(settled) - done
        self.stats.completed += done
        return len(claimed)

    async def _complete_project(
        self, project: str, ids: list[str], failed: list[tuple[str, str]]
    ) -> list[str]:
        """The project's claimed traces: read whole (a few queries for the batch), graded
        (``READ_CONCURRENCY`` at once) unless completed before, their rows written; the ids
        settled (failed ones are added to ``failed``, to be given back)."""
        try:
            existed, read = await asyncio.to_thread(self._read, project, ids)
        except Exception:
            log.exception("reading %d completed traces failed", len(ids))
            failed += [(project, t) for t in ids]
            return []
        grading = self.grade is not None and self.wants(project)
        slots = asyncio.Semaphore(READ_CONCURRENCY)
        rows: list[TraceSummary] = []
        lost: set[str] = set()

        async def one(trace_id: str, trace: Trace, record: Record | None) -> None:
            async with slots:
                try:
                    if record is not None:
                        assert self.grade is not None
                        await self.grade(trace, record)
                        self.stats.graded += 1
                except Exception:  # the engine's own errors are its own; this is ours
                    log.exception("grading trace %s failed", trace_id)
                    lost.add(trace_id)

        work = []
        for trace_id, (trace, summary) in read.items():
            rows.append(summary)
            if trace_id in existed:
                self.stats.rebuilt += 1  # late spans: its row again, not graded again
                continue
            self.ingest_stats.traces += 1
            if grading:
                self.ingest_stats.read_back += 1
                work.append(one(trace_id, trace, trace_to_record(trace)))
        await asyncio.gather(*work)
        rows = [r for r in rows if r.trace_id not in lost]
        failed += [(project, t) for t in sorted(lost)]
        if rows:
            try:
                await self.store_rows(project, rows)
            except Exception:
                log.exception("writing the rows of %d completed traces failed", len(rows))
                failed += [(project, r.trace_id) for r in rows]
                return []
        # deleted meanwhile (retention) are settled too: nothing left to complete
        return [t for t in ids if t not in lost]

    def _read(
        self, project: str, ids: list[str]
    ) -> tuple[set[str], dict[str, tuple[Trace, TraceSummary]]]:
        """In a worker thread: which had a row already, and each trace read with its row."""
        existed = self.store.summarized(project, ids)
        read: dict[str, tuple[Trace, TraceSummary]] = {}
        for trace_id, trace in self.store.get_traces(project, ids).items():
            try:
                read[trace_id] = (trace, summarize(trace))
            except Exception:  # one bad trace must not stop the others
                log.exception("summarising trace %s failed", trace_id)
        return existed, read
