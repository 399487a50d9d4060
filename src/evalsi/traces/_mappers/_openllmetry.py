"""OpenLLMetry (Traceloop SDK and ``opentelemetry-instrumentation-*`` from traceloop).

Decorated functions (``@workflow``, ``@task``, ``@agent``, ``@tool``) carry
``traceloop.span.kind``, ``traceloop.entity.name`` and JSON ``traceloop.entity.input`` /
``traceloop.entity.output`` (the input as ``{"args": [...], "kwargs": {...}}``). LLM calls carry
``llm.request.type`` and the flattened legacy GenAI form: ``gen_ai.prompt.N.role/content``,
``gen_ai.completion.N.role/content/tool_calls.M.*``, ``gen_ai.usage.prompt_tokens`` and
``llm.usage.total_tokens``. The session and user ids travel as association properties.
"""

from __future__ import annotations

from typing import Any, Final

from evalsi.core import Span, SpanType, SpanView
from evalsi.traces._mappers._common import as_str, first, json_or_raw, tool_call, usage_of
from evalsi.traces._mappers._genai import flattened_messages, read_content

VERSION: Final = "openllmetry/0"

_SPAN_KINDS: Final[dict[str, SpanType]] = {
    "workflow": "chain",
    "task": "chain",
    "agent": "agent",
    "tool": "tool",
}
_REQUEST_TYPES: Final[dict[str, SpanType]] = {
    "chat": "llm",
    "completion": "llm",
    "embedding": "embedding",
    "rerank": "chain",
}
_ASSOC: Final = "traceloop.association.properties."
_SESSION_KEYS: Final = (
    _ASSOC + "session_id",
    _ASSOC + "sessionId",
    _ASSOC + "conversation_id",
    _ASSOC + "thread_id",
)
_USER_KEYS: Final = (_ASSOC + "user_id", _ASSOC + "userId")


def map_span(span: Span) -> SpanView:
    attrs = span.attributes
    v = SpanView(
        type="generic",
        convention=VERSION,
        session_id=as_str(first(attrs, *_SESSION_KEYS)),
        user_id=as_str(first(attrs, *_USER_KEYS)),
    )
    span_kind = attrs.get("traceloop.span.kind")
    if span_kind is not None:
        v.type = _SPAN_KINDS.get(as_str(span_kind), "generic")
        v.name = as_str(attrs.get("traceloop.entity.name")) or span.name
        v.input = entity_input(attrs.get("traceloop.entity.input"))
        v.output = json_or_raw(attrs.get("traceloop.entity.output"))
        if v.type == "tool":
            v.tool_call = tool_call(v.name, v.input)
        return v

    v.type = _REQUEST_TYPES.get(as_str(attrs.get("llm.request.type")), "llm")
    v.model = as_str(first(attrs, "gen_ai.request.model", "gen_ai.response.model"))
    v.name = v.model or span.name
    v.usage = usage_of(
        first(attrs, "gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens"),
        first(attrs, "gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens"),
        first(attrs, "llm.usage.total_tokens", "gen_ai.usage.total_tokens"),
    )
    if "gen_ai.prompt.0.role" in attrs or "gen_ai.prompt.0.content" in attrs:
        v.input = flattened_messages(attrs, "gen_ai.prompt.", "user")
    if "gen_ai.completion.0.role" in attrs or "gen_ai.completion.0.content" in attrs:
        v.output = flattened_messages(attrs, "gen_ai.completion.", "assistant")
    if v.input is None and v.output is None:
        # Newer releases can emit the OTel GenAI forms instead (events or message attributes).
        convention = v.convention
        read_content(span, v)
        v.convention = convention
    return v


def entity_input(value: Any) -> Any:
    """The JSON ``{"args": [x], "kwargs": {}}`` is just ``x``; kwargs alone are the kwargs."""
    data = json_or_raw(value)
    if isinstance(data, dict) and data.keys() <= {"args", "kwargs"}:
        args, kwargs = data.get("args") or [], data.get("kwargs") or {}
        if isinstance(args, list) and isinstance(kwargs, dict):
            if len(args) == 1 and not kwargs:
                return args[0]
            if not args and kwargs:
                return kwargs
    return data
