"""The hand-over of completed traces from ingest (``evalsi.traces``) to the online policies
(``evalsi.policies``): values in a bounded queue, so neither side imports the other and the
server wires no callbacks between them.

Overflow rule: ingest ``offer``s a completed trace and never waits (a slow judge must not hold
up trace rows or assembly); when the queue is full the trace is not handed over and is
counted in ``dropped`` (its spans and row are stored; it is just not graded); ingest asks
for ``room`` first, so a trace that would be dropped is not even built (``refuse``). Feedback on a
completed trace is ``put``: its request waits for room instead (feedback is rare, and one lost
would be a missed ``onFeedback`` step).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from evalsi.core._record import Record
from evalsi.core._trace import Feedback, Trace

DEFAULT_HANDOFF_SIZE = 1024
"""Completed traces waiting for the policies before more are dropped."""


@dataclass(frozen=True, slots=True)
class HandedTrace:
    """A completed trace as handed over: the trace, its record, and ``feedback`` when the
    hand-over is a late signal on a trace completed before (None: grade the trace)."""

    trace: Trace
    record: Record
    feedback: Feedback | None = None
    from_memory: bool = False  # built from the spans assembly held, not read back


class TraceHandoff(asyncio.Queue[HandedTrace]):
    """A bounded queue of ``HandedTrace``s (see the module doc for the overflow rule): ingest
    ``offer``s completed traces and ``put``s feedback; the consumer ``get``s, marks each
    ``task_done``, and ``join`` waits for all.

    ``wants(project)``: whether anyone grades that project's traces; the consumer sets it
    (the policy engine: a policy is applied there), and ingest neither holds nor reads back
    the traces of a project nobody wants.
    """

    def __init__(
        self, maxsize: int = DEFAULT_HANDOFF_SIZE, wants: Callable[[str], bool] | None = None
    ) -> None:
        if maxsize < 1:
            raise ValueError("a trace hand-over needs room for at least one trace")
        super().__init__(maxsize)
        self.wants: Callable[[str], bool] = wants or (lambda project: True)
        self.offered = 0
        self.dropped = 0

    def offer(self, item: HandedTrace) -> bool:
        """Hands a completed trace over without waiting; False (and counted) when full."""
        self.offered += 1
        try:
            self.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            return False
        return True

    def room(self) -> int:
        """How many more traces ``offer`` would take now."""
        return self.maxsize - self.qsize()

    def refuse(self) -> None:
        """Counts a trace dropped without being built (the queue had no room for it)."""
        self.offered += 1
        self.dropped += 1
