"""Trace rows built again from the store: after late spans, and for traces with span events
that came as OTLP log records (assembly's refs never saw those).

Rebuilds of one trace run one at a time (a lock per trace, taken in trace-id order so two
rebuilds of overlapping traces cannot deadlock), each reading after the one before wrote: the
row written last is built from the latest read, whatever order the triggers came in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence

from evalsi.core import Trace
from evalsi.store import TraceStore, TraceSummary
from evalsi.traces._refs import ref_of, summarize_refs

StoreRows = Callable[[str, Sequence[TraceSummary]], Awaitable[None]]

log = logging.getLogger("evalsi.traces")


def summarize(trace: Trace) -> TraceSummary:
    """The trace's row, from its spans (as assembly builds it from their refs)."""
    return summarize_refs(trace.project, trace.trace_id, [ref_of(s) for s in trace.spans])


class RowRebuilder:
    """Reads traces whole and writes their rows again, through ``store`` (the ingest writer:
    a row written by any other connection could overtake the assembly's own)."""

    def __init__(self, reader: TraceStore, store: StoreRows) -> None:
        self._reader = reader
        self._store = store
        # a lock per trace while anyone holds or waits for it
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def rebuild(
        self, project: str, trace_ids: Sequence[str], *, keep: bool = False
    ) -> dict[str, Trace]:
        """The rows of these traces again, in one commit (one at a time if that fails).
        With ``keep``, returns the traces read; else nothing is held but their rows. A trace
        that cannot be read or summarised is logged and skipped, not the others."""
        ids = sorted(set(trace_ids))
        if not ids:
            return {}
        locks = [self._locks.setdefault((project, t), asyncio.Lock()) for t in ids]
        async with contextlib.AsyncExitStack() as stack:
            for lock in locks:
                await stack.enter_async_context(lock)
            rows, traces = await asyncio.to_thread(self._read, project, ids, keep)
            if rows:
                await self._write(project, rows)
            return traces

    def _read(
        self, project: str, ids: list[str], keep: bool
    ) -> tuple[list[TraceSummary], dict[str, Trace]]:
        """Each trace read and summarised in turn (a batch of whole traces is never held)."""
        rows: list[TraceSummary] = []
        kept: dict[str, Trace] = {}
        for trace_id in ids:
            try:
                trace = self._reader.get_trace(project, trace_id)
                if trace is None:
                    continue
                rows.append(summarize(trace))
            except Exception:
                log.exception("rebuilding the row of trace %s failed", trace_id)
                continue
            if keep:
                kept[trace_id] = trace
        return rows, kept

    async def _write(self, project: str, rows: list[TraceSummary]) -> None:
        try:
            await self._store(project, rows)
        except Exception:
            if len(rows) == 1:
                raise
            for row in rows:  # one bad row must not cost the others theirs
                try:
                    await self._store(project, [row])
                except Exception:
                    log.exception("writing the row of trace %s failed", row.trace_id)
