"""The Watch way in's data model: spans as received over OTLP, what a semantic-convention mapper
read from each, assembled traces and late feedback.

Everything here is plain data (no protobuf): the OTLP decoder at the server's edge builds
``Span`` objects, the mappers (``evalsi.traces``) fill ``Span.view``, the assembler groups spans
into ``Trace`` objects, and ``trace_to_record`` turns a trace into the ``Record`` every
evaluator sees. It lives in ``core`` because the store persists it and the server decodes into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from evalsi.core._content import JsonValue, ToolCall
from evalsi.core._record import Usage

SpanType = Literal[
    "llm", "tool", "agent", "retriever", "embedding", "chain", "guardrail", "generic"
]
"""The canonical step types; ``generic`` is a span no mapper recognised (kept with its raw
attributes, never dropped)."""

SPAN_TYPES: tuple[SpanType, ...] = get_args(SpanType)

STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
"""OTLP ``Status.code`` values."""

AttrValue = Any
"""A decoded OTLP ``AnyValue``: str, bool, int, float, bytes, a list of those, or a dict."""


@dataclass(slots=True)
class SpanEvent:
    """A timestamped event on a span (GenAI message events, exceptions, feedback)."""

    name: str
    time_unix_nano: int = 0
    attributes: dict[str, AttrValue] = field(default_factory=dict)


@dataclass(slots=True)
class SpanLink:
    """A link from a span to another span, maybe of another trace (OTLP ``Span.Link``): the
    requests a batch step served, the run an agent handed work over from."""

    trace_id: str
    span_id: str
    attributes: dict[str, AttrValue] = field(default_factory=dict)


@dataclass(slots=True)
class SpanView:
    """What a mapper read from one span, in canonical terms.

    ``input`` and ``output`` are ``None`` when the instrumentation did not capture content
    (content capture is opt-in in most GenAI instrumentations); they hold text, or a list of
    chat messages as JSON objects (``{"role", "content", "tool_calls"?, ...}``).
    """

    type: SpanType
    # Which mapper read it and the convention version it follows: "otel-genai/1.37",
    # "openinference/0", "openllmetry/0", "mlflow/3", "generic".
    convention: str = "generic"
    # The model, tool, agent or retriever name.
    name: str = ""
    model: str = ""
    input: JsonValue = None
    output: JsonValue = None
    # Tool spans: the call made (name and parsed arguments), so tool metrics need not re-parse.
    tool_call: ToolCall | None = None
    # Retriever spans: the documents returned, in rank order.
    documents: list[str] = field(default_factory=list)
    usage: Usage | None = None
    session_id: str = ""
    user_id: str = ""


@dataclass(slots=True)
class Span:
    """One span as received. Ids are lower-case hex (32 and 16 digits); ``parent_span_id`` is
    empty on a root span. ``resource`` is shared by every span of one OTLP ``ResourceSpans``."""

    trace_id: str
    span_id: str
    parent_span_id: str = ""
    name: str = ""
    kind: int = 0  # OTLP SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, ...
    start_time_unix_nano: int = 0
    end_time_unix_nano: int = 0
    status_code: int = STATUS_UNSET
    status_message: str = ""
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    resource: dict[str, AttrValue] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    # Set by ``normalize`` at ingest (after redaction), before anything is stored.
    view: SpanView | None = None
    links: list[SpanLink] = field(default_factory=list)

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id

    @property
    def service(self) -> str:
        name = self.resource.get("service.name", "")
        return name if isinstance(name, str) else str(name)

    @property
    def error(self) -> bool:
        return self.status_code == STATUS_ERROR

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_time_unix_nano - self.start_time_unix_nano) / 1e6


@dataclass(slots=True)
class Feedback:
    """A late signal joined to a trace or a session: a thumbs up/down, a label, a score.

    ``value`` is +1 / -1 for thumbs, any number for a score, ``None`` for a bare label.
    """

    trace_id: str = ""
    session_id: str = ""
    name: str = "feedback"
    value: float | None = None
    label: str = ""
    comment: str = ""
    source: str = "api"  # api | span_event
    time_unix_nano: int = 0

    @property
    def negative(self) -> bool:
        return self.value is not None and self.value < 0


@dataclass(slots=True)
class Trace:
    """The spans of one trace id in one project, as assembled (root span ended + grace)."""

    trace_id: str
    project: str = "default"
    spans: list[Span] = field(default_factory=list)
    feedback: list[Feedback] = field(default_factory=list)

    @property
    def root(self) -> Span | None:
        """The span without a parent (the earliest, when several claim to be roots)."""
        roots = [s for s in self.spans if s.is_root]
        return min(roots, key=lambda s: s.start_time_unix_nano) if roots else None

    @property
    def service(self) -> str:
        root = self.root
        if root is not None and root.service:
            return root.service
        return next((s.service for s in self.spans if s.service), "")

    @property
    def error(self) -> bool:
        return any(s.error for s in self.spans)

    @property
    def start_time_unix_nano(self) -> int:
        return min((s.start_time_unix_nano for s in self.spans), default=0)

    @property
    def end_time_unix_nano(self) -> int:
        return max((s.end_time_unix_nano for s in self.spans), default=0)

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_time_unix_nano - self.start_time_unix_nano) / 1e6

    @property
    def session_id(self) -> str:
        return next((s.view.session_id for s in self.spans if s.view and s.view.session_id), "")

    def ordered(self) -> list[Span]:
        """Spans by start time (ties: by end time), the order a trajectory lists its steps."""
        return sorted(self.spans, key=lambda s: (s.start_time_unix_nano, s.end_time_unix_nano))
