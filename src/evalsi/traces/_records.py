"""From an assembled trace to the ``Record`` every evaluator sees.

The record's input and output are what the user sent and got: the root span's (or the
outermost agent/chain span's), falling back to the first LLM call's input and the last LLM
call's output. The trajectory lists every span as a typed step, in start order; retrieved
documents become the context; token usage is summed over LLM calls.

A trace of an evalsi run's task (``evalsi.step.kind`` on its spans: ``runs._telemetry``) gives
back the trajectory the run recorded: the task span is the trajectory (its stop reason), not
a step; each other span is a step of the kind it names, in its trajectory's order
(``evalsi.step.index``: parallel tool calls may start in the same nanosecond).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol, TypeVar, get_args

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
from evalsi.datasets import record_to_row
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
_KINDS: Final = frozenset(get_args(StepKind))
_KIND: Final = "evalsi.step.kind"  # runs._telemetry writes it, _mappers._evalsi reads it
_TASK: Final = "task"


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
    depth = depths(spans)

    inp, out = request_io(
        spans, [v.type for v in views], [v.input for v in views], [v.output for v in views], root
    )

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
        trajectory=_trajectory(spans, views),
        usage=_usage(spans, views, depth, trace.duration_ms),
        metadata=metadata,
        provenance=Provenance(
            source="trace", trace_id=trace.trace_id, span_id=root.span_id if root else ""
        ),
    )


def record_row(trace: Trace) -> dict[str, Any]:
    """The record evaluators see for this trace, as a dataset row: built from the stored
    spans when read (trace rows do not store it; summaries keep previews only)."""
    return record_to_row(trace_to_record(trace))


T = TypeVar("T")


def request_io(
    spans: Sequence[Linked],
    types: Sequence[str],
    inputs: Sequence[T | None],
    outputs: Sequence[T | None],
    root: object,
) -> tuple[T | None, T | None]:
    """What went into and came out of the whole request: the outermost typed spans that speak
    for it (the root, then agents and chains nearest the root), else the first LLM call's
    input and the last one's output. ``spans`` in start order, the others beside them."""
    speakers = [i for i, s in enumerate(spans) if s is root or types[i] in ("agent", "chain")]
    if len(speakers) > 1:  # nearest the root first (the depths are only needed then)
        depth = depths(spans)
        speakers.sort(key=lambda i: depth.get(spans[i].span_id, 0))
    llm = [i for i, t in enumerate(types) if t == "llm"]
    inp = _first(inputs[i] for i in speakers)
    if inp is None:
        inp = _first(inputs[i] for i in llm)
    out = _first(outputs[i] for i in speakers)
    if out is None:
        out = _first(outputs[i] for i in reversed(llm))
    return inp, out


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


def _trajectory(spans: list[Span], views: list[SpanView]) -> Trajectory:
    """Every span as a step in start order; an evalsi task's in its own (see the top)."""
    stop, task = "", False
    steps: list[tuple[Span, SpanView]] = []
    for span, view in zip(spans, views, strict=True):
        if span.attributes.get(_KIND) == _TASK:
            task = True
            reason = span.attributes.get("evalsi.stop_reason")
            stop = reason if type(reason) is str else stop
        else:
            steps.append((span, view))
    if task and all(type(s.attributes.get("evalsi.step.index")) is int for s, _ in steps):
        steps.sort(key=lambda sv: sv[0].attributes["evalsi.step.index"])
    return Trajectory([_step(s, v) for s, v in steps], stop_reason=stop)


def _step(span: Span, v: SpanView) -> Step:
    named = span.attributes.get(_KIND)
    return Step(
        kind=named if named in _KINDS else _STEP_KINDS[v.type],  # type: ignore[arg-type]
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
    # covered[x]: x or one of its ancestors was counted. Spans are taken outermost first, so
    # a node's entry is settled before any span below it is counted (each chain walked once).
    covered: dict[str, bool] = {}
    for span, u in llm:
        if _covered(span.parent_span_id, parent, counted, covered):
            continue
        counted.add(span.span_id)
        total.input_tokens = _add(total.input_tokens, u.input_tokens)
        total.output_tokens = _add(total.output_tokens, u.output_tokens)
        total.total_tokens = _add(total.total_tokens, u.tokens())
        if u.cost_usd is not None:
            total.cost_usd = (total.cost_usd or 0.0) + u.cost_usd
    return total


def _covered(
    span_id: str, parent: dict[str, str], counted: set[str], memo: dict[str, bool]
) -> bool:
    """Whether ``span_id`` or an ancestor of it was counted (memoised; cycle-safe)."""
    path: list[str] = []
    cur, answer = span_id, False
    while cur:
        if cur in memo:
            answer = memo[cur]
            break
        if cur in counted:
            answer = True
            break
        if len(path) > len(parent):  # a parent cycle in bad data ends here
            break
        path.append(cur)
        cur = parent.get(cur, "")
    for node in path:
        memo[node] = answer
    return answer


def _add(a: int | None, b: int | None) -> int | None:
    if b is None:
        return a
    return b if a is None else a + b


class Linked(Protocol):
    """A span or a ``SpanRef``: what depth needs of it."""

    @property
    def span_id(self) -> str: ...
    @property
    def parent_span_id(self) -> str: ...


def depths(spans: Sequence[Linked]) -> dict[str, int]:
    """How far each span sits below its trace's root (spans whose parent is missing: 0).
    Each chain is walked once (memoised), so a deep trace costs linear time; spans on a
    parent cycle get the length of the walk that found it."""
    parent = {s.span_id: s.parent_span_id for s in spans}
    depth: dict[str, int] = {}
    for s in spans:
        path: dict[str, None] = {}  # in walk order
        cur = s.span_id
        while cur in parent and cur not in depth and cur not in path:
            path[cur] = None
            cur = parent[cur]
        base = depth[cur] + 1 if cur in depth else 0
        for i, node in enumerate(reversed(path)):
            depth[node] = base + i
    return depth


def _first(values: Iterable[T | None]) -> T | None:
    return next((v for v in values if v is not None), None)
