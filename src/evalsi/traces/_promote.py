"""Promotion: a trace's record becomes a row of a dataset, a regression case for offline runs.

``record_to_row`` writes the record in the shape ``open_dataset`` reads back (``id``, ``input``,
``output``, ``reference``, ``context``, ``usage``, ``trajectory``, ``metadata``), so
``evalsi eval --data promoted.jsonl`` grades exactly what the policy saw. Where rows go is the
``Promoter``'s business: the server appends them to a content-addressed dataset version.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Protocol

from evalsi.core import Record, Step, Usage


class Promoter(Protocol):
    """Appends promoted rows to a dataset."""

    async def promote(self, project: str, dataset: str, row: dict[str, Any]) -> str | None:
        """Append ``row`` to ``dataset``; the new version, or None when the row (by its id) is
        already there."""
        ...


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    return {
        f.name: getattr(usage, f.name) for f in fields(usage) if getattr(usage, f.name) is not None
    }


def _step(step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": step.kind}
    if step.name:
        out["name"] = step.name
    if step.input is not None:
        out["input"] = step.input
    if step.output is not None:
        out["output"] = step.output
    if step.tool_call is not None:
        call: dict[str, Any] = {"name": step.tool_call.name, "arguments": step.tool_call.arguments}
        if step.tool_call.id:
            call["id"] = step.tool_call.id
        out["tool_call"] = call
    if step.usage is not None:
        out["usage"] = usage_to_dict(step.usage)
    if step.error:
        out["error"] = step.error
    for key in ("start_time_unix_nano", "end_time_unix_nano"):
        if getattr(step, key):
            out[key] = getattr(step, key)
    if step.span_id:
        out["span_id"] = step.span_id
    return out


def record_to_row(record: Record, **extra_metadata: Any) -> dict[str, Any]:
    """The record as a dataset row (see the module docstring); ``extra_metadata`` is added to
    its metadata (the policy that promoted it, the trace id)."""
    row: dict[str, Any] = {"id": record.id}
    for name in ("input", "output", "reference"):
        content = getattr(record, name)
        if content is not None:
            row[name] = content.to_value()
    if record.context:
        row["context"] = [c.to_value() for c in record.context]
    if record.usage is not None:
        usage = usage_to_dict(record.usage)
        if usage:
            row["usage"] = usage
    if record.trajectory is not None and record.trajectory.steps:
        row["trajectory"] = [_step(s) for s in record.trajectory.steps]
    metadata = {**record.metadata, **extra_metadata}
    if metadata:
        row["metadata"] = metadata
    return row
