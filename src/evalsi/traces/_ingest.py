"""The ingest pipeline behind the OTLP receiver: prepare, store, assemble, hand over.

``accept`` (the receiver's ``SpanSink``) prepares a request's spans (``traces._prepare``) and
waits until the writer thread (``traces._group_writer``) has committed their rows, so an OTLP
200 means the spans survive a crash; ``accept_stored`` takes a request an ingest worker process
prepared and stored. Assembly holds refs, and the rows held for open traces are bounded in
bytes, so memory stays bounded whatever the senders do. A ticker hands the traces it completes
to ``Completion``, which late spans, span events (``accept_events``) and feedback join too.
``on_trace``/``on_feedback`` (embedded use, tests): this ingest consumes its own hand-over and
calls them in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from evalsi.core import Feedback, Record, Span, Trace, TraceHandoff
from evalsi.store import TraceStore
from evalsi.traces._assembler import Assembler
from evalsi.traces._completion import Completion
from evalsi.traces._feedback import EVENT_NAMES, feedback_from_events
from evalsi.traces._group_writer import GroupWriter, store_failure
from evalsi.traces._held import DEFAULT_MAX_BYTES, HeldSpans
from evalsi.traces._parts import IngestStats, Parts, background, retrieved
from evalsi.traces._prepare import Batch, prepare
from evalsi.traces._rebuild import RowRebuilder
from evalsi.traces._recovery import recover
from evalsi.traces._redact import Redactor
from evalsi.traces._refs import SpanRef
from evalsi.traces._sink import LoggedEvent, Overloaded

log = logging.getLogger("evalsi.traces")


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
        on_trace: Callable[[Trace, Record], Awaitable[None]] | None = None,
        on_feedback: Callable[[Trace, Record, Feedback], Awaitable[None]] | None = None,
        wants_traces: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        assemble: bool = True,
    ) -> None:
        """``assemble`` False: spans are stored and not assembled here (a cluster's replicas:
        ``SharedCompletion`` completes traces from the store once for all of them, and the
        store's ``trace_claims`` say which; nothing is handed over from this ingest)."""
        if not assemble and (handoff is not None or on_trace or on_feedback or wants_traces):
            raise ValueError("an ingest that does not assemble hands nothing over")
        self.assemble = assemble
        self.redactor = redactor or Redactor(())
        self.assembler: Assembler[SpanRef] = Assembler(
            grace_s=grace_s,
            orphan_s=max(orphan_s, grace_s),
            max_open=max_open,
            max_spans=max_open_spans,
        )
        self.max_pending_spans = max_pending_spans
        # Given callbacks instead of a hand-over, this ingest makes its own and delivers it.
        self._callbacks = (on_trace, on_feedback)
        if handoff is None and (on_trace is not None or on_feedback is not None):
            handoff = TraceHandoff()
        if handoff is not None and wants_traces is not None:
            handoff.wants = wants_traces
        self.handoff = handoff
        self.held = HeldSpans(max_held_bytes)
        self.stats = IngestStats()
        rows = GroupWriter(writer)
        # trace rows built again from the store (late spans, span events sent as logs)
        rebuilder = RowRebuilder(writer, lambda project, traces: rows.put(project, (), traces))
        self.parts = Parts(
            writer, rows, rebuilder, self.assembler, self.held, handoff, self.stats, clock
        )
        self.completion = Completion(self.parts)
        self._pending = 0
        self._accepting = False
        self._delivery: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._recovery: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        # Requests in ingest workers: their batches are assembled even when the request is
        # cancelled meanwhile, and ``stop`` waits for them.
        self._arriving: set[asyncio.Task[Batch]] = set()
        # feedback being stored and joined (done even if its request is cancelled meanwhile),
        # late spans and span events being joined to their trace's row
        self._joining: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._stopping = False
        self.parts.rows.start()
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
        await self.completion.finish_all(self.assembler.flush(self.parts.clock()))
        handing, joining = self.completion.handing, self._joining
        while handing or joining:  # completed traces and feedback are handed over
            await asyncio.gather(*handing, *joining, return_exceptions=True)
        if self._delivery is not None:  # our own callbacks: they get everything handed over
            assert self.handoff is not None
            await self.handoff.join()
            self._delivery.cancel()
            await asyncio.gather(self._delivery, return_exceptions=True)
            self._delivery = None
        await self.parts.rows.stop()

    async def recovered(self) -> int:
        """Waits until the traces a previous server left open are back in assembly; how many."""
        if self._recovery is not None:
            await asyncio.wait({self._recovery})
        return self.stats.recovered

    async def _recover(self) -> None:
        if not self.assemble:  # the store's claims keep what a stopped replica left open
            return
        await recover(self.parts, self.completion)
        if self.stats.recovered:
            self._wake.set()

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

        task = background(self._arriving, arrive())
        task.add_done_callback(retrieved)  # a request that went away still had it answered
        return task

    def keeps_rows(self, project: str) -> bool:
        """Whether an ingest worker should send back the span rows of this project's requests
        (kept while their traces are open, so they are graded without a read-back)."""
        return self.handoff is not None and self.handoff.wants(project)

    async def accept_events(self, project: str, events: Sequence[LoggedEvent]) -> None:
        """Redacts and stores span events that came as OTLP log records; returns once they
        are committed (they count against ``max_pending_spans`` meanwhile). Their traces'
        rows are then rebuilt: at once if they completed, else when they do."""
        if not events:
            return
        n = len(events)
        self._admit(n)
        self._pending += n
        # shielded: once stored, the joining goes on even if the request is cancelled
        storing = background(self._joining, self._store_events(project, events))
        storing.add_done_callback(functools.partial(self._events_done, n))
        await asyncio.shield(storing)

    def _events_done(self, n: int, task: asyncio.Task[None]) -> None:
        self._pending -= n  # however the task ended, even cancelled before it began
        retrieved(task)  # a sender gone meanwhile never reads its error

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
        background(self._joining, self.completion.join_events(project, trace_ids))

    def _redact_and_store(self, project: str, events: Sequence[LoggedEvent]) -> int:
        """In a worker thread: a big request's redaction would stall the event loop."""
        self.redactor.events(e.event for e in events)
        return self.parts.store.add_span_events(project, events)

    async def feedback(self, project: str, feedback: Feedback) -> None:
        """Stores a late signal and joins it to its trace (open or completed). A signal
        already stored (re-sent) is not counted or joined again, so the joining goes on even
        if the caller is cancelled once it is stored (its retry would find it stored)."""
        await asyncio.shield(background(self._joining, self._feedback(project, feedback)))

    async def _feedback(self, project: str, feedback: Feedback) -> None:
        if not await asyncio.to_thread(self.parts.store.add_feedback, project, feedback):
            return
        self.stats.feedback += 1
        if not feedback.trace_id:
            return  # a session-level signal: stored, read by queries and session evaluators
        if self.parts.is_open(project, feedback.trace_id):
            self.completion.defer(project, feedback)  # graded with it when it completes
        else:
            await self.completion.join_feedback(project, feedback)

    def _admit(self, spans: int) -> None:
        if not self._accepting:
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
        stored = self.parts.rows.put(project, batch.rows, ())
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
        background(self.completion.handing, self._committed(project, batch))

    async def _committed(self, project: str, batch: Batch) -> None:
        """What follows a commit: assembly, feedback events, late spans."""
        self.stats.requests += 1
        self.stats.spans += len(batch.refs)
        if not self.assemble:
            for fb in batch.feedback:
                await self.feedback(project, fb)
            return
        late = self.assembler.add(project, batch.refs, self.parts.clock())
        rows = batch.rows if batch.rows is not None else batch.kept
        if rows and self.handoff is not None:
            open_ = {r.trace_id for r in batch.refs}
            self.held.hold(project, rows, [t for t in open_ if self.parts.is_open(project, t)])
        for fb in batch.feedback:
            await self.feedback(project, fb)
        if late:
            self.completion.grew(project, late)
            self.stats.late_spans += len(late)
            # not in ``handing``: it may wait for a hand-over that waits for room there
            background(self._joining, self.completion.join_spans(project, late))
        self._wake.set()

    async def _tick_loop(self) -> None:
        while not self._stopping:
            await self.completion.finish_all(self.assembler.due(self.parts.clock()))
            deadline = self.assembler.next_deadline()
            wait = 1.0 if deadline is None else min(1.0, max(0.01, deadline - self.parts.clock()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

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
