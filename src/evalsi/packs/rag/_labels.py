"""Relevance labels of a retrieval record, and the gain of each retrieved chunk.

The relevant chunks of a query are listed, in the first of these places the record has:
``reference.context_ids`` (``reference`` a JSON object), ``reference.relevant_ids``,
``metadata.relevant_ids``, ``metadata.context_ids`` (ids), then the same four with ``_texts``
(passages, matched by normalised text). A list gives every listed chunk relevance 1; an object
``{id: grade}`` gives graded relevance (a grade of 0 is listed but not relevant). Unlisted
chunks are not relevant.

Each retrieved chunk gets the gain of its id (or normalised text). A chunk retrieved again
gains nothing at its later ranks: it filled a slot without adding a document.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from evalsi.core import Record
from evalsi.evaluators import Skip
from evalsi.packs.rag._chunks import chunk_id, chunk_text, has_text, normalize

_ID_KEYS = ("context_ids", "relevant_ids")
_TEXT_KEYS = ("context_texts", "relevant_texts")
_SOURCES: tuple[tuple[Literal["id", "text"], tuple[str, ...]], ...] = (
    ("id", _ID_KEYS),
    ("text", _TEXT_KEYS),
)

NO_LABELS = (
    "record has no relevance labels: list the relevant chunk ids as reference "
    '{"context_ids": [...]} (or metadata.relevant_ids), or the relevant passages as '
    'reference {"context_texts": [...]}'
)


@dataclass(frozen=True, slots=True)
class Labels:
    """The relevant chunks of one query: key (id or normalised text) → grade."""

    by: Literal["id", "text"]
    grades: dict[str, float]
    source: str
    """Where the labels were read, e.g. ``reference.context_ids``."""

    @property
    def relevant(self) -> int:
        return sum(g > 0 for g in self.grades.values())


def labels_of(record: Record) -> Labels:
    """The record's relevance labels; ``Skip`` when it has none, ValueError when malformed."""
    places: list[tuple[str, dict[str, Any]]] = []
    ref = record.reference
    if ref is not None and isinstance(ref.json, dict):
        places.append(("reference", ref.json))
    places.append(("metadata", record.metadata))
    for by, keys in _SOURCES:
        for where, obj in places:
            for key in keys if where == "reference" else reversed(keys):
                value = obj.get(key)
                if value is not None:
                    source = f"{where}.{key}"
                    return Labels(by, _grades(value, source, by == "text"), source)
    raise Skip(NO_LABELS)


def _key(item: Any, source: str, text: bool) -> str:
    if text:
        if not isinstance(item, str):
            raise ValueError(f"{source}: expected passages (strings), got {item!r}")
        return normalize(item)
    if isinstance(item, bool) or not isinstance(item, (str, int)):
        raise ValueError(f"{source}: expected chunk ids (strings or integers), got {item!r}")
    return str(item).strip()


def _grades(value: Any, source: str, text: bool) -> dict[str, float]:
    if isinstance(value, list):
        return {_key(item, source, text): 1.0 for item in value}
    if isinstance(value, dict):
        grades: dict[str, float] = {}
        for item, grade in value.items():
            if (
                isinstance(grade, bool)
                or not isinstance(grade, (int, float))
                or not math.isfinite(grade)
                or grade < 0
            ):
                raise ValueError(
                    f"{source}: the grade of {item!r} must be a finite number >= 0, got {grade!r}"
                )
            grades[_key(item, source, text)] = float(grade)
        return grades
    kind = "passages" if text else "ids"
    raise ValueError(
        f"{source}: expected a list of {kind} or an object {{key: relevance grade}}, "
        f"got {type(value).__name__}"
    )


def retrieved_keys(record: Record, labels: Labels, id_key: str = "") -> list[str]:
    """The key of each retrieved chunk, in rank order, read the way the labels are keyed."""
    keys = []
    for rank, chunk in enumerate(record.context, 1):
        if labels.by == "id":
            found = chunk_id(chunk, id_key)
            if found is None:
                wanted = f"an {id_key!r} field" if id_key else "an id"
                raise ValueError(
                    f"context chunk {rank} has no id ({labels.source} lists ids): give chunks "
                    f'as {{"id": ..., "text": ...}} objects with {wanted}, or label the '
                    f"relevant passages under reference.context_texts"
                )
            keys.append(found)
        else:
            if not has_text(chunk):
                raise ValueError(
                    f"context chunk {rank} holds no passage to match {labels.source} against"
                )
            keys.append(normalize(chunk_text(chunk)))
    return keys


def gains(keys: list[str], labels: Labels) -> npt.NDArray[np.float64]:
    """The gain at each rank: the chunk's grade, 0 when unlisted or already retrieved."""
    seen: set[str] = set()
    out = np.zeros(len(keys), dtype=np.float64)
    for i, key in enumerate(keys):
        if key not in seen:
            out[i] = labels.grades.get(key, 0.0)
            seen.add(key)
    return out
