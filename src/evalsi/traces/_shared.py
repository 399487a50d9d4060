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
from evalsi.traces._rebuild import summarize
from evalsi.traces._records import trace_to_record

log = logging.getLogger("evalsi.traces")

LEASE = "watch"
CLAIM_BATCH = 256
"""Traces claimed at once: read, graded and settled before the next claim."""
READ_CONCURRENCY = 16
"""Traces read back (and graded) at once within a batch."""
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
    before it completes anything as the holder."""

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
        batch: int = CLAIM_BATCH,
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
        self.poll_s = poll_s
        self.held = False
        self.stats = SharedStats()
        self._stop = asyncio.Event()
        self._leading = asyncio.Event()  # set while we hold the lease and have taken over
        self._tasks: list[asyncio.Task[None]] = []
        self._lead_lock = asyncio.Lock()

    async def start(self) -> None:
        self._stop = asyncio.Event()
        self._tasks = [
            asyncio.create_task(self._beat(), name="evalsi-watch-lease"),
            asyncio.create_task(self._complete_loop(), name="evalsi-watch-completer"),
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
    async def _complete_loop(self) -> None:
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
            if time.monotonic() - reaped_at >= REAP_EVERY_S:
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
        try:
            existed = await asyncio.to_thread(self.store.summarized, project, ids)
        except Exception:
            log.exception("reading the trace rows of %d traces failed", len(ids))
            failed += [(project, t) for t in ids]
            return []
        grading = self.grade is not None and self.wants(project)
        slots = asyncio.Semaphore(READ_CONCURRENCY)
        rows: dict[str, TraceSummary] = {}

        async def one(trace_id: str) -> None:
            async with slots:
                try:
                    trace = await asyncio.to_thread(self.store.get_trace, project, trace_id)
                    if trace is None:  # deleted meanwhile (retention): nothing to complete
                        rows.pop(trace_id, None)
                        return
                    rows[trace_id] = summarize(trace)
                    if trace_id in existed:
                        self.stats.rebuilt += 1
                    elif grading:
                        assert self.grade is not None
                        await self.grade(trace, trace_to_record(trace))
                        self.stats.graded += 1
                except Exception:
                    log.exception("completing trace %s failed", trace_id)
                    rows.pop(trace_id, None)
                    failed.append((project, trace_id))

        await asyncio.gather(*(one(t) for t in ids))
        gone = {t for p, t in failed if p == project}
        if rows:
            try:
                await self.store_rows(project, list(rows.values()))
            except Exception:
                log.exception("writing the rows of %d completed traces failed", len(rows))
                failed += [(project, t) for t in rows]
                return []
        return [t for t in ids if t not in gone]
