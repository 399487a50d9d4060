"""The ingest pipeline behind the OTLP receiver: prepare, store, assemble, hand over.

``accept`` (the receiver's ``SpanSink``) prepares a request's spans (``traces._prepare``:
redacted, normalised, encoded as rows, with the ``SpanRef``s assembly keeps) and waits until a
writer thread has committed the rows, so an OTLP 200 means the spans survive a crash; the
writer drains whatever requests are queued into one transaction (group commit) and runs in
its own thread so SQLite's work overlaps the event loop. ``accept_stored`` takes a request an
ingest worker process prepares and stores itself; its batch joins assembly the same way.

A ticker completes traces (``Assembler`` over refs), summarises each from its refs, stores the
trace rows through the same writer (never a connection of their own: two SQLite writers in
one process would take turns at the file lock) and, when the policies want the project's
traces (``TraceHandoff.wants``), hands each over as a value: ``HandedTrace`` offered to the
bounded ``TraceHandoff`` queue the policy engine consumes (full: dropped and counted). The
trace is built from the span rows ``HeldSpans`` kept while it was open (no read-back) when
they fit its byte bounds; otherwise (spilled, assembled again at start-up, or with span events
sent apart) it is read back from the store whole. Assembly holds refs, and the held rows are
bounded in bytes, so memory stays bounded whatever the senders do.

Span events sent as OTLP log records (``accept_events``) are stored apart and merged into
their spans when read; the row of their trace is rebuilt from the store once it completes
(its refs never saw them), or at once when it had completed already.

Feedback (late signals) joins its trace or session: stored at once (an open trace is graded
with it when it completes: its feedback is read with it), or handed over with the stored trace
(``HandedTrace.feedback``) when that trace already completed.

``on_trace``/``on_feedback`` (embedded use, tests): this ingest then consumes its own
hand-over and calls them in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.core import Feedback, HandedTrace, Record, Span, Trace, TraceHandoff
from evalsi.datasets import record_to_row
from evalsi.store import TraceStore, TraceSummary
from evalsi.traces._assembler import Assembler, Completed
from evalsi.traces._feedback import EVENT_NAMES, feedback_from_events
from evalsi.traces._group_writer import GroupWriter, store_failure
from evalsi.traces._held import DEFAULT_MAX_BYTES, HeldSpans, Row
from evalsi.traces._prepare import Batch, prepare
from evalsi.traces._rebuild import RowRebuilder
from evalsi.traces._records import trace_to_record
from evalsi.traces._redact import Redactor
from evalsi.traces._refs import SpanRef, ref_of, summarize_refs
from evalsi.traces._sink import LoggedEvent, Overloaded

log = logging.getLogger("evalsi.traces")

FINISH_BATCH = 256
"""Completed traces turned into records per turn of the ticker: the event loop serves
requests between turns (the turn awaits the writer's commit), so a burst of due traces
never stalls ingest for long."""

MAX_HANDING = 64
"""Batches of completed traces being stored and handed to the policies at once; past it the
ticker waits (traces then complete later, or early through the open-trace bounds)."""

OnTrace = Callable[[Trace, Record], Awaitable[None]]
OnFeedback = Callable[[Trace, Record, Feedback], Awaitable[None]]


@dataclass
class IngestStats:
    requests: int = 0
    spans: int = 0
    late_spans: int = 0
    traces: int = 0
    refused: int = 0
    feedback: int = 0
    recovered: int = 0  # traces a previous server left open, assembled again at start
    events: int = 0  # span events received as OTLP log records (re-sent ones not counted)
    from_memory: int = 0  # completed traces handed over from the rows held in memory
    read_back: int = 0  # ... and read back from the store (spilled, recovered, events apart)


RECOVER_WITHIN_S = 3600.0
"""At start, traces with spans and no trace row are assembled again (a crash left them open)
if they started within this long of the project's newest span."""


class Ingest:
    """Implements ``SpanSink``. Start it on the loop that will call ``accept``."""

    def __init__(
        self,
        writer: TraceStore,
        *,
        redactor: Redactor | None = None,
        grace_s: float = 5.0,
        orphan_s: float = 60.0,
        max_open: int = 100_000,
        max_open_spans: int = 100_000,
        max_pending_spans: int = 200_000,
        handoff: TraceHandoff | None = None,
        max_held_bytes: int = DEFAULT_MAX_BYTES,
        on_trace: OnTrace | None = None,
        on_feedback: OnFeedback | None = None,
        wants_traces: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self.redactor = redactor or Redactor(())
        self.assembler: Assembler[SpanRef] = Assembler(
            grace_s=grace_s,
            orphan_s=max(orphan_s, grace_s),
            max_open=max_open,
            max_spans=max_open_spans,
        )
        self.max_pending_spans = max_pending_spans
        # Where completed traces go (None: nowhere; nothing is held or read back). Given
        # callbacks instead, this ingest makes its own hand-over and delivers it to them.
        self._callbacks = (on_trace, on_feedback)
        if handoff is None and (on_trace is not None or on_feedback is not None):
            handoff = TraceHandoff()
        if handoff is not None and wants_traces is not None:
            handoff.wants = wants_traces
        self.handoff = handoff
        self._delivery: asyncio.Task[None] | None = None
        self.held = HeldSpans(max_held_bytes)
        self.clock = clock
        self.stats = IngestStats()
        self._pending = 0
        self._rows = GroupWriter(writer)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._recovery: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._handing: set[asyncio.Task[None]] = set()
        # completed traces whose hand-over to the policies is under way -> its task
        self._finishing: dict[tuple[str, str], asyncio.Future[None]] = {}
        # completed traces that got late spans before their hand-over: read back with them
        self._grew: set[tuple[str, str]] = set()
        # feedback on open traces, for those that turn out to have been graded before
        self._deferred: dict[tuple[str, str], list[Feedback]] = {}
        # feedback being stored and joined (done even if its request is cancelled meanwhile),
        # late spans being joined to their trace's row
        self._joining: set[asyncio.Task[None]] = set()
        # Requests in ingest workers: their batches are assembled even when the request is
        # cancelled meanwhile, and ``stop`` waits for them.
        self._arriving: set[asyncio.Task[Batch]] = set()
        # trace rows built again from the store (late spans, span events sent as logs)
        self._rebuilder = RowRebuilder(writer, lambda project, rows: self._store(project, (), rows))
        self._accepting = False

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stopping = False
        self._rows.start()
        if self.handoff is not None and self._callbacks != (None, None):
            self._delivery = asyncio.create_task(self._deliver(), name="evalsi-trace-handoff")
        self._accepting = True
        self._ticker = asyncio.create_task(self._tick_loop(), name="evalsi-trace-assembler")
        self._recovery = asyncio.create_task(self._recover(), name="evalsi-trace-recovery")

    async def stop(self) -> None:
        """Refuses new requests, lets those in flight commit, completes every open trace
        (their spans are stored already), hands them over, and stops the writer."""
        self._accepting = False
        if self._recovery is not None:  # what it has not reached is found again next start
            self._recovery.cancel()
            await asyncio.gather(self._recovery, return_exceptions=True)
            self._recovery = None
        while self._pending:  # requests whose spans are queued for the writer
            await asyncio.sleep(0.01)
        while self._arriving:  # requests in ingest workers: stored, then assembled
            await asyncio.gather(*self._arriving, return_exceptions=True)
        if self._ticker is not None:
            # A flag, not cancel(): wait_for can swallow a cancellation that races its
            # inner wait completing (the wake-up accept just gave), and the loop would go on.
            self._stopping = True
            self._wake.set()
            await self._ticker
            self._ticker = None
        await self._finish_all(self.assembler.flush(self.clock()))
        while self._handing or self._joining:  # completed traces and feedback are handed over
            await asyncio.gather(*self._handing, *self._joining, return_exceptions=True)
        if self._delivery is not None:  # our own callbacks: they get everything handed over
            assert self.handoff is not None
            await self.handoff.join()
            self._delivery.cancel()
            await asyncio.gather(self._delivery, return_exceptions=True)
            self._delivery = None
        await self._rows.stop()
        self._loop = None

    async def recovered(self) -> int:
        """Waits until the traces a previous server left open are back in assembly; how many."""
        if self._recovery is not None:
            await asyncio.wait({self._recovery})
        return self.stats.recovered

    # -- SpanSink ----------------------------------------------------------------------------

    async def accept(self, project: str, spans: Sequence[Span]) -> None:
        """Prepares ``spans`` here (redaction, mappers, rows) and accepts them."""
        if not spans:
            return
        self._admit(len(spans))  # before the work: a refused request costs nothing
        try:
            batch = prepare(project, spans, self.redactor)
        except Exception as e:  # a span the row encoder refuses (say, nesting past its limit)
            raise store_failure(e) from e
        await self._store_batch(project, batch)
        await self._committed(project, batch)

    def accept_stored(
        self, project: str, store: Callable[[], Awaitable[Batch]]
    ) -> asyncio.Future[Batch]:
        """Admits a request that ``store`` (an ingest worker) decodes, prepares and stores;
        its batch then joins assembly. The returned future settles after both; cancelling
        the caller does not stop them (the spans may be committed already), and ``stop``
        waits for them. Raises ``Overloaded`` at once when ingest is not running."""
        self._admit(0)

        async def arrive() -> Batch:
            batch = await store()
            await self._committed(project, batch)
            return batch

        task = asyncio.ensure_future(arrive())
        self._arriving.add(task)
        task.add_done_callback(self._arrived)
        return task

    def keeps_rows(self, project: str) -> bool:
        """Whether an ingest worker should send back the span rows of this project's requests
        (kept while their traces are open, so they are graded without a read-back)."""
        return self.handoff is not None and self.handoff.wants(project)

    def _arrived(self, task: asyncio.Task[Batch]) -> None:
        self._arriving.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a request that went away still had it answered

    def _admit(self, spans: int) -> None:
        if self._loop is None or not self._accepting:
            raise Overloaded("trace ingest is not running (starting or stopping)", 1.0)
        # One request alone is always let through, however large (the receiver's byte budget
        # bounds it); beside others it waits its turn.
        if self._pending and self._pending + spans > self.max_pending_spans:
            self.stats.refused += 1
            raise Overloaded(
                f"trace ingest has {self._pending} spans waiting to be stored; retry later",
                retry_after_s=1.0,
            )

    async def _store_batch(self, project: str, batch: Batch) -> None:
        assert batch.rows is not None
        n = len(batch.refs)
        self._pending += n
        stored = self._store(project, batch.rows, ())
        try:
            # Shielded: a request cancelled once its spans are queued (a gRPC deadline, the
            # server's graceful timeout) must still see them assembled once they commit.
            await asyncio.shield(stored)
        except asyncio.CancelledError:
            stored.add_done_callback(lambda f: self._after_cancel(f, project, batch))
            raise
        finally:
            self._pending -= n

    def _after_cancel(self, stored: asyncio.Future[None], project: str, batch: Batch) -> None:
        if stored.cancelled() or stored.exception() is not None:
            return  # not stored: the sender retries the whole request
        self._background(self._handing, self._committed(project, batch))

    async def _committed(self, project: str, batch: Batch) -> None:
        """What follows a commit: assembly, feedback events, late spans."""
        self.stats.requests += 1
        self.stats.spans += len(batch.refs)
        late = self.assembler.add(project, batch.refs, self.clock())
        rows = batch.rows if batch.rows is not None else batch.kept
        if rows and self.handoff is not None:
            open_ = {r.trace_id for r in batch.refs}
            self.held.hold(project, rows, [t for t in open_ if self.assembler.get(project, t)])
        for fb in batch.feedback:
            await self.feedback(project, fb)
        if late:
            self._grew.update(
                key for key in ((project, r.trace_id) for r in late) if key in self._finishing
            )
            self.stats.late_spans += len(late)
            # not in _handing: it may wait for a hand-over that waits for room there
            self._background(self._joining, self._join_late(project, late))
        self._wake.set()

    def _store(
        self,
        project: str,
        rows: Sequence[tuple[Any, ...]],
        summaries: Sequence[TraceSummary],
        existed: set[str] | None = None,
    ) -> asyncio.Future[None]:
        """Hands rows to the writer thread (``GroupWriter.put``)."""
        return self._rows.put(project, rows, summaries, existed)

    def _background(self, tasks: set[asyncio.Task[Any]], work: Awaitable[Any]) -> asyncio.Task[Any]:
        """``work`` as a task kept in ``tasks`` until it is done (``stop`` waits for them)."""
        task = asyncio.ensure_future(work)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    async def _handed_over(self, project: str, trace_id: str) -> None:
        """Waits while the trace is completed but not yet with the policies."""
        finishing = self._finishing.get((project, trace_id))
        if finishing is not None:
            await asyncio.wait({finishing})

    # -- late signals ------------------------------------------------------------------------

    async def feedback(self, project: str, feedback: Feedback) -> None:
        """Stores a late signal and joins it to its trace (open or completed). A signal
        already stored (re-sent) is not counted or joined again, so the joining goes on even
        if the caller is cancelled once it is stored (its retry would find it stored)."""
        await asyncio.shield(self._background(self._joining, self._feedback(project, feedback)))

    async def _feedback(self, project: str, feedback: Feedback) -> None:
        if not await asyncio.to_thread(self.writer.add_feedback, project, feedback):
            return
        self.stats.feedback += 1
        if not feedback.trace_id:
            return  # a session-level signal: stored, read by queries and session evaluators
        if self.assembler.get(project, feedback.trace_id) is not None:
            # graded with the trace when it completes (read back with its feedback); kept in
            # case it was graded before (late spans opened it again: see _completed_again)
            self._deferred.setdefault((project, feedback.trace_id), []).append(feedback)
            return
        if self.handoff is None or not self.handoff.wants(project):
            return
        # Completed, not yet with the policies (its row being written, or read back): once
        # handed over, the engine sees whether it graded it (with this signal or not).
        await self._handed_over(project, feedback.trace_id)
        trace = await asyncio.to_thread(self.writer.get_trace, project, feedback.trace_id)
        if trace is None:
            return
        await self.handoff.put(HandedTrace(trace, trace_to_record(trace), feedback))

    async def _join_late(self, project: str, late: list[SpanRef]) -> None:
        """Late spans of completed traces: each trace's row rebuilt from its stored spans,
        after its completion's own row (a trace still being handed over is waited for)."""
        trace_ids = sorted({s.trace_id for s in late})
        for trace_id in trace_ids:
            await self._handed_over(project, trace_id)
        try:
            await self._rebuilder.rebuild(project, trace_ids)
        except Exception:
            log.exception("joining late spans to %d trace(s) failed", len(trace_ids))

    # -- span events sent as log records -----------------------------------------------------

    async def accept_events(self, project: str, events: Sequence[LoggedEvent]) -> None:
        """Redacts and stores span events that came as OTLP log records; returns once they
        are committed (they count against ``max_pending_spans`` meanwhile). Their traces'
        rows are then rebuilt: at once if they completed, else when they do."""
        if not events:
            return
        self._admit(len(events))
        n = len(events)
        self._pending += n
        # shielded: once stored, the joining goes on even if the request is cancelled
        storing = self._background(self._joining, self._store_events(project, events))
        storing.add_done_callback(functools.partial(self._events_done, n))
        await asyncio.shield(storing)

    def _events_done(self, n: int, task: asyncio.Task[None]) -> None:
        self._pending -= n  # however the task ended, even cancelled before it began
        _retrieved(task)  # a sender gone meanwhile never reads its error

    async def _store_events(self, project: str, events: Sequence[LoggedEvent]) -> None:
        try:
            added = await asyncio.to_thread(self._redact_and_store, project, events)
        except Exception as e:
            raise store_failure(e, "span events") from e
        # Re-sent events (added < len) are joined again: a request that failed after its
        # events were stored (its feedback, say) is retried, and both steps are idempotent.
        self.stats.events += added
        for item in events:
            if item.event.name in EVENT_NAMES:
                carrier = Span(item.trace_id, item.span_id, events=[item.event])
                for fb in feedback_from_events(carrier):
                    await self.feedback(project, fb)
        trace_ids = sorted({e.trace_id for e in events})
        self._background(self._joining, self._join_events(project, trace_ids))

    def _redact_and_store(self, project: str, events: Sequence[LoggedEvent]) -> int:
        """In a worker thread: a big request's redaction would stall the event loop."""
        self.redactor.events(e.event for e in events)
        return self.writer.add_span_events(project, events)

    async def _join_events(self, project: str, trace_ids: list[str]) -> None:
        """The rows of the traces that completed already are rebuilt; open ones (and those
        whose spans are yet to come) are rebuilt by ``_hand_over`` when they complete, as it
        finds their events in the store."""
        try:
            settled = [t for t in trace_ids if self.assembler.get(project, t) is None]
            for trace_id in settled:
                await self._handed_over(project, trace_id)
            done = await asyncio.to_thread(self.writer.summarized, project, settled)
            await self._rebuilder.rebuild(project, sorted(done))
        except Exception:
            log.exception("joining span events to their traces failed")

    # -- assembly ----------------------------------------------------------------------------

    async def _recover(self) -> None:
        """Traces whose spans were stored (and acknowledged) but which a stopped server never
        completed: assembled again from the store, so they get a trace row and are graded
        after the grace period like any other. Runs beside ingest, not before it."""
        try:
            # at most a quarter of the open-trace bound: live traffic keeps its room
            limit = max(1, self.assembler.max_open // 4)
            found = await asyncio.to_thread(self.writer.unfinished_traces, RECOVER_WITHIN_S, limit)
            for project, trace_id in found:
                # Also when spans of it arrived since: the stored ones join them (a re-sent
                # span replaces its copy). One completed meanwhile is "late" to the assembler:
                # its row is rebuilt from the store, it is not graded again.
                await self._handed_over(project, trace_id)
                key = (project, trace_id)
                seen = self.assembler.get(project, trace_id) is not None or key in self._finishing
                trace = await asyncio.to_thread(self.writer.get_trace, project, trace_id)
                if trace is None or not trace.spans:
                    continue
                refs = [ref_of(s) for s in trace.spans]
                late = self.assembler.add(project, refs, self.clock())
                span_ids = (s.span_id for s in trace.spans)
                if self.assembler.get(project, trace_id) is not None and not self.held.covers(
                    project, trace_id, span_ids
                ):  # stored spans this process never held: the trace is read back whole
                    self.held.spill(project, trace_id)
                if late:
                    await self._join_late(project, late)
                elif not seen:  # not a trace this server is receiving now
                    self.stats.recovered += 1
            # rows a stopped server did not get to build again after their span events came
            stale = await asyncio.to_thread(self.writer.stale_event_rows, RECOVER_WITHIN_S, limit)
            for project, trace_id in stale:
                await self._handed_over(project, trace_id)
                if self.assembler.get(project, trace_id) is None:
                    await self._rebuilder.rebuild(project, [trace_id])
        except Exception:  # recovery must not stop the server
            log.exception("recovering the traces a previous server left open failed")
            return
        if self.stats.recovered:
            log.warning(
                "assembling again %d trace(s) left open by a previous server",
                self.stats.recovered,
            )
            self._wake.set()

    async def _tick_loop(self) -> None:
        while not self._stopping:
            await self._finish_all(self.assembler.due(self.clock()))
            deadline = self.assembler.next_deadline()
            wait = 1.0 if deadline is None else min(1.0, max(0.01, deadline - self.clock()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _finish_all(self, completed: Sequence[Completed[SpanRef]]) -> None:
        """The completed traces, a batch at a time; every one of them marked as finishing
        first (no longer open, not yet with the policies: feedback on them waits)."""
        assert self._loop is not None
        batches = []
        for start in range(0, len(completed), FINISH_BATCH):
            batch = completed[start : start + FINISH_BATCH]
            handed: asyncio.Future[None] = self._loop.create_future()
            keys = [(c.trace.project, c.trace.trace_id) for c in batch]
            for key in keys:
                self._finishing[key] = handed
            handed.add_done_callback(functools.partial(self._finished, keys))
            batches.append((batch, handed))
        reached = 0
        try:
            for batch, handed in batches:
                reached += 1
                await self._finish(batch, handed)  # settles ``handed``, whatever happens
        finally:
            for _, handed in batches[reached:]:  # never reached (cancelled): nothing to wait
                handed.set_result(None)

    async def _finish(
        self, completed: Sequence[Completed[SpanRef]], handed: asyncio.Future[None]
    ) -> None:
        """Trace rows of the completed traces (one transaction per project), then the policy
        hook, trace by trace; ``handed`` is settled once every hand-over is over."""
        ready: dict[str, list[TraceSummary]] = {}
        held: dict[str, dict[str, list[Row]]] = {}
        for done in completed:
            pending = done.trace
            rows = self.held.take(pending.project, pending.trace_id)  # let go, whatever follows
            if rows is not None:
                held.setdefault(pending.project, {})[pending.trace_id] = rows
            try:  # one bad trace must not stop assembly
                summary = summarize_refs(pending.project, pending.trace_id, pending.spans)
            except Exception:
                log.exception("completing trace %s failed", pending.trace_id)
                continue
            ready.setdefault(pending.project, []).append(summary)
        tasks: list[asyncio.Task[None]] = []
        try:
            for project, summaries in ready.items():
                # Not awaited here: the ticker goes on completing (and evicting) while the
                # writer commits, or a busy writer would hold the open traces past their
                # bound. But bounded: reading traces back for the policies must not pile up.
                while len(self._handing) >= MAX_HANDING:
                    await asyncio.wait(set(self._handing), return_when=asyncio.FIRST_COMPLETED)
                existed: set[str] = set()
                stored = self._store(project, (), summaries, existed)
                kept = held.get(project, {})
                work = self._hand_over(stored, project, summaries, existed, kept)
                tasks.append(self._background(self._handing, work))
        finally:
            if tasks:
                together = asyncio.gather(*tasks, return_exceptions=True)
                together.add_done_callback(functools.partial(_settle_once, handed))
            else:
                handed.set_result(None)
        await asyncio.sleep(0)  # let requests in between batches

    def _finished(self, keys: list[tuple[str, str]], handed: asyncio.Future[None]) -> None:
        for key in keys:
            self._deferred.pop(key, None)  # read back with the trace, or handed over
            self._grew.discard(key)
            if self._finishing.get(key) is handed:
                del self._finishing[key]

    async def _hand_over(
        self,
        stored: asyncio.Future[None],
        project: str,
        summaries: list[TraceSummary],
        existed: set[str],
        held: dict[str, list[Row]],
    ) -> None:
        """Once the trace rows are committed: each trace handed over, built from its ``held``
        rows when it has them, else read back.

        A trace that had a row already (``existed``) was completed before, by a server since
        restarted or more than ``late_s`` ago: these spans were late ones. Its row is rebuilt
        from all its stored spans, it is not graded again, and feedback that arrived while it
        was open is handed over with it."""
        try:
            await stored
        except Exception:
            log.exception("storing %d completed traces failed", len(summaries))
            return
        fresh = [s.trace_id for s in summaries if s.trace_id not in existed]
        self.stats.traces += len(fresh)
        logged = set(fresh)  # not known: every one read back, with its events
        try:  # rows built from refs that never saw the events sent apart: built again
            logged = await asyncio.to_thread(self.writer.traces_with_events, project, fresh)
            await self._rebuilder.rebuild(project, sorted(logged))
        except Exception:
            log.exception("rebuilding the rows of traces with span events failed")
        for summary in summaries:
            if summary.trace_id in existed:
                self.stats.late_spans += summary.span_count
                await self._completed_again(project, summary.trace_id)
        handoff = self.handoff
        if handoff is None or not handoff.wants(project):
            return
        # No room for some: not built nor read back at all (they would be dropped anyway).
        room = handoff.room()
        for trace_id in fresh[room:]:
            handoff.refuse()
            _dropped(handoff, trace_id)
        fresh = fresh[:room]
        in_memory = {
            t: held[t]
            for t in fresh
            if t in held and t not in logged and (project, t) not in self._grew
        }
        try:
            built = await asyncio.to_thread(self._from_memory, project, in_memory)
        except Exception:
            log.exception("building %d traces from memory failed", len(in_memory))
            built = {}
        for trace_id in fresh:
            try:
                item = built.get(trace_id)
                if item is None:
                    trace = await asyncio.to_thread(self.writer.get_trace, project, trace_id)
                    if trace is None:  # deleted meanwhile (retention)
                        continue
                    item = HandedTrace(trace, trace_to_record(trace))
                    self.stats.read_back += 1
                else:
                    self.stats.from_memory += 1
                if not handoff.offer(item):
                    _dropped(handoff, trace_id)
            except Exception:
                log.exception("handing trace %s to the policies failed", trace_id)

    def _from_memory(self, project: str, held: dict[str, list[Row]]) -> dict[str, HandedTrace]:
        """In a worker thread: the traces (and records) of held rows, with their feedback (one
        query for all), as ``get_trace`` would read them."""
        if not held:
            return {}
        feedback = self.writer.feedback_for_traces(project, list(held))
        out: dict[str, HandedTrace] = {}
        for trace_id, rows in held.items():
            try:
                trace = self.writer.trace_from_rows(
                    project, trace_id, rows, feedback.get(trace_id, ())
                )
                out[trace_id] = HandedTrace(trace, trace_to_record(trace), from_memory=True)
            except Exception:  # read back instead
                log.exception("building trace %s from memory failed", trace_id)
        return out

    async def _completed_again(self, project: str, trace_id: str) -> None:
        deferred = self._deferred.pop((project, trace_id), [])
        try:
            trace = (await self._rebuilder.rebuild(project, [trace_id], keep=True)).get(trace_id)
            if trace is None:  # after the partial row
                return
            if self.handoff is not None and self.handoff.wants(project):
                record = trace_to_record(trace)
                for feedback in deferred:
                    await self.handoff.put(HandedTrace(trace, record, feedback))
        except Exception:  # this trace only
            log.exception("rebuilding the row of trace %s failed", trace_id)

    async def _deliver(self) -> None:
        """Our own hand-over to ``on_trace``/``on_feedback``, in order (see the module doc)."""
        assert self.handoff is not None
        on_trace, on_feedback = self._callbacks
        while True:
            item = await self.handoff.get()
            try:
                if item.feedback is None and on_trace is not None:
                    await on_trace(item.trace, item.record)
                elif item.feedback is not None and on_feedback is not None:
                    await on_feedback(item.trace, item.record, item.feedback)
            except Exception:
                log.exception("handing trace %s over failed", item.trace.trace_id)
            finally:
                self.handoff.task_done()


def _dropped(handoff: TraceHandoff, trace_id: str) -> None:
    if handoff.dropped & (handoff.dropped - 1) == 0:  # the 1st, 2nd, 4th...: a burst must
        log.warning(  # not flood the log
            "the policies are behind: trace %s not graded (%d dropped so far)",
            trace_id,
            handoff.dropped,
        )


def _settle_once(future: asyncio.Future[None], _: object) -> None:
    if not future.done():
        future.set_result(None)


def record_row(trace: Trace) -> dict[str, Any]:
    """The record evaluators see for this trace, as a dataset row: built from the stored
    spans when read (trace rows do not store it; summaries keep previews only)."""
    return record_to_row(trace_to_record(trace))


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
