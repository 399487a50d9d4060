"""Reading a run's dataset again, in step with its results, to recover what results do not store.

Results keep scores, not records: a report that slices by a metadata key or shows the input
and output of a failure reads the dataset the run read, from ``run.spec["data"]``, and joins it
by position (``seq``). That is only right when the file is still the one the run graded, so the
join checks the record ids on the way and the content hash (the dataset version) at the end;
anything that does not match turns into a ``problem`` and the report shows none of the joined
data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from evalsi.core import DatasetError, Record, UserError
from evalsi.datasets import FieldMap, open_dataset
from evalsi.store import RunInfo

_MEMORY = "<memory>"


def stored_version(run: RunInfo) -> str | None:
    """The dataset version (content hash) the run recorded, or None when it never finished."""
    for holder in (run.manifest, run.summary):
        dataset = (holder or {}).get("dataset") or {}
        version = dataset.get("version")
        if version:
            return str(version)
    return None


def dataset_source(run: RunInfo) -> str:
    dataset = (run.summary or {}).get("dataset") or {}
    return str(dataset.get("source") or run.spec.get("data") or "")


def _field_map(spec: dict[str, Any]) -> FieldMap:
    # Runs record their field map under "fields" when they know it; older ones did not, and
    # were read with the default map unless the user said otherwise (the id check below then
    # catches a different --id-field).
    fields = spec.get("fields")
    if not isinstance(fields, dict):
        return FieldMap()
    known = {"input", "output", "reference", "id", "context", "metadata", "usage", "trajectory"}
    return FieldMap(**{k: v for k, v in fields.items() if k in known})


class RecordJoin:
    """The run's dataset, walked forward as result positions (``seq``) increase.

    ``at(seq, record_id)`` returns the record at that position, or None once anything went
    wrong; ``finish()`` reads to the end and compares the content hash. ``problem`` says, in
    one sentence, why the joined data cannot be trusted (None while it can).
    """

    def __init__(self, run: RunInfo) -> None:
        self.source = dataset_source(run)
        self.expected = stored_version(run)
        self.problem: str | None = None
        self._records: Iterator[Record] | None = None
        self._dataset: Any = None
        self._pos = -1
        self._current: Record | None = None
        if not self.source or self.source == _MEMORY:
            self.problem = "the run read its records from memory, and results do not store them"
            return
        if self.expected is None:
            self.problem = (
                f"the run is {run.status} and recorded no dataset version, so the dataset "
                f"{self.source} cannot be checked against it"
            )
            return
        on_bad = run.spec.get("on_bad_record", "fail")
        try:
            self._dataset = open_dataset(
                self.source,
                fields=_field_map(run.spec),
                on_bad_record="skip" if on_bad == "skip" else "fail",
            )
        except UserError as e:
            self.problem = (
                f"the dataset {self.source} cannot be read from here ({e.message}); relative "
                "paths are resolved against the current directory"
            )
            return
        self._records = iter(self._dataset)

    @property
    def ok(self) -> bool:
        return self.problem is None

    def at(self, seq: int, record_id: str) -> Record | None:
        """The record at position ``seq`` (positions only move forward)."""
        if self.problem is not None or self._records is None:
            return None
        try:
            while self._pos < seq:
                self._current = next(self._records)
                self._pos += 1
        except StopIteration:
            self._changed(f"it has fewer records than the run ({self._pos + 1})")
            return None
        except DatasetError as e:
            self._changed(f"reading it again failed: {e.message}")
            return None
        record = self._current
        if record is None or record.id != record_id:
            got = "none" if record is None else repr(record.id)
            self._changed(f"record {seq + 1} has id {got} there but {record_id!r} in the run")
            return None
        return record

    def finish(self) -> None:
        """Read the rest of the dataset and compare its content hash with the stored one."""
        if self.problem is not None or self._records is None:
            return
        try:
            for _ in self._records:
                pass
        except DatasetError as e:
            self._changed(f"reading it again failed: {e.message}")
            return
        found = self._dataset.version
        if found != self.expected:
            self._changed(f"its version is now {found}, the run graded {self.expected}")

    def _changed(self, why: str) -> None:
        self.problem = f"the dataset {self.source} is not the one the run graded: {why}"
        self._records = None


def content_text(record: Record, field: str) -> str | None:
    """A record field as display text: chat messages one per line, JSON compact."""
    content = getattr(record, field)
    if content is None:
        return None
    if content.kind == "messages":
        lines = []
        for m in content.messages or []:
            text = m.content or ""
            calls = ", ".join(f"{c.name}({compact(c.arguments)})" for c in m.tool_calls)
            lines.append(f"{m.role}: {text}" + (f" [tool calls: {calls}]" if calls else ""))
        return "\n".join(lines)
    return str(content.as_text())


def compact(value: Any) -> str:
    """Compact JSON, or the value's ``str`` when it is not JSON."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def slice_value(record: Record, key: str) -> str:
    """The metadata value a record belongs to under ``--by KEY`` (dotted paths reach inside)."""
    meta = record.metadata
    value: Any
    if key in meta:
        value = meta[key]
    else:
        value = meta
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "(missing)"
    if isinstance(value, str):
        return value
    return compact(value)
