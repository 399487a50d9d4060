"""Core records from the ``Record`` messages of a request, with field paths in every error; a
record holding only an id and texts (most do) takes a shortcut."""

from __future__ import annotations

from collections.abc import Sequence

from evalsi._proto.evalsi.v1alpha1 import record_pb2
from evalsi.core import Content, Record, UserError
from evalsi.wire import record_from_proto

_CONTENT_KINDS = "text, messages, json, row, tensor or media"


def _records(messages: Sequence[record_pb2.Record], where: str = "") -> list[Record]:
    """Core records from the request's; ``where`` names the stream message, if any."""
    out: list[Record] = []
    for i, message in enumerate(messages):
        at = f"{where}records[{i}]"
        if not message.id:
            raise UserError(f"{at}.id: empty; every record needs an id (unique within the call)")
        if "\x00" in message.id:
            raise UserError(f"{at}.id: contains a NUL character")
        texts = _texts(message)
        if texts is not None:
            out.append(_text_record(message.id, texts))
            continue
        for name in ("input", "output", "reference"):
            if message.HasField(name) and getattr(message, name).WhichOneof("kind") is None:
                raise UserError(f"{at}.{name}: a Content must hold one of {_CONTENT_KINDS}")
        for j, item in enumerate(message.context):
            if item.WhichOneof("kind") is None:
                raise UserError(f"{at}.context[{j}]: a Content must hold one of {_CONTENT_KINDS}")
        try:
            out.append(record_from_proto(message))
        except (ValueError, TypeError) as e:
            raise UserError(f"{at}: {e}") from None
    return out


_TEXT_ONLY = frozenset(("id", "input", "output", "reference"))


def _texts(message: record_pb2.Record) -> dict[str, str] | None:
    """The text contents of a record holding nothing but an id and text contents (most do),
    else None."""
    texts: dict[str, str] = {}
    for field, value in message.ListFields():
        if field.name not in _TEXT_ONLY:
            return None
        if field.name != "id":
            if value.WhichOneof("kind") != "text":
                return None
            texts[field.name] = value.text
    return texts


def _text_record(record_id: str, texts: dict[str, str]) -> Record:
    """What ``record_from_proto`` builds for such a record, without its walk over every
    field (a test pins the equality)."""

    def content(name: str) -> Content | None:
        text = texts.get(name)
        return None if text is None else Content.of_text(text)

    return Record(
        id=record_id,
        input=content("input"),
        output=content("output"),
        reference=content("reference"),
        context=[],
        metadata={},
    )
