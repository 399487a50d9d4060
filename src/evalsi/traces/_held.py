"""The span rows of open traces, kept so a completed trace is graded from memory instead of
being read back from the store: ``HeldSpans``.

Ingest encodes every span as a row before storing it (``store.span_rows``); the rows of a
trace still being assembled are kept here, up to ``max_bytes`` in all and ``max_trace_bytes``
for one trace. A trace that would go past either bound is *spilled*: its rows are let go and
it is read back from the store when it completes, as every trace was before. So are traces
whose earlier spans this process never saw (assembled again at start-up). Rows, not spans:
they are what an ingest worker already has (and pickles back cheaply), their size is known,
and decoding them is the store's own read path, so a trace graded from memory is the trace a
read-back gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from evalsi.store import row_bytes

Key = tuple[str, str]  # (project, trace id)
Row = tuple[Any, ...]  # SPAN_COLUMNS: project, trace id, span id, ...

DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_MAX_TRACE_BYTES = 8 << 20


class HeldSpans:
    """Rows by trace, bounded in bytes; see the module doc."""

    def __init__(
        self, max_bytes: int = DEFAULT_MAX_BYTES, max_trace_bytes: int = DEFAULT_MAX_TRACE_BYTES
    ) -> None:
        self.max_bytes = max_bytes
        self.max_trace_bytes = min(max_trace_bytes, max_bytes)
        self.bytes = 0
        self.spilled = 0  # traces let go (counted once each)
        self._rows: dict[Key, dict[str, Row]] = {}  # span id -> row (a re-sent span replaces)
        self._sizes: dict[Key, int] = {}
        self._spilled: set[Key] = set()

    @property
    def traces(self) -> int:
        return len(self._rows)

    def hold(self, project: str, rows: Iterable[Row], open_: Sequence[str]) -> None:
        """Keeps the rows of the traces in ``open_`` (those being assembled: rows of completed
        traces are late, joined from the store)."""
        keep = set(open_)
        for row in rows:
            trace_id = row[1]
            if trace_id not in keep:
                continue
            key = (project, trace_id)
            if key in self._spilled:
                continue
            held = self._rows.setdefault(key, {})
            size = row_bytes(row)
            old = held.get(row[2])
            if old is not None:
                size -= row_bytes(old)
            total = self._sizes.get(key, 0) + size
            if self.bytes + size > self.max_bytes or total > self.max_trace_bytes:
                self.spill(project, trace_id)
                continue
            held[row[2]] = row
            self._sizes[key] = total
            self.bytes += size

    def covers(self, project: str, trace_id: str, span_ids: Iterable[str]) -> bool:
        """Whether every one of these spans of the trace is held."""
        held = self._rows.get((project, trace_id))
        return held is not None and all(s in held for s in span_ids)

    def spill(self, project: str, trace_id: str) -> None:
        """Lets the trace's rows go: it is read back when it completes."""
        key = (project, trace_id)
        if key in self._spilled:
            return
        self._spilled.add(key)
        self.spilled += 1
        self._rows.pop(key, None)
        self.bytes -= self._sizes.pop(key, 0)

    def take(self, project: str, trace_id: str) -> list[Row] | None:
        """The completed trace's rows, let go of here; None when it must be read back
        (spilled, or nothing of it held)."""
        key = (project, trace_id)
        held = self._rows.pop(key, None)
        self.bytes -= self._sizes.pop(key, 0)
        if key in self._spilled:
            self._spilled.discard(key)
            return None
        return list(held.values()) if held else None
