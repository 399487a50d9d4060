"""Helpers every mapper shares: tolerant readers of attribute values and canonical messages.

Instrumentations send whatever they send: a JSON attribute that does not parse, a token count
as a string, a negative number. Every reader here returns ``None`` (or skips the item) for what
it cannot use and never raises, so one odd span never stops ingest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from evalsi.core import Span, SpanView, ToolCall, Usage

Attrs = Mapping[str, Any]
Msg = dict[str, Any]
"""A chat message in canonical form: ``role``, ``content`` (str or None) and, when present,
``tool_calls`` (``[{"id", "name", "arguments"}]``), ``tool_call_id`` and ``name``."""


def json_or_raw(value: Any) -> Any:
    """An attribute that holds JSON-encoded data (strings included, as ``'"text"'``): decoded,
    or as it came when it does not parse. An empty string is no content: ``None``."""
    if type(value) is str:
        if not value:
            return None
        try:
            data = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return None if data == "" else data
    return maybe_json(value)


def maybe_json(value: Any) -> Any:
    """A value that may be JSON text: objects and arrays decoded, anything else as it came.

    Only ``{...}`` and ``[...]`` are decoded, so a plain answer such as ``"42"`` or ``"true"``
    stays the text the application produced. An empty string is no content: ``None``.
    """
    if type(value) is str:
        if not value:
            return None
        head = value.lstrip()[:1]
        if head == "{" or head == "[":
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                return value
        return value
    if isinstance(value, bytes):
        return maybe_json(value.decode("utf-8", "replace"))
    if isinstance(value, tuple):
        return list(value)
    return value


def as_str(value: Any) -> str:
    """A name-like attribute as text: strings as they are, numbers printed, others empty."""
    if type(value) is str:
        return value
    if type(value) is int or type(value) is float:
        return str(value)
    return ""


def as_count(value: Any) -> int | None:
    """A non-negative token count, or ``None`` (bools, negatives, junk strings, NaN, and
    counts of 2**53 or more, which no model produces and a 64-bit column cannot hold)."""
    t = type(value)
    if t is int:
        return value if 0 <= value < MAX_COUNT else None
    if t is float:
        return int(value) if 0 <= value < MAX_COUNT and value.is_integer() else None
    if t is str and value.isascii() and value.isdigit() and len(value) < 16:
        return int(value)
    return None


MAX_COUNT = 2**53


def usage_of(
    input_tokens: Any, output_tokens: Any, total_tokens: Any = None, cost: Any = None
) -> Usage | None:
    """A ``Usage`` from raw counts; ``None`` when none of them is usable."""
    i, o, t = as_count(input_tokens), as_count(output_tokens), as_count(total_tokens)
    c: float | None = None
    if (type(cost) is float or type(cost) is int) and cost >= 0 and cost != float("inf"):
        c = float(cost)
    if i is None and o is None and t is None and c is None:
        return None
    return Usage(input_tokens=i, output_tokens=o, total_tokens=t, cost_usd=c)


def first(attrs: Attrs, *keys: str) -> Any:
    """The value of the first key present (and not None)."""
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            return value
    return None


def indexed(attrs: Attrs, prefix: str) -> list[dict[str, Any]]:
    """Group keys flattened as ``prefix.N.rest`` by ``N``: one flat ``{rest: value}`` per index.

    ``llm.input_messages.0.message.role = "user"`` gives ``[{"message.role": "user"}]``.
    Indices may be sparse; groups come back in index order; keys whose ``N`` is not an index
    are ignored. Nested lists (``message.tool_calls.M...``) are grouped again by the caller,
    on the small per-item dict, so one pass over the span's attributes is all this costs.
    """
    n = len(prefix)
    groups: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            idx, dot, rest = key[n:].partition(".")
            if dot and idx.isdecimal() and len(idx) < 10:
                groups.setdefault(int(idx), {})[rest] = value
    return [groups[i] for i in sorted(groups)] if groups else []


def tool_call(name: Any, arguments: Any, call_id: Any = "") -> ToolCall | None:
    """A ``ToolCall`` with parsed arguments; ``None`` without a usable name."""
    tool = as_str(name)
    if not tool:
        return None
    return ToolCall(name=tool, arguments=maybe_json(arguments), id=as_str(call_id))


def message(
    role: Any,
    content: Any,
    tool_calls: Iterable[Any] = (),
    tool_call_id: Any = "",
    name: Any = "",
) -> Msg:
    """A canonical message. Non-text content is kept as compact JSON text."""
    text = content if content is None or type(content) is str else _dumps(content)
    out: Msg = {"role": as_str(role) or "user", "content": text}
    calls = [c for c in (openai_tool_call(c) for c in tool_calls) if c is not None]
    if calls:
        out["tool_calls"] = calls
    if tid := as_str(tool_call_id):
        out["tool_call_id"] = tid
    if who := as_str(name):
        out["name"] = who
    return out


def openai_tool_call(call: Any) -> dict[str, Any] | None:
    """``{"id", "name", "arguments"}`` from an OpenAI-style call (``function`` nested or not)."""
    if not isinstance(call, dict):
        return None
    fn = call.get("function")
    if not isinstance(fn, dict):
        fn = call
    name = as_str(fn.get("name"))
    if not name:
        return None
    args = maybe_json(fn.get("arguments"))
    return {"id": as_str(call.get("id")), "name": name, "arguments": args}


def openai_message(data: Any, default_role: str = "user") -> Msg | None:
    """A canonical message from an OpenAI-style dict (content may be a list of parts)."""
    if isinstance(data, str):
        return message(default_role, data)
    if not isinstance(data, dict):
        return None
    content = data.get("content")
    if isinstance(content, list):
        content = parts_text(content)
    calls = data.get("tool_calls")
    return message(
        data.get("role") or default_role,
        content,
        calls if isinstance(calls, list) else (),
        data.get("tool_call_id") or "",
        data.get("name") or "",
    )


def openai_messages(value: Any, default_role: str = "user") -> list[Msg] | None:
    """A list of canonical messages, or ``None`` when ``value`` is not a list of messages."""
    if not isinstance(value, list) or not value:
        return None
    out = [m for m in (openai_message(v, default_role) for v in value) if m is not None]
    return out or None


def strings(items: Iterable[Any], *keys: str) -> list[str]:
    """The strings among ``items``; a dict stands for its value under the first of ``keys``
    it has."""
    out = []
    for item in items:
        if isinstance(item, dict):
            item = next((item[k] for k in keys if k in item), None)
        if type(item) is str:
            out.append(item)
    return out


def parts_text(parts: list[Any]) -> str | None:
    """The text of a content-part list (``{"type": "text", "text"|"content": ...}``, strings)."""
    texts = strings(parts, "text", "content")
    return "\n".join(texts) if texts else None


def text_of(content: Any) -> str | None:
    """Message content as text: a (JSON) list of parts joined, other non-text as JSON."""
    if content is None:
        return None
    data = maybe_json(content)
    if isinstance(data, list):
        text = parts_text(data)
        if text is not None:
            return text
    return content if type(content) is str else _dumps(content)


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:  # e.g. non-string dict keys from a decoded AnyValue
        return str(value)


def generic(span: Span) -> SpanView:
    """The view of a span no mapper recognises: its name, nothing else (attributes stay)."""
    return SpanView(type="generic", convention="generic", name=span.name)
