"""From an assembled trace to the ``Record`` every evaluator sees.

The record's input and output are what the user sent and got: the root span's (or the
outermost agent/chain span's), falling back to the first LLM call's input and the last LLM
call's output. The trajectory lists every span as a typed step, in start order; retrieved
documents become the context; token usage is summed over LLM calls.
"""

from __future__ import annotations

from typing import Any, Final

from evalsi.core import (
    Content,
    JsonValue,
    Provenance,
    Record,
    Span,
    SpanType,
    SpanView,
    Step,
    StepKind,
    Trace,
    Trajectory,
    Usage,
    message_from_dict,
)
from evalsi.traces._mappers import normalize

_STEP_KINDS: Final[dict[SpanType, StepKind]] = {
    "llm": "llm_call",
    "tool": "tool_call",
    "retriever": "retrieval",
    "agent": "agent",
    "embedding": "embedding",
    "chain": "chain",
    "guardrail": "guardrail",
    "generic": "other",
}


def view_of(span: Span) -> SpanView:
    """The span's view, computed (and kept) when ingest has not set it yet."""
    if span.view is None:
        span.view = normalize(span)
    return span.view


def trace_to_record(trace: Trace) -> Record:
    """The record of one trace: id = trace id, provenance source ``trace``.

    Example:
        >>> from evalsi.core import Span, Trace
        >>> root = Span("a" * 32, "b" * 16, name="agent", attributes={
        ...     "openinference.span.kind": "AGENT", "input.value": "2+2?", "output.value": "4"})
        >>> r = trace_to_record(Trace("a" * 32, spans=[root]))
        >>> (r.input.text, r.output.text, r.trajectory.steps[0].kind)
        ('2+2?', '4', 'agent')
    """
    spans = trace.ordered()
    views = [view_of(s) for s in spans]
    root = trace.root
    depth = _depths(spans)

    # The outermost typed spans that speak for the whole request: the root, then agents and
    # chains nearest the root.
    speakers = sorted(
        (
            (depth.get(s.span_id, 0), i)
            for i, (s, v) in enumerate(zip(spans, views, strict=True))
            if s is root or v.type in ("agent", "chain")
        ),
    )
    llm = [v for v in views if v.type == "llm"]
    inp = _first(views[i].input for _, i in speakers)
    if inp is None:
        inp = _first(v.input for v in llm)
    out = _first(views[i].output for _, i in speakers)
    if out is None:
        out = _first(v.output for v in reversed(llm))

    metadata: dict[str, Any] = {
        "session_id": trace.session_id,
        "user_id": next((v.user_id for v in views if v.user_id), ""),
        "service": trace.service,
        "project": trace.project,
        "trace_error": trace.error,
        "content_captured": any(v.input is not None or v.output is not None for v in views),
        "feedback_negative": any(f.negative for f in trace.feedback),
        "feedback": [{"name": f.name, "value": f.value, "label": f.label} for f in trace.feedback],
    }
    return Record(
        id=trace.trace_id,
        input=to_content(inp),
        output=to_content(out),
        context=[Content.of_text(d) for v in views if v.type == "retriever" for d in v.documents],
        trajectory=Trajectory([_step(s, v) for s, v in zip(spans, views, strict=True)]),
        usage=_usage(spans, views, depth, trace.duration_ms),
        metadata=metadata,
        provenance=Provenance(
            source="trace", trace_id=trace.trace_id, span_id=root.span_id if root else ""
        ),
    )


def to_content(value: JsonValue) -> Content | None:
    """Text stays text; a list of chat messages (bare or as ``{"messages": [...]}``) becomes
    messages; anything else is JSON."""
    if value is None:
        return None
    if type(value) is str:
        return Content.of_text(value)
    messages = value
    if isinstance(value, dict) and len(value) == 1:
        messages = value.get("messages")  # {"messages": [...]}: a chat agent's request or answer
    if _is_messages(messages):
        try:
            return Content.of_messages([message_from_dict(m) for m in messages])
        except (TypeError, ValueError, KeyError, AttributeError):
            pass  # not messages after all (odd tool_calls): keep the data as JSON
    return Content.of_json(value)


def _is_messages(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and "role" in m for m in value)
    )


def _step(span: Span, v: SpanView) -> Step:
    return Step(
        kind=_STEP_KINDS[v.type],
        name=v.name,
        input=v.input,
        output=v.output,
        tool_call=v.tool_call,
        usage=v.usage,
        error=(span.status_message or "error") if span.error else "",
        start_time_unix_nano=span.start_time_unix_nano,
        end_time_unix_nano=span.end_time_unix_nano,
        span_id=span.span_id,
    )


def _usage(
    spans: list[Span], views: list[SpanView], depth: dict[str, int], latency_ms: float
) -> Usage:
    """Tokens summed over LLM calls; an LLM span inside another one that already counted
    (a framework's model span wrapping the provider SDK's) is not counted twice."""
    counted: set[str] = set()
    parent = {s.span_id: s.parent_span_id for s in spans}
    total = Usage(latency_ms=latency_ms if spans else None)
    llm = [
        (s, v.usage)
        for s, v in zip(spans, views, strict=True)
        if v.type == "llm" and v.usage is not None
    ]
    # Outer spans first, so an inner span sees whether an ancestor was already counted.
    llm.sort(key=lambda sv: depth.get(sv[0].span_id, 0))
    for span, u in llm:
        if _has_counted_ancestor(span.parent_span_id, parent, counted):
            continue
        counted.add(span.span_id)
        total.input_tokens = _add(total.input_tokens, u.input_tokens)
        total.output_tokens = _add(total.output_tokens, u.output_tokens)
        total.total_tokens = _add(total.total_tokens, u.tokens())
        if u.cost_usd is not None:
            total.cost_usd = (total.cost_usd or 0.0) + u.cost_usd
    return total


def _has_counted_ancestor(span_id: str, parent: dict[str, str], counted: set[str]) -> bool:
    seen = 0
    while span_id and seen < len(parent):  # bounded: a parent cycle in bad data ends here
        if span_id in counted:
            return True
        span_id = parent.get(span_id, "")
        seen += 1
    return False


def _add(a: int | None, b: int | None) -> int | None:
    if b is None:
        return a
    return b if a is None else a + b


def _depths(spans: list[Span]) -> dict[str, int]:
    """How far each span sits below its trace's root (spans whose parent is missing: 0)."""
    parent = {s.span_id: s.parent_span_id for s in spans}
    depth: dict[str, int] = {}
    for s in spans:
        d, cur = 0, s.parent_span_id
        while cur in parent and d < len(parent):
            d += 1
            cur = parent[cur]
        depth[s.span_id] = d
    return depth


def _first(values: Any) -> JsonValue:
    return next((v for v in values if v is not None), None)
