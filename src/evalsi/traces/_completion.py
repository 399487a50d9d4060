"""Completed traces: their rows, their hand-over to the policies, and what joins them later.

Each is summarised from its refs, its row stored through the ingest writer (a connection of
its own would take turns with it at SQLite's file lock) and, when the policies want the
project's traces, offered to the bounded ``TraceHandoff`` (full: dropped and counted), built
from the rows ``HeldSpans`` kept while it was open, else read back from the store whole.
Until then it is *finishing*: what joins it later waits (``handed_over``). Late spans and span
events sent as log records (stored apart, merged into their spans when read) have its row
rebuilt from the store; feedback is handed over with the stored trace.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence

from evalsi.core import Feedback, HandedTrace, TraceHandoff
from evalsi.store import TraceSummary
from evalsi.traces._assembler import Completed, Key
from evalsi.traces._held import Row
from evalsi.traces._parts import Parts, background
from evalsi.traces._records import trace_to_record
from evalsi.traces._refs import SpanRef, summarize_refs

log = logging.getLogger("evalsi.traces")

FINISH_BATCH = 256
"""Completed traces turned into records per turn of the ticker: the event loop serves
requests between turns (the turn awaits the writer's commit), so a burst of due traces
never stalls ingest for long."""

MAX_HANDING = 64
"""Batches of completed traces being stored and handed to the policies at once; past it the
ticker waits (traces then complete later, or early through the open-trace bounds)."""


class Completion:
    """Completed traces and what joins them later; see the module doc."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.handing: set[asyncio.Task[None]] = set()
        # completed traces whose hand-over to the policies is under way -> its task
        self._finishing: dict[Key, asyncio.Future[None]] = {}
        # completed traces that got late spans before their hand-over: read back with them
        self._grew: set[Key] = set()
        # feedback on open traces, for those that turn out to have been graded before
        self._deferred: dict[Key, list[Feedback]] = {}

    def finishing(self, project: str, trace_id: str) -> bool:
        return (project, trace_id) in self._finishing

    async def handed_over(self, project: str, trace_id: str) -> None:
        """Waits while the trace is completed but not yet with the policies."""
        finishing = self._finishing.get((project, trace_id))
        if finishing is not None:
            await asyncio.wait({finishing})

    def grew(self, project: str, late: Sequence[SpanRef]) -> None:
        """Late spans of these traces: one still finishing is read back with them."""
        keys = ((project, r.trace_id) for r in late)
        self._grew.update(key for key in keys if key in self._finishing)

    def defer(self, project: str, feedback: Feedback) -> None:
        """Feedback on an open trace: graded with it when it completes (read back with its
        feedback); kept in case it was graded before (late spans opened it again)."""
        self._deferred.setdefault((project, feedback.trace_id), []).append(feedback)

    async def finish_all(self, completed: Sequence[Completed[SpanRef]]) -> None:
        """The completed traces, a batch at a time; every one of them marked as finishing
        first (no longer open, not yet with the policies: feedback on them waits)."""
        loop = asyncio.get_running_loop()
        batches = []
        for start in range(0, len(completed), FINISH_BATCH):
            batch = completed[start : start + FINISH_BATCH]
            handed: asyncio.Future[None] = loop.create_future()
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
            rows = self.parts.held.take(pending.project, pending.trace_id)  # let go, whatever
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
                while len(self.handing) >= MAX_HANDING:
                    await asyncio.wait(set(self.handing), return_when=asyncio.FIRST_COMPLETED)
                existed: set[str] = set()
                stored = self.parts.rows.put(project, (), summaries, existed)
                kept = held.get(project, {})
                work = self._hand_over(stored, project, summaries, existed, kept)
                tasks.append(background(self.handing, work))
        finally:
            if tasks:
                together = asyncio.gather(*tasks, return_exceptions=True)
                together.add_done_callback(functools.partial(_settle_once, handed))
            else:
                handed.set_result(None)
        await asyncio.sleep(0)  # let requests in between batches

    def _finished(self, keys: list[Key], handed: asyncio.Future[None]) -> None:
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
        stats, store = self.parts.stats, self.parts.store
        fresh = [s.trace_id for s in summaries if s.trace_id not in existed]
        stats.traces += len(fresh)
        logged = set(fresh)  # not known: every one read back, with its events
        try:  # rows built from refs that never saw the events sent apart: built again
            logged = await asyncio.to_thread(store.traces_with_events, project, fresh)
            await self.parts.rebuilder.rebuild(project, sorted(logged))
        except Exception:
            log.exception("rebuilding the rows of traces with span events failed")
        for summary in summaries:
            if summary.trace_id in existed:
                stats.late_spans += summary.span_count
                await self._completed_again(project, summary.trace_id)
        handoff = self.parts.handoff
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
                    trace = await asyncio.to_thread(store.get_trace, project, trace_id)
                    if trace is None:  # deleted meanwhile (retention)
                        continue
                    item = HandedTrace(trace, trace_to_record(trace))
                    stats.read_back += 1
                else:
                    stats.from_memory += 1
                if not handoff.offer(item):
                    _dropped(handoff, trace_id)
            except Exception:
                log.exception("handing trace %s to the policies failed", trace_id)

    def _from_memory(self, project: str, held: dict[str, list[Row]]) -> dict[str, HandedTrace]:
        """In a worker thread: the traces (and records) of held rows, with their feedback (one
        query for all), as ``get_trace`` would read them."""
        if not held:
            return {}
        store = self.parts.store
        feedback = store.feedback_for_traces(project, list(held))
        out: dict[str, HandedTrace] = {}
        for trace_id, rows in held.items():
            try:
                trace = store.trace_from_rows(project, trace_id, rows, feedback.get(trace_id, ()))
                out[trace_id] = HandedTrace(trace, trace_to_record(trace), from_memory=True)
            except Exception:  # read back instead
                log.exception("building trace %s from memory failed", trace_id)
        return out

    async def _completed_again(self, project: str, trace_id: str) -> None:
        deferred = self._deferred.pop((project, trace_id), [])
        try:
            rebuilt = await self.parts.rebuilder.rebuild(project, [trace_id], keep=True)
            trace = rebuilt.get(trace_id)
            if trace is None:  # after the partial row
                return
            if self.parts.handoff is not None and self.parts.handoff.wants(project):
                record = trace_to_record(trace)
                for feedback in deferred:
                    await self.parts.handoff.put(HandedTrace(trace, record, feedback))
        except Exception:  # this trace only
            log.exception("rebuilding the row of trace %s failed", trace_id)

    async def join_feedback(self, project: str, feedback: Feedback) -> None:
        """Feedback on a completed trace, handed over with it once the trace is (the engine
        then sees whether it graded it, with this signal or not)."""
        handoff = self.parts.handoff
        if handoff is None or not handoff.wants(project):
            return
        await self.handed_over(project, feedback.trace_id)
        trace = await asyncio.to_thread(self.parts.store.get_trace, project, feedback.trace_id)
        if trace is not None:
            await handoff.put(HandedTrace(trace, trace_to_record(trace), feedback))

    async def join_spans(self, project: str, late: list[SpanRef]) -> None:
        """Late spans of completed traces: each trace's row rebuilt from its stored spans,
        after its completion's own row."""
        trace_ids = sorted({s.trace_id for s in late})
        for trace_id in trace_ids:
            await self.handed_over(project, trace_id)
        try:
            await self.parts.rebuilder.rebuild(project, trace_ids)
        except Exception:
            log.exception("joining late spans to %d trace(s) failed", len(trace_ids))

    async def join_events(self, project: str, trace_ids: list[str]) -> None:
        """Span events stored apart: the rows of their traces that completed already are
        rebuilt; open ones (and those whose spans are yet to come) when they complete, as
        ``_hand_over`` finds their events in the store."""
        try:
            settled = [t for t in trace_ids if not self.parts.is_open(project, t)]
            for trace_id in settled:
                await self.handed_over(project, trace_id)
            done = await asyncio.to_thread(self.parts.store.summarized, project, settled)
            await self.parts.rebuilder.rebuild(project, sorted(done))
        except Exception:
            log.exception("joining span events to their traces failed")


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
