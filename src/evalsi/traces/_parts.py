"""What the stages of ingest share (``Parts``, ``IngestStats``), and how they keep work that
outlives its call (``background``) so that ``Ingest.stop`` can wait for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from evalsi.core import TraceHandoff
from evalsi.store import TraceStore
from evalsi.traces._assembler import Assembler
from evalsi.traces._group_writer import GroupWriter
from evalsi.traces._held import HeldSpans
from evalsi.traces._rebuild import RowRebuilder
from evalsi.traces._refs import SpanRef


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


@dataclass(frozen=True, slots=True)
class Parts:
    """Every row goes through ``rows`` (one writer: see ``traces._group_writer``); ``handoff``
    None: completed traces go nowhere, and nothing is held or read back for them."""

    store: TraceStore
    rows: GroupWriter
    rebuilder: RowRebuilder
    assembler: Assembler[SpanRef]
    held: HeldSpans
    handoff: TraceHandoff | None
    stats: IngestStats
    clock: Callable[[], float]

    def is_open(self, project: str, trace_id: str) -> bool:
        return self.assembler.get(project, trace_id) is not None


def background(tasks: set[asyncio.Task[Any]], work: Awaitable[Any]) -> asyncio.Task[Any]:
    """``work`` as a task kept in ``tasks`` until it is done (``stop`` waits for them)."""
    task = asyncio.ensure_future(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task


def retrieved(task: asyncio.Future[Any]) -> None:
    """A done callback: the task's error is read, so one nobody awaits is not logged."""
    if not task.cancelled():
        task.exception()
