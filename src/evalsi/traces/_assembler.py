"""Trace assembly: spans buffered by (project, trace id) until the root span has ended and a
grace period has passed, as a tail-sampling collector waits for its decision.

Spans arrive out of order and from several services. A trace is complete ``grace_s`` after its
root span was received (the server's clock, not the sender's, so clock skew cannot stall it),
or, without a root, ``orphan_s`` after its last span arrived. Spans of a trace completed in the
last ``late_s`` are reported as late: they are stored and joined to the trace, but do not start
a second assembly. When more than ``max_open`` traces are open, or their spans number more
than ``max_spans``, the oldest complete early, so memory stays bounded whatever the senders do
(ingest holds ``SpanRef``s, not spans: see ``traces._refs``).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

Key = tuple[str, str]  # (project, trace id)


class Piece(Protocol):
    """What the assembler reads of a span: a ``Span`` or (in ingest) a ``SpanRef``."""

    @property
    def trace_id(self) -> str: ...
    @property
    def span_id(self) -> str: ...
    @property
    def is_root(self) -> bool: ...


P = TypeVar("P", bound=Piece)


@dataclass(slots=True)
class Pending(Generic[P]):
    """The spans of one trace held by the assembler."""

    trace_id: str
    project: str
    spans: list[P] = field(default_factory=list)


@dataclass(slots=True)
class _Open(Generic[P]):
    trace: Pending[P]
    deadline: float  # when it completes; moves with root arrival and new spans (orphans)
    has_root: bool = False
    # span id -> its place in trace.spans: a re-sent span (an exporter retrying a request
    # whose answer it did not see) replaces the first copy instead of counting twice
    index: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Completed(Generic[P]):
    """A trace the assembler let go of, and why."""

    trace: Pending[P]
    reason: str  # "root+grace" | "orphan" | "evicted" | "flushed"


@dataclass
class Assembler(Generic[P]):
    grace_s: float = 5.0
    orphan_s: float = 60.0
    late_s: float = 600.0
    max_open: int = 100_000
    max_spans: int = 100_000
    max_recent: int = 200_000
    # In first-seen order (insertion order; ``now`` never goes back): the oldest comes first.
    _open: dict[Key, _Open[P]] = field(default_factory=dict)
    _spans: int = 0
    # (deadline, seq, key): stale entries (deadline moved) are skipped when popped.
    _heap: list[tuple[float, int, Key]] = field(default_factory=list)
    _seq: int = 0
    # Completed traces by completion time, for recognising late spans.
    _recent: OrderedDict[Key, float] = field(default_factory=OrderedDict)

    @property
    def open_traces(self) -> int:
        return len(self._open)

    @property
    def held_spans(self) -> int:
        """Spans of the open traces (what ``max_spans`` bounds)."""
        return self._spans

    def get(self, project: str, trace_id: str) -> Pending[P] | None:
        """The open trace with this id, if it is still being assembled."""
        entry = self._open.get((project, trace_id))
        return None if entry is None else entry.trace

    def add(self, project: str, spans: Iterable[P], now: float) -> list[P]:
        """Buffers spans; returns the late ones (their trace already completed)."""
        late: list[P] = []
        for span in spans:
            key = (project, span.trace_id)
            entry = self._open.get(key)
            if entry is None:
                if key in self._recent:
                    late.append(span)
                    continue
                entry = _Open(Pending(span.trace_id, project), now + self.orphan_s)
                self._open[key] = entry
                self._push(entry.deadline, key)
            at = entry.index.get(span.span_id)
            if at is not None:
                entry.trace.spans[at] = span
            else:
                entry.index[span.span_id] = len(entry.trace.spans)
                entry.trace.spans.append(span)
                self._spans += 1
            if span.is_root and not entry.has_root:
                entry.has_root = True
                entry.deadline = now + self.grace_s
                self._push(entry.deadline, key)
            elif not entry.has_root:
                entry.deadline = now + self.orphan_s
                # pushed lazily: the stale heap entry re-pushes itself when popped
        return late

    def due(self, now: float) -> list[Completed[P]]:
        """Traces whose time has come, oldest deadline first (and the oldest open ones while
        more than ``max_open`` are open or they hold more than ``max_spans`` spans)."""
        done: list[Completed[P]] = []
        while self._heap and self._heap[0][0] <= now:
            _, _, key = heapq.heappop(self._heap)
            entry = self._open.get(key)
            if entry is None:
                continue
            if entry.deadline > now:  # moved later since pushed
                self._push(entry.deadline, key)
                continue
            done.append(self._complete(key, "root+grace" if entry.has_root else "orphan", now))
        while self._open and (len(self._open) > self.max_open or self._spans > self.max_spans):
            done.append(self._complete(next(iter(self._open)), "evicted", now))
        return done

    def flush(self, now: float) -> list[Completed[P]]:
        """Completes every open trace (shutdown)."""
        return [self._complete(key, "flushed", now) for key in list(self._open)]

    def next_deadline(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def _complete(self, key: Key, reason: str, now: float) -> Completed[P]:
        entry = self._open.pop(key)
        self._spans -= len(entry.trace.spans)
        self._recent[key] = now
        self._recent.move_to_end(key)
        while self._recent and (
            len(self._recent) > self.max_recent
            or next(iter(self._recent.values())) < now - self.late_s
        ):
            self._recent.popitem(last=False)
        return Completed(entry.trace, reason)

    def _push(self, deadline: float, key: Key) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, key))
