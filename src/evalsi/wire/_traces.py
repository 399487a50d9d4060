"""Spans, traces, sessions and feedback to and from the TraceService messages (``trace.proto``).

Span attributes are OTLP values: bytes and 64-bit integers do not fit JSON (``Struct``), so
bytes travel as base64 strings and integers beyond 2**53 as decimal strings; the other
direction reads them as those strings.
"""

from __future__ import annotations

import base64
import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import timestamp_pb2

from evalsi._proto.evalsi.v1alpha1 import trace_pb2
from evalsi.core import (
    SPAN_TYPES,
    Feedback,
    JsonValue,
    Outcome,
    Score,
    SessionSummary,
    Span,
    SpanEvent,
    SpanLink,
    SpanView,
    Trace,
    TraceScore,
    TraceSummary,
)
from evalsi.wire._json import (
    _EXACT_INT_LIMIT,
    NS,
    _fields,
    _seconds_of,
    _set_seconds,
    _set_struct,
    _set_value,
    struct_from_proto,
    value_from_proto,
)
from evalsi.wire._records import (
    _set_tool_call,
    _set_usage,
    _tool_call_from_proto,
    _usage_from_proto,
)
from evalsi.wire._results import result_from_proto, result_to_proto


@dataclass(slots=True)
class StoredTrace:
    """A trace as GetTrace returns it: the spans and feedback, the summary row once the
    assembler wrote it (``summary.record`` is the Record evaluators saw), and what online
    policies gave it (``summary.scores`` holds the same scores, flattened)."""

    trace: Trace
    summary: TraceSummary | None = None
    scores: list[TraceScore] = field(default_factory=list)


# -- times ----------------------------------------------------------------------------------------
def set_ns(out: timestamp_pb2.Timestamp, ns: int) -> None:
    out.seconds, out.nanos = divmod(int(ns), NS)


def ns_of(message: timestamp_pb2.Timestamp) -> int:
    return int(message.seconds) * NS + int(message.nanos)


def _opt_ns(message: Any, name: str) -> int | None:
    return ns_of(getattr(message, name)) if message.HasField(name) else None


# -- attributes -----------------------------------------------------------------------------------
def attr_json(value: Any) -> JsonValue:
    """An OTLP attribute value as JSON (bytes as base64, huge integers as strings)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value) if abs(int(value)) <= _EXACT_INT_LIMIT else str(int(value))
    if isinstance(value, Mapping):
        return {str(k): attr_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [attr_json(v) for v in value]
    return str(value)


def _set_attrs(out: Any, attrs: Mapping[str, Any]) -> None:
    if attrs:
        _set_struct(out, {str(k): attr_json(v) for k, v in attrs.items()})


# -- spans ----------------------------------------------------------------------------------------
_SPAN = (
    "trace_id", "span_id", "parent_span_id", "name", "kind", "status_code", "status_message",
    "scope_name", "scope_version",
)  # fmt: skip
_VIEW = ("convention", "name", "model", "session_id", "user_id")
_SUMMARY = (
    "trace_id", "service", "root_name", "duration_ms", "span_count", "error", "session_id",
    "user_id", "input_preview", "output_preview",
)  # fmt: skip
_SESSION = ("session_id", "trace_count", "error_count", "user_id")
_FEEDBACK = ("trace_id", "session_id", "name", "label", "comment", "source")


def span_to_proto(span: Span) -> trace_pb2.Span:
    out = trace_pb2.Span(
        **_fields(span, _SPAN),
        type=span.view.type if span.view is not None else "generic",
        service=span.service,
        duration_ms=span.duration_ms,
    )
    set_ns(out.start_time, span.start_time_unix_nano)
    set_ns(out.end_time, span.end_time_unix_nano)
    _set_attrs(out.attributes, span.attributes)
    _set_attrs(out.resource, span.resource)
    for event in span.events:
        e = out.events.add(name=event.name)
        set_ns(e.time, event.time_unix_nano)
        _set_attrs(e.attributes, event.attributes)
    for link in span.links:
        k = out.links.add(trace_id=link.trace_id, span_id=link.span_id)
        _set_attrs(k.attributes, link.attributes)
    if span.view is not None:
        _set_view(out.view, span.view)
    return out


def _set_view(out: trace_pb2.SpanView, view: SpanView) -> None:
    out.SetInParent()
    out.type = view.type
    for name, value in _fields(view, _VIEW).items():
        setattr(out, name, value)
    if view.input is not None:
        _set_value(out.input, attr_json(view.input))
    if view.output is not None:
        _set_value(out.output, attr_json(view.output))
    if view.tool_call is not None:
        _set_tool_call(out.tool_call, view.tool_call)
    out.documents.extend(view.documents)
    if view.usage is not None:
        _set_usage(out.usage, view.usage)


def _view_from_proto(v: trace_pb2.SpanView) -> SpanView:
    return SpanView(
        **_fields(v, _VIEW),
        type=v.type if v.type in SPAN_TYPES else "generic",
        input=value_from_proto(v.input) if v.HasField("input") else None,
        output=value_from_proto(v.output) if v.HasField("output") else None,
        tool_call=_tool_call_from_proto(v.tool_call) if v.HasField("tool_call") else None,
        documents=[str(d) for d in v.documents],
        usage=_usage_from_proto(v.usage) if v.HasField("usage") else None,
    )


def span_from_proto(message: trace_pb2.Span) -> Span:
    return Span(
        **_fields(message, _SPAN),
        start_time_unix_nano=ns_of(message.start_time),
        end_time_unix_nano=ns_of(message.end_time),
        attributes=struct_from_proto(message.attributes),
        events=[
            SpanEvent(str(e.name), ns_of(e.time), struct_from_proto(e.attributes))
            for e in message.events
        ],
        resource=struct_from_proto(message.resource),
        view=_view_from_proto(message.view) if message.HasField("view") else None,
        links=[
            SpanLink(str(k.trace_id), str(k.span_id), struct_from_proto(k.attributes))
            for k in message.links
        ],
    )


# -- traces ---------------------------------------------------------------------------------------
def trace_score_to_proto(score: TraceScore) -> trace_pb2.TraceScore:
    out = trace_pb2.TraceScore(policy=score.policy, run_id=score.run_id)
    out.result.CopyFrom(result_to_proto(score.result))
    out.result.ClearField("duration")  # not kept for online results
    return out


def trace_score_from_proto(message: trace_pb2.TraceScore) -> TraceScore:
    return TraceScore(str(message.policy), str(message.run_id), result_from_proto(message.result))


def flat_scores(scores: Sequence[TraceScore]) -> list[Score]:
    """The scores of the SCORED results, each tagged with ``metadata`` ``policy``,
    ``evaluator`` and ``run_id`` (``TraceSummary.scores`` on the client side)."""
    out: list[Score] = []
    for s in scores:
        if s.result.outcome is not Outcome.SCORED:
            continue
        for score in s.result.scores:
            tags = {"policy": s.policy, "evaluator": s.result.evaluator, "run_id": s.run_id}
            out.append(dataclasses.replace(score, metadata={**score.metadata, **tags}))
    return out


def trace_summary_to_proto(
    summary: TraceSummary, scores: Sequence[TraceScore] = ()
) -> trace_pb2.TraceSummary:
    """The summary message; ``scores`` are the policy results read for it
    (``store.trace_scores``)."""
    s = summary
    out = trace_pb2.TraceSummary(**_fields(s, _SUMMARY))
    set_ns(out.start_time, s.start_time_unix_nano)
    set_ns(out.end_time, s.end_time_unix_nano)
    _set_seconds(out.complete_time, s.completed_at)
    out.scores.extend(trace_score_to_proto(score) for score in scores)
    return out


def trace_summary_from_proto(
    message: trace_pb2.TraceSummary, record: dict[str, Any] | None = None
) -> TraceSummary:
    m = message
    return TraceSummary(
        **_fields(m, _SUMMARY),
        start_time_unix_nano=ns_of(m.start_time),
        end_time_unix_nano=ns_of(m.end_time),
        record=record,
        completed_at=_seconds_of(m.complete_time),
        scores=flat_scores([trace_score_from_proto(s) for s in m.scores]),
    )


def trace_to_proto(
    trace: Trace, summary: TraceSummary | None = None, scores: Sequence[TraceScore] = ()
) -> trace_pb2.Trace:
    out = trace_pb2.Trace(trace_id=trace.trace_id)
    out.spans.extend(span_to_proto(s) for s in trace.spans)
    out.feedback.extend(feedback_to_proto(f) for f in trace.feedback)
    if summary is not None:
        out.summary.CopyFrom(trace_summary_to_proto(summary, scores))
        if summary.record is not None:
            _set_struct(out.record, {str(k): attr_json(v) for k, v in summary.record.items()})
    return out


def trace_from_proto(message: trace_pb2.Trace, project: str = "default") -> StoredTrace:
    trace = Trace(
        trace_id=str(message.trace_id),
        project=project,
        spans=[span_from_proto(s) for s in message.spans],
        feedback=[feedback_from_proto(f) for f in message.feedback],
    )
    summary = None
    scores: list[TraceScore] = []
    if message.HasField("summary"):
        record = struct_from_proto(message.record) if message.HasField("record") else None
        summary = trace_summary_from_proto(message.summary, record)
        scores = [trace_score_from_proto(s) for s in message.summary.scores]
    return StoredTrace(trace, summary, scores)


# -- feedback and sessions ------------------------------------------------------------------------
def feedback_to_proto(feedback: Feedback) -> trace_pb2.Feedback:
    out = trace_pb2.Feedback(**_fields(feedback, _FEEDBACK))
    if feedback.value is not None:
        out.value = feedback.value
    if feedback.time_unix_nano:
        set_ns(out.time, feedback.time_unix_nano)
    return out


def feedback_from_proto(message: trace_pb2.Feedback) -> Feedback:
    m = message
    return Feedback(
        **(_fields(m, _FEEDBACK) | {"source": m.source or "api"}),
        value=float(m.value) if m.HasField("value") else None,
        time_unix_nano=_opt_ns(m, "time") or 0,
    )


def session_to_proto(session: SessionSummary) -> trace_pb2.Session:
    out = trace_pb2.Session(**_fields(session, _SESSION))
    set_ns(out.first_start_time, session.first_start_unix_nano)
    set_ns(out.last_end_time, session.last_end_unix_nano)
    return out


def session_from_proto(message: trace_pb2.Session) -> SessionSummary:
    return SessionSummary(
        **_fields(message, _SESSION),
        first_start_unix_nano=ns_of(message.first_start_time),
        last_end_unix_nano=ns_of(message.last_end_time),
    )
