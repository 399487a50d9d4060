"""A deterministic stream of pre-encoded OTLP ``ExportTraceServiceRequest`` bytes for the ingest
benchmark: agent traces as a GenAI app would export them.

Each trace is an agent turn: an ``invoke_agent`` root span, then 1-3 rounds of an LLM call
(OTel GenAI attributes with ``gen_ai.input.messages``/``gen_ai.output.messages`` content of a
few hundred bytes) followed by a tool call, one retriever span with OpenInference attributes
(``openinference.span.kind: RETRIEVER``, three documents) and a final LLM answer: 5, 7 or 9
spans, about twelve attributes each. Spans are listed in the order a batch exporter sends them
(by end time, so the root comes last) and packed ``spans_per_request`` to a request; one
request holds one resource (``service.name``) and one instrumentation scope, and a trace may
straddle two requests, as with the SDK's ``BatchSpanProcessor``.

Everything is drawn from ``random.Random(seed)``, so two builds give the same bytes (ids,
timestamps and content included). ``LiveTraces`` builds single traces on the fly, stamped with
the current time, for the online freshness measurement.
"""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

BASE_TIME_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z: fixed, so builds are repeatable
TRACE_GAP_NS = 50_000_000  # a new agent turn every 50 ms of (synthetic) time
SCOPE = ("evalsi.bench.agent", "1.0.0")
MODELS = ("gpt-4o-mini", "claude-sonnet-4", "llama-3.1-70b-instruct")
TOOLS = (
    ("get_order", "Look up an order by its id"),
    ("refund_order", "Refund an order in full or in part"),
    ("search_kb", "Search the help-centre articles"),
    ("update_address", "Change the delivery address of an open order"),
)
_WORD_TEXT = (
    "order shipping refund customer address package delivery warehouse tracking invoice "
    "payment card account support agent policy return window days replacement damaged item "
    "courier label status pending confirmed cancelled priority express standard receipt"
)
WORDS = tuple(_WORD_TEXT.split())

KIND_INTERNAL, KIND_SERVER, KIND_CLIENT = 1, 2, 3


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """What to build: ``spans`` in total, ``spans_per_request`` per export request."""

    spans: int = 400_000
    spans_per_request: int = 512
    services: tuple[str, ...] = ("support-agent",)
    seed: int = 7
    content_bytes: int = 300  # about how long each message text is

    def __post_init__(self) -> None:
        if self.spans < 1 or self.spans_per_request < 1:
            raise ValueError("spans and spans_per_request must be positive")
        if not self.services:
            raise ValueError("at least one service name is needed")


@dataclass(slots=True)
class Stream:
    """The encoded requests, with the span count of each (the last one may be short)."""

    spec: StreamSpec
    requests: list[bytes] = field(default_factory=list)
    span_counts: list[int] = field(default_factory=list)
    traces: int = 0
    build_seconds: float = 0.0

    @property
    def spans(self) -> int:
        return sum(self.span_counts)

    @property
    def nbytes(self) -> int:
        return sum(len(r) for r in self.requests)


# -- attribute helpers ---------------------------------------------------------------------------
def _put(span: Span, key: str, value: str | int | float | bool | list[str]) -> None:
    kv: KeyValue = span.attributes.add()
    kv.key = key
    if isinstance(value, bool):
        kv.value.bool_value = value
    elif isinstance(value, int):
        kv.value.int_value = value
    elif isinstance(value, float):
        kv.value.double_value = value
    elif isinstance(value, list):
        for item in value:
            kv.value.array_value.values.add().string_value = item
    else:
        kv.value.string_value = value


def _text(rng: random.Random, nbytes: int) -> str:
    words: list[str] = []
    size = 0
    while size < nbytes:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words).capitalize() + "."


def _messages(*items: tuple[str, str]) -> str:
    return json.dumps(
        [{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in items],
        separators=(",", ":"),
    )


# -- one trace -----------------------------------------------------------------------------------
class _TraceBuilder:
    """Builds the spans of one agent turn from a seeded generator."""

    def __init__(self, rng: random.Random, content_bytes: int) -> None:
        self.rng = rng
        self.content_bytes = content_bytes

    def _span(self, trace_id: bytes, parent: bytes, name: str, kind: int) -> Span:
        span = Span(trace_id=trace_id, span_id=self.rng.getrandbits(64).to_bytes(8, "big"))
        span.parent_span_id = parent
        span.name = name
        span.kind = kind  # type: ignore[assignment]
        return span

    def trace(self, start_ns: int) -> list[Span]:
        """One turn's spans, children first (end-time order), the root last."""
        rng = self.rng
        n = self.content_bytes
        trace_id = rng.getrandbits(128).to_bytes(16, "big")
        conversation = f"conv-{rng.getrandbits(40):010x}"
        model = rng.choice(MODELS)
        question = _text(rng, n // 2)
        root = self._span(trace_id, b"", "invoke_agent support-agent", KIND_SERVER)
        spans: list[Span] = []
        t = start_ns + 1_000_000
        tokens_in = tokens_out = 0
        rounds = rng.choice((1, 2, 3))
        for i in range(rounds):
            tool, description = rng.choice(TOOLS)
            call_id = f"call_{rng.getrandbits(48):012x}"
            t, used = self._llm(spans, root, model, conversation, t, question, tool, call_id)
            tokens_in += used[0]
            tokens_out += used[1]
            t = self._tool(spans, root, tool, description, call_id, conversation, t, i)
            if i == 0:
                t = self._retriever(spans, root, question, conversation, t)
        answer = _text(rng, n)
        t, used = self._llm(spans, root, model, conversation, t, question, "", "", answer)
        tokens_in += used[0]
        tokens_out += used[1]
        root.start_time_unix_nano = start_ns
        root.end_time_unix_nano = t + 500_000
        _put(root, "gen_ai.operation.name", "invoke_agent")
        _put(root, "gen_ai.agent.name", "support-agent")
        _put(root, "gen_ai.agent.id", "agent-7f3a")
        _put(root, "gen_ai.provider.name", "openai")
        _put(root, "gen_ai.request.model", model)
        _put(root, "gen_ai.conversation.id", conversation)
        _put(root, "gen_ai.input.messages", _messages(("user", question)))
        _put(root, "gen_ai.output.messages", _messages(("assistant", answer)))
        _put(root, "gen_ai.usage.input_tokens", tokens_in)
        _put(root, "gen_ai.usage.output_tokens", tokens_out)
        _put(root, "user.id", f"user-{rng.randrange(5000)}")
        _put(root, "http.route", "/v1/chat")
        root.status.code = Status.STATUS_CODE_OK
        spans.append(root)
        return spans

    def _llm(
        self,
        spans: list[Span],
        root: Span,
        model: str,
        conversation: str,
        t: int,
        question: str,
        tool: str,
        call_id: str,
        answer: str = "",
    ) -> tuple[int, tuple[int, int]]:
        rng = self.rng
        span = self._span(root.trace_id, root.span_id, f"chat {model}", KIND_CLIENT)
        duration = rng.randrange(300, 2500) * 1_000_000
        span.start_time_unix_nano = t
        span.end_time_unix_nano = t + duration
        used = (rng.randrange(200, 4000), rng.randrange(20, 600))
        system = "You are a support agent for an online shop. Be brief and cite the order."
        _put(span, "gen_ai.operation.name", "chat")
        _put(span, "gen_ai.provider.name", "openai")
        _put(span, "gen_ai.request.model", model)
        _put(span, "gen_ai.response.model", model)
        _put(span, "gen_ai.response.id", f"chatcmpl-{rng.getrandbits(64):016x}")
        _put(span, "gen_ai.request.temperature", 0.2)
        _put(span, "gen_ai.request.max_tokens", 1024)
        _put(span, "gen_ai.usage.input_tokens", used[0])
        _put(span, "gen_ai.usage.output_tokens", used[1])
        _put(span, "gen_ai.conversation.id", conversation)
        _put(span, "gen_ai.input.messages", _messages(("system", system), ("user", question)))
        if tool:
            out = json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": call_id,
                                "name": tool,
                                "arguments": {"order_id": f"A{rng.randrange(10**6):06d}"},
                            }
                        ],
                    }
                ],
                separators=(",", ":"),
            )
            _put(span, "gen_ai.response.finish_reasons", ["tool_calls"])
        else:
            out = _messages(("assistant", answer))
            _put(span, "gen_ai.response.finish_reasons", ["stop"])
        _put(span, "gen_ai.output.messages", out)
        spans.append(span)
        return t + duration + 200_000, used

    def _tool(
        self,
        spans: list[Span],
        root: Span,
        tool: str,
        description: str,
        call_id: str,
        conversation: str,
        t: int,
        i: int,
    ) -> int:
        rng = self.rng
        span = self._span(root.trace_id, root.span_id, f"execute_tool {tool}", KIND_INTERNAL)
        duration = rng.randrange(5, 400) * 1_000_000
        span.start_time_unix_nano = t
        span.end_time_unix_nano = t + duration
        failed = rng.random() < 0.05
        result = {"ok": not failed, "order": f"A{rng.randrange(10**6):06d}", "step": i}
        _put(span, "gen_ai.operation.name", "execute_tool")
        _put(span, "gen_ai.tool.name", tool)
        _put(span, "gen_ai.tool.description", description)
        _put(span, "gen_ai.tool.type", "function")
        _put(span, "gen_ai.tool.call.id", call_id)
        _put(span, "gen_ai.tool.call.arguments", json.dumps({"order_id": result["order"]}))
        _put(span, "gen_ai.tool.call.result", json.dumps(result))
        _put(span, "gen_ai.conversation.id", conversation)
        _put(span, "code.function.name", f"tools.{tool}")
        _put(span, "retry.count", 0)
        _put(span, "cache.hit", rng.random() < 0.3)
        _put(span, "server.address", "orders.internal")
        if failed:
            span.status.code = Status.STATUS_CODE_ERROR
            span.status.message = "upstream timed out"
            event = span.events.add()
            event.name = "exception"
            event.time_unix_nano = t + duration
            kv = event.attributes.add()
            kv.key = "exception.type"
            kv.value.string_value = "TimeoutError"
        spans.append(span)
        return t + duration + 100_000

    def _retriever(
        self, spans: list[Span], root: Span, question: str, conversation: str, t: int
    ) -> int:
        rng = self.rng
        span = self._span(root.trace_id, root.span_id, "retrieve help_articles", KIND_CLIENT)
        duration = rng.randrange(10, 120) * 1_000_000
        span.start_time_unix_nano = t
        span.end_time_unix_nano = t + duration
        _put(span, "openinference.span.kind", "RETRIEVER")
        _put(span, "input.value", question)
        _put(span, "input.mime_type", "text/plain")
        _put(span, "session.id", conversation)
        for d in range(3):
            prefix = f"retrieval.documents.{d}.document"
            _put(span, f"{prefix}.id", f"kb-{rng.randrange(10**5)}")
            _put(span, f"{prefix}.content", _text(rng, self.content_bytes // 3))
            _put(span, f"{prefix}.score", round(1.0 - d * 0.1 - rng.random() * 0.05, 4))
        spans.append(span)
        return t + duration + 100_000


# -- the stream ----------------------------------------------------------------------------------
def _request(service: str, spans: list[Span]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    rs: ResourceSpans = request.resource_spans.add()
    for key, value in (
        ("service.name", service),
        ("service.version", "2.4.1"),
        ("deployment.environment.name", "bench"),
        ("telemetry.sdk.name", "opentelemetry"),
        ("telemetry.sdk.language", "python"),
    ):
        kv = rs.resource.attributes.add()
        kv.key = key
        kv.value.string_value = value
    ss: ScopeSpans = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = SCOPE
    ss.spans.extend(spans)
    return request


def iter_requests(spec: StreamSpec) -> Iterator[tuple[bytes, int, int]]:
    """``(encoded request, spans in it, traces started in it)`` until ``spec.spans`` are sent.

    Request ``k`` belongs to service ``k % len(services)``; each service has its own seeded
    generator, so a trace that straddles two requests stays within one service.
    """
    builders = [
        _TraceBuilder(random.Random(f"{spec.seed}:{i}"), spec.content_bytes)
        for i in range(len(spec.services))
    ]
    pending: list[list[Span]] = [[] for _ in spec.services]
    clocks = [BASE_TIME_NS + i * 7_000_000 for i in range(len(spec.services))]
    sent = k = 0
    while sent < spec.spans:
        s = k % len(spec.services)
        want = min(spec.spans_per_request, spec.spans - sent)
        traces = 0
        while len(pending[s]) < want:
            pending[s].extend(builders[s].trace(clocks[s]))
            clocks[s] += TRACE_GAP_NS
            traces += 1
        chunk, pending[s] = pending[s][:want], pending[s][want:]
        yield _request(spec.services[s], chunk).SerializeToString(), want, traces
        sent += want
        k += 1


def build_stream(spec: StreamSpec) -> Stream:
    """Every request of ``spec``, encoded, in memory."""
    started = time.perf_counter()
    stream = Stream(spec)
    for body, n, traces in iter_requests(spec):
        stream.requests.append(body)
        stream.span_counts.append(n)
        stream.traces += traces
    stream.build_seconds = time.perf_counter() - started
    return stream


# -- OTLP/JSON -----------------------------------------------------------------------------------
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)


def to_otlp_json(body: bytes) -> bytes:
    """The OTLP/JSON form of an encoded request: ids as hex (the OTLP spec), not base64 (what
    protobuf's JSON mapping would give), enum values as integers."""
    from google.protobuf import json_format

    request = ExportTraceServiceRequest.FromString(body)
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    _hex_ids(doc)
    return json.dumps(doc, separators=(",", ":")).encode()


# -- live traces (freshness) ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LiveTrace:
    """One trace encoded as one request whose root span ended at ``root_end_ns``."""

    body: bytes
    trace_id: str
    root_end_ns: int
    spans: int


class LiveTraces:
    """Agent traces built on demand and shifted so the root span ends "now" (wall clock)."""

    def __init__(self, service: str = "support-agent", seed: int = 11, content_bytes: int = 300):
        self.service = service
        self.builder = _TraceBuilder(random.Random(seed), content_bytes)

    def next(self, now_ns: int | None = None) -> LiveTrace:
        now = time.time_ns() if now_ns is None else now_ns
        spans = self.builder.trace(0)
        shift = now - spans[-1].end_time_unix_nano
        for span in spans:
            span.start_time_unix_nano += shift
            span.end_time_unix_nano += shift
            for event in span.events:
                event.time_unix_nano += shift
        body = _request(self.service, spans).SerializeToString()
        return LiveTrace(body, spans[-1].trace_id.hex(), now, len(spans))


# -- decode only ---------------------------------------------------------------------------------
def walk_request(body: bytes) -> int:
    """Parse one encoded request and read every span's ids, times, name, status and attribute
    values: the least any receiver pays per span. Returns the span count."""
    request = ExportTraceServiceRequest.FromString(body)
    n = 0
    for rs in request.resource_spans:
        for kv in rs.resource.attributes:
            kv.value.WhichOneof("value")
        for ss in rs.scope_spans:
            for span in ss.spans:
                _ = (span.trace_id, span.span_id, span.parent_span_id, span.name)
                _ = (span.start_time_unix_nano, span.end_time_unix_nano, span.status.code)
                for kv in span.attributes:
                    value = kv.value
                    kind = value.WhichOneof("value")
                    if kind is not None:
                        getattr(value, kind)
                for event in span.events:
                    for kv in event.attributes:
                        kv.value.WhichOneof("value")
                n += 1
    return n
