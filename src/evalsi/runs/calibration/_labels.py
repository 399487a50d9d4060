"""The human labels a judge is calibrated against: reading them, and every way they can be bad.

A labels file is a dataset (JSONL, JSON, CSV or Parquet, read by ``evalsi.datasets``) whose
records also carry the humans' verdict, as ``label`` (one rater) or ``labels`` (a mapping of
rater name to value; a missing or null value means that rater did not rate the record)::

    {"id": "q1", "input": "2+2?", "output": "4", "reference": "4", "label": true}
    {"id": "q2", "input": "...", "output": "...", "labels": {"ann": 4, "bo": 5, "cy": null}}

Every label in a file is of one kind: pass/fail (``true``/``false``), a category (a string)
or a number. Anything else stops before the judge is asked anything, with the file, the line
and the field in the message (``DatasetError``), since a calibration on half-read labels would
mislead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from evalsi.core import DatasetError, Record
from evalsi.datasets import FieldMap, open_dataset

LabelKind = Literal["passed", "label", "number"]
LabelValue = bool | str | float

KIND_NAMES: dict[LabelKind, str] = {
    "passed": "a pass/fail label (true/false)",
    "label": "a category (a string)",
    "number": "a number",
}

KIND_PLURALS: dict[LabelKind, str] = {
    "passed": "pass/fail labels (true/false)",
    "label": "categories (strings)",
    "number": "numbers",
}

SINGLE_RATER = "label"
"""The rater name of a record's ``label`` field (several raters use ``labels``)."""

_HINT = (
    'each record needs "label": true/false, a string or a number, or "labels": {"rater": value, '
    "...}; see docs/guides/calibration.md"
)


@dataclass(slots=True)
class LabelledRecord:
    """A record to show the judge and what the humans said about it."""

    record: Record
    line: int
    ratings: dict[str, LabelValue]


@dataclass(slots=True)
class Labels:
    """A whole labels file: its records in order, who rated, and the kind of label."""

    source: str
    version: str | None
    items: list[LabelledRecord]
    raters: list[str]
    kind: LabelKind

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "version": self.version,
            "records": len(self.items),
            "raters": list(self.raters),
            "kind": self.kind,
        }


def _kind_of(value: Any) -> LabelKind | None:
    if isinstance(value, bool):
        return "passed"
    if isinstance(value, str):
        return "label"
    if isinstance(value, (int, float)):
        return "number"
    return None


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.kind: LabelKind | None = None
        self.kind_line = 0
        self.raters: dict[str, None] = {}

    def error(self, line: int, field: str, problem: str) -> DatasetError:
        return DatasetError(f"field {field!r}: {problem}", path=self.source, line=line, hint=_HINT)

    def value(self, raw: Any, line: int, field: str) -> LabelValue:
        kind = _kind_of(raw)
        if kind is None:
            shown = "an object" if isinstance(raw, dict) else type(raw).__name__
            if isinstance(raw, list):
                shown = "a list"
            raise self.error(line, field, f"expected true/false, a string or a number, got {shown}")
        if kind == "number" and not math.isfinite(raw):
            raise self.error(line, field, f"expected a finite number, got {raw}")
        if kind == "label" and not raw.strip():
            raise self.error(line, field, "an empty string is not a label")
        if self.kind is None:
            self.kind, self.kind_line = kind, line
        elif kind != self.kind:
            raise self.error(
                line,
                field,
                f"{KIND_NAMES[kind]}, but line {self.kind_line} gave {KIND_NAMES[self.kind]}: "
                "every label in a file must be of one kind",
            )
        return float(raw) if kind == "number" else raw

    def ratings(self, record: Record, line: int) -> dict[str, LabelValue]:
        meta = record.metadata
        has_one, has_many = "label" in meta, "labels" in meta
        if has_one and has_many:
            raise self.error(line, "labels", "give either label (one rater) or labels, not both")
        if has_one:
            if meta["label"] is None:
                raise self.error(line, "label", "is null; a record needs a label")
            self.raters.setdefault(SINGLE_RATER)
            return {SINGLE_RATER: self.value(meta["label"], line, "label")}
        if not has_many:
            raise DatasetError(
                "no human label: the record has neither 'label' nor 'labels'",
                path=self.source,
                line=line,
                hint=_HINT,
            )
        given = meta["labels"]
        if not isinstance(given, dict):
            raise self.error(line, "labels", "expected an object of rater name -> value")
        out: dict[str, LabelValue] = {}
        for rater, raw in given.items():
            if raw is None:
                continue  # this rater did not rate this record
            name = str(rater).strip()
            if not name:
                raise self.error(line, "labels", "a rater name must not be empty")
            out[name] = self.value(raw, line, f"labels.{name}")
            self.raters.setdefault(name)
        if not out:
            raise self.error(line, "labels", "no rater gave a value")
        return out


_TRUTH = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
_TRUTH |= {"pass": True, "fail": False}


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _truth(value: Any) -> bool:
    return _TRUTH[str(value).strip().lower()]


def coerce_labels(labels: Labels, kind: LabelKind) -> bool:
    """Read the labels as ``kind`` where that is unambiguous; False when they cannot be.

    0/1 numbers are pass/fail; text (every CSV cell is text) is pass/fail when every value is
    true/false, 1/0, yes/no or pass/fail, and numbers when every value is a finite number.
    """
    if labels.kind == kind:
        return True
    values = [v for item in labels.items for v in item.ratings.values()]
    convert: Callable[[Any], LabelValue] | None = None
    text = [str(v).strip().lower() for v in values] if labels.kind == "label" else []
    if kind == "passed" and labels.kind == "number" and all(v in (0.0, 1.0) for v in values):
        convert = bool
    elif kind == "passed" and text and all(t in _TRUTH for t in text):
        convert = _truth
    elif kind == "number" and text and all(_number(t) is not None for t in text):
        convert = float
    if convert is None:
        return False
    for item in labels.items:
        item.ratings = {k: convert(v) for k, v in item.ratings.items()}
    labels.kind = kind
    return True


def _field(record: Record, dotted: str) -> Any:
    value: Any = record
    for part in dotted.split("."):
        value = getattr(value, part, None)
    return value


def read_labels(
    data: Any, *, fields: FieldMap | None = None, requires: Sequence[str] = ()
) -> Labels:
    """Read and check every labelled record (in memory: labels files are small).

    ``requires`` are the record fields the judge evaluator needs (``output``, ``reference``);
    a record without one is an error here rather than a silently skipped record.

    Raises:
        DatasetError: A malformed row, a missing or bad label, labels of mixed kinds, a record
            without a field the judge needs, or no records at all.
    """
    dataset = open_dataset(data, fields=fields, on_bad_record="fail")
    reader = _Reader(dataset.name)
    items: list[LabelledRecord] = []
    try:
        for batch in dataset.iter_batches(1024):
            for record in batch:
                line = (record.provenance.line if record.provenance else 0) or len(items) + 1
                for name in requires:
                    if _field(record, name) is None:
                        raise reader.error(line, name, "missing, and the judge evaluator needs it")
                items.append(LabelledRecord(record, line, reader.ratings(record, line)))
    except DatasetError as e:
        if e.hint and "--on-bad-record" in e.hint:  # a flag of evalsi eval, not of calibrate
            e.hint = "fix that line: a calibration reads every label, it skips none"
        raise
    if not items or reader.kind is None:
        raise DatasetError("no labelled records", path=dataset.name, hint=_HINT)
    return Labels(dataset.name, dataset.version, items, list(reader.raters), reader.kind)


__all__ = [
    "KIND_NAMES",
    "KIND_PLURALS",
    "SINGLE_RATER",
    "LabelKind",
    "LabelValue",
    "LabelledRecord",
    "Labels",
    "coerce_labels",
    "read_labels",
]
