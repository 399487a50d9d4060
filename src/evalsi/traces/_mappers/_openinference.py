"""OpenInference (Arize; Phoenix and the ``openinference-instrumentation-*`` packages).

The span kind is ``openinference.span.kind``; content is ``input.value`` / ``output.value``
(with ``*.mime_type``) and, on LLM spans, messages flattened into indexed attributes:
``llm.input_messages.0.message.role``, ``...message.contents.0.message_content.text``,
``...message.tool_calls.0.tool_call.function.arguments``. Retrievers list
``retrieval.documents.N.document.content/id/score``.
"""

from __future__ import annotations

from typing import Any, Final

from evalsi.core import Span, SpanType, SpanView
from evalsi.traces._mappers._common import (
    Attrs,
    Msg,
    as_str,
    first,
    indexed,
    maybe_json,
    message,
    openai_messages,
    parts_text,
    strings,
    tool_call,
    usage_of,
)

VERSION: Final = "openinference/0"

_KINDS: Final[dict[str, SpanType]] = {
    "LLM": "llm",
    "TOOL": "tool",
    "AGENT": "agent",
    "RETRIEVER": "retriever",
    "EMBEDDING": "embedding",
    "CHAIN": "chain",
    "GUARDRAIL": "guardrail",
    # No canonical type of their own: a reranker reorders what a retriever found (its documents
    # are not new context), an evaluator or a prompt template is a step in a chain.
    "RERANKER": "chain",
    "EVALUATOR": "chain",
    "PROMPT": "chain",
}


def map_span(span: Span) -> SpanView:
    attrs = span.attributes
    raw_kind = as_str(attrs.get("openinference.span.kind"))
    kind = _KINDS.get(raw_kind) or _KINDS.get(raw_kind.upper(), "generic")
    v = SpanView(
        type=kind,
        convention=VERSION,
        session_id=as_str(attrs.get("session.id")),
        user_id=as_str(attrs.get("user.id")),
    )
    if kind == "llm":
        _llm(attrs, v)
        v.name = v.model or span.name
    elif kind == "tool":
        name = as_str(first(attrs, "tool.name", "tool_call.function.name"))
        v.name = name or span.name
        args = attrs.get("tool_call.function.arguments")
        v.input = maybe_json(args) if args is not None else _value(attrs, "input")
        v.output = _value(attrs, "output")
        v.tool_call = tool_call(v.name, v.input, attrs.get("tool_call.id"))
    elif kind == "embedding":
        v.model = as_str(attrs.get("embedding.model_name"))
        v.name = v.model or span.name
        texts = strings(indexed(attrs, "embedding.embeddings."), "embedding.text")
        v.input = texts or _value(attrs, "input")
    else:
        v.name = (as_str(attrs.get("agent.name")) if kind == "agent" else "") or span.name
        v.input = _value(attrs, "input")
        v.output = _value(attrs, "output")
        if kind == "retriever":
            v.documents = strings(indexed(attrs, "retrieval.documents."), "document.content")
    return v


def _value(attrs: Attrs, which: str) -> Any:
    """``input.value`` / ``output.value``: JSON decoded when the mime type says so."""
    value = attrs.get(which + ".value")
    if value is None or value == "":
        return None
    if type(value) is str and as_str(attrs.get(which + ".mime_type")) == "text/plain":
        return value
    return maybe_json(value)


def _llm(attrs: Attrs, v: SpanView) -> None:
    v.model = as_str(attrs.get("llm.model_name"))
    v.usage = usage_of(
        attrs.get("llm.token_count.prompt"),
        attrs.get("llm.token_count.completion"),
        attrs.get("llm.token_count.total"),
        attrs.get("llm.cost.total"),
    )
    v.input = _messages(attrs, "llm.input_messages.", "user")
    if v.input is None:  # ``input.value`` is often the whole request: its messages if any
        request = _value(attrs, "input")
        said = openai_messages(request.get("messages")) if isinstance(request, dict) else None
        v.input = request if said is None else said
    v.output = _messages(attrs, "llm.output_messages.", "assistant")
    if v.output is None:
        v.output = _value(attrs, "output")


def _messages(attrs: Attrs, prefix: str, role: str) -> list[Msg] | None:
    if (prefix + "0.message.role") not in attrs and (prefix + "0.message.content") not in attrs:
        return None
    out: list[Msg] = []
    for item in indexed(attrs, prefix):
        content = item.get("message.content")
        calls: list[dict[str, Any]] = []
        if len(item) > 2:  # more than role and content: parts, tool calls, ids
            if content is None:
                content = parts_text(
                    [c.get("message_content.text") for c in indexed(item, "message.contents.")]
                )
            calls = [
                {
                    "id": c.get("tool_call.id"),
                    "name": c.get("tool_call.function.name"),
                    "arguments": c.get("tool_call.function.arguments"),
                }
                for c in indexed(item, "message.tool_calls.")
            ]
        out.append(
            message(
                item.get("message.role") or role,
                content,
                calls,
                item.get("message.tool_call_id") or "",
                item.get("message.name") or "",
            )
        )
    return out or None
