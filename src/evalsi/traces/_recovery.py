"""Traces a stopped server left open, taken up again at start (``recover``): their spans were
stored (and acknowledged) but they never got a trace row. Assembled again from the store, they
are graded after the grace period like any other. Recovery runs beside ingest, not before it.
"""

from __future__ import annotations

import asyncio
import logging

from evalsi.traces._completion import Completion
from evalsi.traces._parts import Parts
from evalsi.traces._refs import ref_of

log = logging.getLogger("evalsi.traces")

RECOVER_WITHIN_S = 3600.0
"""Traces with spans and no trace row are assembled again if they started within this long of
the project's newest span."""


async def recover(parts: Parts, completion: Completion) -> None:
    """Puts the traces a previous server left open back in assembly (counted in
    ``stats.recovered``, those this server is not receiving now); logs what fails."""
    store, assembler, held = parts.store, parts.assembler, parts.held
    try:
        # at most a quarter of the open-trace bound: live traffic keeps its room
        limit = max(1, assembler.max_open // 4)
        found = await asyncio.to_thread(store.unfinished_traces, RECOVER_WITHIN_S, limit)
        for project, trace_id in found:
            # Also when spans of it arrived since: the stored ones join them (a re-sent span
            # replaces its copy). One completed meanwhile is "late" to the assembler: its row
            # is rebuilt from the store, it is not graded again.
            await completion.handed_over(project, trace_id)
            seen = parts.is_open(project, trace_id) or completion.finishing(project, trace_id)
            trace = await asyncio.to_thread(store.get_trace, project, trace_id)
            if trace is None or not trace.spans:
                continue
            spans = assembler.add(project, [ref_of(s) for s in trace.spans], parts.clock())
            span_ids = (s.span_id for s in trace.spans)
            if parts.is_open(project, trace_id) and not held.covers(project, trace_id, span_ids):
                held.spill(project, trace_id)  # spans this process never held: read back whole
            if spans:
                await completion.join_spans(project, spans)
            elif not seen:  # not a trace this server is receiving now
                parts.stats.recovered += 1
        # rows a stopped server did not get to build again after their span events came
        stale = await asyncio.to_thread(store.stale_event_rows, RECOVER_WITHIN_S, limit)
        for project, trace_id in stale:
            await completion.handed_over(project, trace_id)
            if not parts.is_open(project, trace_id):
                await parts.rebuilder.rebuild(project, [trace_id])
    except Exception:  # recovery must not stop the server
        log.exception("recovering the traces a previous server left open failed")
        return
    if parts.stats.recovered:
        log.warning(
            "assembling again %d trace(s) left open by a previous server", parts.stats.recovered
        )
