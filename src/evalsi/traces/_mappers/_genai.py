"""OpenTelemetry GenAI semantic conventions (``gen_ai.*``), in the three content forms in use.

- ``otel-genai/1.37``: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
  ``gen_ai.system_instructions`` (JSON with ``parts``), as span attributes or on a
  ``gen_ai.client.inference.operation.details`` event; ``gen_ai.provider.name``.
- ``otel-genai/1.27``: one span event per message (``gen_ai.user.message``,
  ``gen_ai.choice``...), the body in event attributes (``content``, ``message``,
  ``tool_calls``, ``id``) or as JSON (``gen_ai.event.content``, ``event.body``).
- ``otel-genai/1.26``: ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events holding
  ``gen_ai.prompt`` / ``gen_ai.completion`` JSON; ``gen_ai.usage.prompt_tokens``.

Content capture is opt-in in every GenAI instrumentation: without it, input and output stay
``None`` and the span still gives its type, model, tool and token counts.
"""

from __future__ import annotations

from typing import Any, Final

from evalsi.core import Span, SpanEvent, SpanType, SpanView
from evalsi.traces._mappers._common import (
    Attrs,
    Msg,
    as_str,
    first,
    indexed,
    json_or_raw,
    maybe_json,
    message,
    openai_message,
    openai_messages,
    parts_text,
    text_of,
    tool_call,
    usage_of,
)

V137: Final = "otel-genai/1.37"
V127: Final = "otel-genai/1.27"
V126: Final = "otel-genai/1.26"

_OPERATIONS: Final[dict[str, SpanType]] = {
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "completion": "llm",
    "embeddings": "embedding",
    "embedding": "embedding",
    "execute_tool": "tool",
    "invoke_agent": "agent",
    "create_agent": "agent",
    "invoke_workflow": "chain",
    "retrieval": "retriever",
}

_ROLE_EVENTS: Final = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
_SESSION_KEYS: Final = ("gen_ai.conversation.id", "session.id")
_USER_KEYS: Final = ("user.id", "enduser.id")


def map_span(span: Span) -> SpanView:
    attrs = span.attributes
    op = as_str(attrs.get("gen_ai.operation.name"))
    request_model = as_str(attrs.get("gen_ai.request.model"))
    model = request_model or as_str(attrs.get("gen_ai.response.model"))
    kind = _OPERATIONS.get(op)
    if kind is None:
        kind = "llm" if model else "generic"

    v = SpanView(
        type=kind,
        convention=V137 if "gen_ai.provider.name" in attrs else V127,
        model=model,
        session_id=as_str(first(attrs, *_SESSION_KEYS)),
        user_id=as_str(first(attrs, *_USER_KEYS)),
    )
    if kind == "tool":
        name = as_str(attrs.get("gen_ai.tool.name"))
        v.name = name or span.name
        v.input = maybe_json(attrs.get("gen_ai.tool.call.arguments"))
        v.output = maybe_json(attrs.get("gen_ai.tool.call.result"))
        if v.input is not None or v.output is not None:
            v.convention = V137  # the tool call attributes arrived with 1.37
        elif span.events:
            _tool_events(span.events, v)
        v.tool_call = tool_call(name, v.input, attrs.get("gen_ai.tool.call.id"))
    elif kind == "agent":
        v.name = as_str(attrs.get("gen_ai.agent.name")) or span.name
    else:
        v.name = model or span.name

    input_tokens = first(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
    output_tokens = first(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
    v.usage = usage_of(input_tokens, output_tokens, attrs.get("gen_ai.usage.total_tokens"))
    if "gen_ai.usage.prompt_tokens" in attrs and "gen_ai.usage.input_tokens" not in attrs:
        v.convention = V126

    if kind != "tool":
        read_content(span, v)
    return v


def read_content(span: Span, v: SpanView) -> None:
    """Fill ``v.input``/``v.output`` from whichever content form the span carries."""
    attrs = span.attributes
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        _read_v137(attrs, v)
        return
    if span.events:
        _read_events(span.events, v)
        if v.input is not None or v.output is not None:
            return
    if "gen_ai.prompt" in attrs or "gen_ai.completion" in attrs:
        v.input = _legacy_json(attrs.get("gen_ai.prompt"), "user")
        v.output = _legacy_json(attrs.get("gen_ai.completion"), "assistant")
        v.convention = V126
    elif "gen_ai.prompt.0.role" in attrs or "gen_ai.prompt.0.content" in attrs:
        v.input = flattened_messages(attrs, "gen_ai.prompt.", "user")
        v.output = flattened_messages(attrs, "gen_ai.completion.", "assistant")


# -- 1.37: structured messages with parts ------------------------------------------------------


def _read_v137(attrs: Attrs, v: SpanView) -> None:
    v.convention = V137
    messages = genai_messages(attrs.get("gen_ai.input.messages"))
    system = _system_message(attrs.get("gen_ai.system_instructions"))
    if system is not None:
        messages = [system, *(messages or ())]
    v.input = messages
    v.output = genai_messages(attrs.get("gen_ai.output.messages"))


def genai_messages(value: Any) -> list[Msg] | None:
    """Canonical messages from ``gen_ai.input.messages``-style JSON (a string or decoded)."""
    data = maybe_json(value)
    if not isinstance(data, list):
        return None
    out: list[Msg] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        parts = item.get("parts")
        if not isinstance(parts, list):
            # Not the parts form: an OpenAI-style message some SDKs put here.
            m = openai_message(item)
            if m is not None:
                out.append(m)
            continue
        out.extend(_from_parts(item, parts))
    return out or None


def _from_parts(item: dict[str, Any], parts: list[Any]) -> list[Msg]:
    role = item.get("role") or "user"
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    responses: list[Msg] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            text = part.get("content")
            if type(text) is str:
                texts.append(text)
        elif kind == "tool_call":
            calls.append(
                {"id": part.get("id"), "name": part.get("name"), "arguments": part.get("arguments")}
            )
        elif kind == "tool_call_response":
            responses.append(message("tool", part.get("response"), (), part.get("id") or ""))
    if responses and not texts and not calls:
        return responses
    main = message(role, "\n".join(texts) if texts else None, calls, "", item.get("name") or "")
    return [main, *responses]


def _system_message(value: Any) -> Msg | None:
    """Instructions: a list of parts (1.37), else text (plain or JSON-encoded)."""
    data = json_or_raw(value)
    if isinstance(data, list):
        text = parts_text([p for p in data if not isinstance(p, dict) or p.get("type") == "text"])
        return None if text is None else message("system", text)
    if type(data) is str:
        return message("system", data)
    return message("system", value) if type(value) is str and value else None


# -- 1.27: one event per message ---------------------------------------------------------------


def _read_events(events: list[SpanEvent], v: SpanView) -> None:
    inputs: list[Msg] = []
    outputs: list[Msg] = []
    for event in events:
        name = event.name
        role = _ROLE_EVENTS.get(name)
        if role is not None:
            m = _event_message(event.attributes, role)
            if m is not None:
                inputs.append(m)
        elif name == "gen_ai.choice":
            m = _event_message(event.attributes, "assistant", choice=True)
            if m is not None:
                outputs.append(m)
        elif name == _DETAILS_EVENT:
            _read_v137(event.attributes, v)
            return
        elif name == "gen_ai.content.prompt":
            v.input = _legacy_json(event.attributes.get("gen_ai.prompt"), "user")
            v.convention = V126
        elif name == "gen_ai.content.completion":
            v.output = _legacy_json(event.attributes.get("gen_ai.completion"), "assistant")
            v.convention = V126
    if inputs or outputs:
        v.convention = V127
        v.input = inputs or None
        v.output = outputs or None


def _tool_events(events: list[SpanEvent], v: SpanView) -> None:
    """Before 1.37 some SDKs (Strands) put a tool's arguments and result in message events."""
    for event in events:
        if event.name == "gen_ai.tool.message":
            v.input = maybe_json(_event_body(event.attributes).get("content"))
        elif event.name == "gen_ai.choice":
            m = _event_message(event.attributes, "tool", choice=True)
            if m is not None:
                v.output = maybe_json(m["content"])


def _event_body(attrs: Attrs) -> dict[str, Any]:
    raw = first(attrs, "gen_ai.event.content", "event.body", "body")
    if raw is not None:
        body = maybe_json(raw)
        if isinstance(body, dict):
            return body
    return dict(attrs)


def _event_message(attrs: Attrs, role: str, *, choice: bool = False) -> Msg | None:
    body: Any = _event_body(attrs)
    if choice:  # gen_ai.choice nests the message: {"index", "finish_reason", "message"}
        body = maybe_json(body.get("message", body))
        if type(body) is str or isinstance(body, list):  # text, or a list of parts
            text = text_of(body)
            return None if text is None else message(role, text)
        if not isinstance(body, dict):
            return None
    content = body.get("content")
    calls = maybe_json(body.get("tool_calls"))
    if content is None and not calls:
        return None  # content not captured: the event only says a message existed
    return message(
        body.get("role") or role,
        text_of(content),
        calls if isinstance(calls, list) else (),
        body.get("id") or body.get("tool_call_id") or "",
    )


# -- older and flattened forms -----------------------------------------------------------------


def _legacy_json(value: Any, role: str) -> Any:
    """``gen_ai.prompt`` / ``gen_ai.completion``: JSON messages, else the raw text."""
    if value is None:
        return None
    data = maybe_json(value)
    messages = openai_messages(data, role)
    if messages is not None:
        return messages
    return data if data != "" else None


def flattened_messages(attrs: Attrs, prefix: str, role: str) -> list[Msg] | None:
    """``gen_ai.prompt.N.role/content/tool_calls.M.name/arguments/id`` (OpenLLMetry's form)."""
    out: list[Msg] = []
    for item in indexed(attrs, prefix):
        calls = indexed(item, "tool_calls.") if len(item) > 2 else ()
        out.append(
            message(
                item.get("role") or role,
                text_of(item.get("content")),
                calls,
                item.get("tool_call_id") or "",
            )
        )
    return out or None
