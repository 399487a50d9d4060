"""Read a classification record: the true label, the predicted label and class probabilities.

``output`` is a label (text or a JSON scalar), a JSON object ``{"label": …, "probabilities":
{label: p}}`` (also as text), or a tabular row; ``reference`` is the true label. Labels are
compared as strings: JSON ``1`` and text ``"1"`` are the same label.
"""

from __future__ import annotations

import contextlib
from typing import Any

import orjson

from evalsi.core import Content, Record
from evalsi.evaluators import Skip

Mapped = tuple[str, str | None, dict[str, float] | None]
"""(true label, predicted label or None, probabilities or None) for one record."""


def label_of(value: Any) -> str:
    """A JSON scalar as a label string (``1``, ``1.0`` and ``"1"`` are all ``"1"``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    raise ValueError(f"a label must be a string or a number, got {type(value).__name__}")


def _probabilities(raw: Any) -> dict[str, float] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        raise ValueError("'probabilities' must be a non-empty object {label: probability}")
    out: dict[str, float] = {}
    for key, p in raw.items():
        if isinstance(p, bool) or not isinstance(p, (int, float)):
            raise ValueError(f"probability of {key!r} must be a number, got {type(p).__name__}")
        out[str(key)] = float(p)
    return out


def read_output(content: Content) -> tuple[str | None, dict[str, float] | None]:
    """The predicted label and probabilities an output carries (either may be None)."""
    if content.kind == "row":
        row = content.row
        assert row is not None
        probs = dict(row.probabilities) or None
        label = None if row.prediction is None else label_of(row.prediction)
        return label, probs
    value: Any = content.json if content.kind == "json" else content.as_text()
    if isinstance(value, str) and value.startswith("{"):
        with contextlib.suppress(orjson.JSONDecodeError):  # a label may start with a brace
            value = orjson.loads(value)
    if isinstance(value, dict):
        probs = _probabilities(value.get("probabilities"))
        raw = value.get("label")
        return (None if raw is None else label_of(raw)), probs
    return label_of(value), None


def read_truth(content: Content) -> str:
    if content.kind == "json":
        return label_of(content.json)
    if content.kind == "row":
        row = content.row
        assert row is not None
        return label_of(row.prediction)
    return content.as_text()


def map_record(record: Record, *, needs_probs: bool) -> Mapped:
    """What one record gives a metric; Skip when it lacks what the metric needs."""
    assert record.output is not None
    assert record.reference is not None
    label, probs = read_output(record.output)
    truth = read_truth(record.reference)
    if needs_probs:
        if probs is None:
            raise Skip("output has no probabilities (this metric needs {'probabilities': …})")
        return truth, label, probs
    if label is None and probs is None:
        raise Skip("output has no label and no probabilities")
    return truth, label, probs  # a missing label is the argmax, taken in reduce()
