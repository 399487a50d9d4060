"""What trace assembly keeps of a span once it is stored: a ``SpanRef``.

Ingest stores every span whole (``store.span_rows``) and hands the assembler only this compact
tuple: ids, times, status, the view's type and ids, and short previews of what the span's
view says went in and came out. A completed trace's summary row (``summarize_refs``) is built
from its refs alone, by the same rules ``trace_to_record`` picks a record's input and output
with, so assembly never holds raw attributes or content, and refs cross a process boundary
cheaply (an ingest worker sends them back after committing the spans).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from evalsi.core import JsonValue, Span, SpanType
from evalsi.store import TraceSummary, preview
from evalsi.traces._records import request_io, to_content, view_of

_START = operator.itemgetter(3)  # SpanRef.start_time_unix_nano
_START_END = operator.itemgetter(3, 4)
# The span types whose input and output may speak for the whole request (besides the root).
_SPEAKERS = frozenset(("agent", "chain"))


class SpanRef(NamedTuple):
    """A stored span as assembly sees it. A tuple: cheap to build, pickle and hold."""

    trace_id: str
    span_id: str
    parent_span_id: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    error: bool
    name: str
    service: str
    type: SpanType
    session_id: str
    user_id: str
    input_preview: str | None  # None: the view has no input (or its type never speaks)
    output_preview: str | None

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id


def ref_of(span: Span) -> SpanRef:
    """The span's ref (its view is computed if ingest has not set it)."""
    view = view_of(span)
    speaks = view.type == "llm" or view.type in _SPEAKERS or span.is_root
    return SpanRef(
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        span.error,
        span.name,
        span.service,
        view.type,
        view.session_id,
        view.user_id,
        _preview(view.input) if speaks else None,
        _preview(view.output) if speaks else None,
    )


def _preview(value: JsonValue) -> str | None:
    """``preview(to_content(value).as_text())``, without building the messages when they are
    well-formed chat messages: the common case, and most of the cost of a ref otherwise."""
    if value is None:
        return None
    if type(value) is str:
        return preview(value)
    messages: Any = value
    if isinstance(value, dict) and len(value) == 1:
        messages = value.get("messages")
    if type(messages) is list and messages and _plain(messages):
        said = next((m for m in reversed(messages) if str(m["role"]) == "assistant"), None)
        return preview((said or messages[-1]).get("content") or "")
    content = to_content(value)
    return None if content is None else preview(content.as_text())


def _plain(messages: list[Any]) -> bool:
    """Chat messages ``message_from_dict`` reads: a role, text (or no) content, well-formed
    tool calls if any."""
    for m in messages:
        if type(m) is not dict or "role" not in m:
            return False
        content = m.get("content")
        if content is not None and type(content) is not str:
            return False
        calls = m.get("tool_calls")
        if calls and not (
            type(calls) is list
            and all(type(c) is dict and type(c.get("function", c)) is dict for c in calls)
        ):
            return False
    return True


def summarize_refs(
    project: str, trace_id: str, refs: Sequence[SpanRef], *, completed_at: float | None = None
) -> TraceSummary:
    """The trace's summary row. Matches ``Trace`` and ``trace_to_record``: the root is the
    earliest parentless span; input and output come from the root or the agent/chain spans
    nearest it, else from the first LLM call's input and the last one's output."""
    del project  # rows are keyed by project where they are written
    ordered = sorted(refs, key=_START_END)
    roots = [r for r in refs if not r.parent_span_id]
    root = min(roots, key=_START) if roots else None
    inp, out = request_io(
        ordered,
        [r.type for r in ordered],
        [r.input_preview for r in ordered],
        [r.output_preview for r in ordered],
        root,
    )
    start = min((r.start_time_unix_nano for r in refs), default=0)
    end = max((r.end_time_unix_nano for r in refs), default=0)
    service = root.service if root is not None and root.service else ""
    if not service:
        service = next((r.service for r in refs if r.service), "")
    return TraceSummary(
        trace_id=trace_id,
        service=service,
        root_name=root.name if root is not None else "",
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        duration_ms=max(0, end - start) / 1e6,
        span_count=len(refs),
        error=any(r.error for r in refs),
        session_id=next((r.session_id for r in refs if r.session_id), ""),
        user_id=next((r.user_id for r in ordered if r.user_id), ""),
        input_preview=inp or "",
        output_preview=out or "",
        completed_at=time.time() if completed_at is None else completed_at,
    )
