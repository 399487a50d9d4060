"""Reading a RAG record: the retrieved chunks' ids and texts, the question, the answer.

A record's ``context`` is the retrieved chunks in rank order. A chunk is best given as a JSON
object ``{"id": "d3", "text": "..."}``; a bare string is a passage (or, where an id is wanted,
an id if it has no whitespace). These rules are shared by the retrieval metrics (which need ids
or texts to match against the relevance labels) and the judge metrics (which show the texts).
"""

from __future__ import annotations

import re

import orjson

from evalsi.core import Content, Record

ID_KEYS = ("id", "doc_id", "chunk_id")
"""Where a chunk object's id is looked for, in order (unless ``id_key`` names one)."""

TEXT_KEYS = ("text", "content", "page_content")
"""Where a chunk object's text is looked for, in order."""

_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Case-folded, whitespace collapsed and stripped: how passages are compared.

    Example:
        >>> normalize("  Paris  is the\tCAPITAL. ")
        'paris is the capital.'
    """
    return _SPACE.sub(" ", text).strip().casefold()


def _scalar_id(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    return text or None


def chunk_id(chunk: Content, id_key: str = "") -> str | None:
    """The id of a chunk, or None when it has none.

    An object's ``id_key`` (default: the first of ``id``, ``doc_id``, ``chunk_id`` it has); a
    bare JSON string or integer is itself the id, and so is a text chunk without whitespace
    (a context given as a plain list of ids). A passage of several words has no id.

    Example:
        >>> chunk_id(Content.of_json({"doc_id": 7, "text": "..."}))
        '7'
        >>> chunk_id(Content.of_text("Paris is the capital.")) is None
        True
    """
    if chunk.kind == "json":
        value = chunk.value
        if isinstance(value, dict):
            for key in (id_key,) if id_key else ID_KEYS:
                found = _scalar_id(value.get(key))
                if found is not None:
                    return found
            return None
        return _scalar_id(value)
    if chunk.kind == "text":
        text = chunk.value.strip()
        return text if text and not _SPACE.search(text) else None
    return None


def chunk_text(chunk: Content) -> str:
    """The passage a chunk holds: its text, an object's ``text``/``content``/``page_content``
    field, else the chunk as compact JSON."""
    if chunk.kind == "json" and isinstance(chunk.value, dict):
        for key in TEXT_KEYS:
            value = chunk.value.get(key)
            if isinstance(value, str):
                return value
        return orjson.dumps(chunk.value).decode()
    return chunk.as_text()


def has_text(chunk: Content) -> bool:
    """Whether the chunk holds a passage (not only an id)."""
    if chunk.kind == "json":
        value = chunk.value
        return isinstance(value, str) or (
            isinstance(value, dict) and any(isinstance(value.get(k), str) for k in TEXT_KEYS)
        )
    return chunk.kind == "text"


def passages_block(record: Record, only: set[int] | None = None) -> str:
    """The context for a prompt: ``[n] (id: …) text`` per chunk, numbered by rank from 1.

    ``only`` keeps the chunks of those ranks (their numbers stay the rank).
    """
    lines = []
    for rank, chunk in enumerate(record.context, 1):
        if only is not None and rank not in only:
            continue
        ident = chunk_id(chunk) if chunk.kind == "json" else None
        label = f"[{rank}] (id: {ident})" if ident is not None else f"[{rank}]"
        lines.append(f"{label} {chunk_text(chunk).strip()}")
    return "\n\n".join(lines)


def chunk_label(record: Record, rank: int) -> str:
    """How an explanation names a chunk: ``[2]``, or ``[2] d7`` when it has an id."""
    chunk = record.context[rank - 1]
    ident = chunk_id(chunk) if chunk.kind == "json" else None
    return f"[{rank}] {ident}" if ident is not None else f"[{rank}]"


def question_of(record: Record) -> str:
    """The question: the input's text, or the last user message of a chat input."""
    if record.input is None:
        return ""
    messages = record.input.messages
    if messages is not None:
        for message in reversed(messages):
            if message.role == "user":
                return message.content or ""
    return record.input.as_text()


def answer_of(record: Record) -> str:
    """The answer: the output's text (the last assistant message of a chat)."""
    return record.output.as_text() if record.output is not None else ""


def reference_answer(record: Record) -> str | None:
    """A reference answer, if the record has one: a text reference, or the ``answer`` of a JSON
    reference object (``{"answer": "...", "context_ids": [...]}``)."""
    ref = record.reference
    if ref is None:
        return None
    if ref.kind == "text":
        return ref.value if ref.value.strip() else None
    value = ref.json
    if isinstance(value, dict):
        value = value.get("answer")
    return value if isinstance(value, str) and value.strip() else None
