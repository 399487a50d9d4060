"""Content: what an input, an output, a reference or a context item holds.

Exactly one kind per value (mirrors the ``Content`` oneof in ``record.proto``): text, chat
messages (with tool calls), a JSON value, a tabular row (classic ML), a tensor, or a media
reference. ``Content.from_value`` infers the kind from plain JSON data, which is how datasets and
``evaluate(data=[...])`` build records.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import orjson

JsonValue: TypeAlias = Any
"""Anything ``json.loads`` can return."""

ContentKind = Literal["text", "messages", "json", "row", "tensor", "media"]


@dataclass(slots=True)
class ToolCall:
    """A tool (function) call requested by a model."""

    name: str
    arguments: JsonValue = None
    id: str = ""


@dataclass(slots=True)
class Message:
    """One chat message; ``tool_calls`` on assistant turns, ``tool_call_id`` on tool results."""

    role: str
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""


@dataclass(slots=True)
class TabularRow:
    """A classic-ML example: features, the model's prediction and class probabilities."""

    features: dict[str, JsonValue] = field(default_factory=dict)
    prediction: JsonValue = None
    probabilities: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class Tensor:
    """A dense numeric array, row-major."""

    dtype: str
    shape: tuple[int, ...]
    values: list[float]


@dataclass(slots=True)
class MediaRef:
    """An image, audio or video file by URI (never inlined)."""

    uri: str
    mime_type: str = ""
    sha256: str = ""


class Content:
    """One value of one kind. Build with the ``of_*`` constructors or ``from_value``.

    Example:
        >>> Content.from_value("Paris").text
        'Paris'
        >>> Content.from_value(["Paris", "paris"]).kind
        'json'
    """

    __slots__ = ("kind", "value")

    def __init__(self, kind: ContentKind, value: Any) -> None:
        self.kind: ContentKind = kind
        self.value: Any = value

    @classmethod
    def of_text(cls, text: str) -> Content:
        return cls("text", text)

    @classmethod
    def of_json(cls, value: JsonValue) -> Content:
        return cls("json", value)

    @classmethod
    def of_messages(cls, messages: list[Message]) -> Content:
        return cls("messages", messages)

    @classmethod
    def of_row(cls, row: TabularRow) -> Content:
        return cls("row", row)

    @classmethod
    def of_tensor(cls, tensor: Tensor) -> Content:
        return cls("tensor", tensor)

    @classmethod
    def of_media(cls, media: MediaRef) -> Content:
        return cls("media", media)

    @classmethod
    def from_value(cls, value: Any) -> Content:
        """Infer the kind from plain data.

        A string is text; a list of objects that all have a ``role`` is chat messages; an
        object tagged ``{"messages": [...]}``, ``{"row": {...}}``, ``{"tensor": {...}}``,
        ``{"media": {...}}`` or ``{"json": ...}`` is that kind; anything else is JSON.
        """
        if isinstance(value, Content):
            return value
        if isinstance(value, str):
            return cls("text", value)
        if isinstance(value, list):
            if value and all(isinstance(m, dict) and "role" in m for m in value):
                return cls("messages", [message_from_dict(m) for m in value])
            return cls("json", value)
        if isinstance(value, dict) and len(value) == 1:
            ((key, inner),) = value.items()
            if key == "json":
                return cls("json", inner)
            if key == "messages" and isinstance(inner, list):
                return cls("messages", [message_from_dict(m) for m in inner])
            if key == "row" and isinstance(inner, dict):
                return cls(
                    "row",
                    TabularRow(
                        features=dict(inner.get("features") or {}),
                        prediction=inner.get("prediction"),
                        probabilities={
                            str(k): float(v) for k, v in (inner.get("probabilities") or {}).items()
                        },
                    ),
                )
            if key == "tensor" and isinstance(inner, dict):
                values = [float(v) for v in inner.get("values", [])]
                shape = tuple(int(s) for s in inner.get("shape", [len(values)]))
                return cls("tensor", Tensor(str(inner.get("dtype", "float64")), shape, values))
            if key == "media" and isinstance(inner, dict) and "uri" in inner:
                return cls(
                    "media",
                    MediaRef(
                        str(inner["uri"]),
                        str(inner.get("mime_type", "")),
                        str(inner.get("sha256", "")),
                    ),
                )
        return cls("json", value)

    @property
    def text(self) -> str | None:
        return self.value if self.kind == "text" else None

    @property
    def messages(self) -> list[Message] | None:
        return self.value if self.kind == "messages" else None

    @property
    def json(self) -> JsonValue:
        return self.value if self.kind == "json" else None

    @property
    def row(self) -> TabularRow | None:
        return self.value if self.kind == "row" else None

    @property
    def tensor(self) -> Tensor | None:
        return self.value if self.kind == "tensor" else None

    @property
    def media(self) -> MediaRef | None:
        return self.value if self.kind == "media" else None

    def as_text(self) -> str:
        """The most natural string for text comparisons.

        Text as is; chat messages: the last assistant message's content (else the last
        message's); JSON: a string value as is, anything else as compact JSON; a row: its
        prediction; media: the URI.
        """
        kind, value = self.kind, self.value
        if kind == "text":
            return value  # type: ignore[no-any-return]
        if kind == "messages":
            for message in reversed(value):
                if message.role == "assistant":
                    return message.content or ""
            return (value[-1].content or "") if value else ""
        if kind == "json":
            return value if isinstance(value, str) else orjson.dumps(value).decode()
        if kind == "row":
            pred = value.prediction
            return pred if isinstance(pred, str) else orjson.dumps(pred).decode()
        if kind == "media":
            return value.uri  # type: ignore[no-any-return]
        return orjson.dumps(value.values).decode()

    def to_value(self) -> JsonValue:
        """The inverse of ``from_value``: plain JSON data that round-trips."""
        kind, value = self.kind, self.value
        if kind in ("text", "json"):
            if kind == "json" and _looks_tagged(value):
                return {"json": value}  # keep a JSON object that looks tagged from changing kind
            return value
        if kind == "messages":
            return {"messages": [message_to_dict(m) for m in value]}
        if kind == "row":
            return {
                "row": {
                    "features": value.features,
                    "prediction": value.prediction,
                    "probabilities": value.probabilities,
                }
            }
        if kind == "tensor":
            return {
                "tensor": {"dtype": value.dtype, "shape": list(value.shape), "values": value.values}
            }
        return {"media": {"uri": value.uri, "mime_type": value.mime_type, "sha256": value.sha256}}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Content) and self.kind == other.kind and self.value == other.value

    def __hash__(self) -> int:  # pragma: no cover - contents are not meant as dict keys
        raise TypeError("Content is unhashable")

    def __repr__(self) -> str:
        return f"Content({self.kind}={self.value!r})"


def _looks_tagged(value: JsonValue) -> bool:
    if isinstance(value, list):
        return bool(value) and all(isinstance(m, dict) and "role" in m for m in value)
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _TAGS


_TAGS = frozenset({"messages", "row", "tensor", "media", "json"})


def message_from_dict(data: dict[str, Any]) -> Message:
    """Read an OpenAI-style chat message (``tool_calls[].function.{name,arguments}`` accepted)."""
    calls = []
    for call in data.get("tool_calls") or ():
        fn = call.get("function", call)
        args = fn.get("arguments")
        if isinstance(args, str):
            # A malformed argument payload stays the raw string: it is itself evidence.
            with contextlib.suppress(orjson.JSONDecodeError):
                args = orjson.loads(args)
        calls.append(
            ToolCall(name=str(fn.get("name", "")), arguments=args, id=str(call.get("id", "")))
        )
    content = data.get("content")
    if content is not None and not isinstance(content, str):
        content = orjson.dumps(content).decode()
    return Message(
        role=str(data["role"]),
        content=content,
        tool_calls=calls,
        tool_call_id=str(data.get("tool_call_id", "")),
        name=str(data.get("name", "")),
    )


def message_to_dict(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out
