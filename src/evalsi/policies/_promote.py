"""Promotion: a trace's record becomes a row of a dataset, a regression case for offline runs.

``record_to_row`` writes the record in the shape ``open_dataset`` reads back (``id``, ``input``,
``output``, ``reference``, ``context``, ``usage``, ``trajectory``, ``metadata``), so
``evalsi eval --data promoted.jsonl`` grades exactly what the policy saw. Where rows go is the
``Promoter``'s business: the server appends them to a content-addressed dataset version.
"""

from __future__ import annotations

from typing import Any, Protocol

from evalsi.core import Record
from evalsi.datasets import record_to_row as dataset_row


class Promoter(Protocol):
    """Appends promoted rows to a dataset."""

    async def promote(self, project: str, dataset: str, row: dict[str, Any]) -> str | None:
        """Append ``row`` to ``dataset``; the new version, or None when the row (by its id) is
        already there."""
        ...


def record_to_row(record: Record, **extra_metadata: Any) -> dict[str, Any]:
    """The record as a dataset row (``evalsi.datasets.record_to_row``) with ``extra_metadata``
    added to its metadata (the policy that promoted it, the trace id)."""
    row = dataset_row(record)
    metadata = {**record.metadata, **extra_metadata}
    if metadata:
        row["metadata"] = metadata
    return row
