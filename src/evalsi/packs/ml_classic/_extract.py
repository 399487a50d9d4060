"""Read a classification record: the true label, the predicted label and class probabilities.

``output`` is a label (text or a JSON scalar), a JSON object ``{"label": …, "probabilities":
{label: p}}`` (also as text), or a tabular row; ``reference`` is the true label. Labels are
compared as strings: JSON ``1`` and text ``"1"`` are the same label.

map() runs once per record and evaluator, so it is the hot path: the common shapes (a JSON
object, a plain label, a row) are recognised with a few type tests and their values returned
as they are; turning labels into strings and probabilities into floats happens once, over whole
arrays, in prepare() (``_arrays``). Anything unusual takes the careful path below.
"""

from __future__ import annotations

import contextlib
import numbers
from typing import Any

import numpy as np
import orjson

from evalsi.core import Content, Record, TabularRow
from evalsi.evaluators import Skip

SCALARS = frozenset((str, int, float, bool))
"""Types of a raw label map() may return as is (prepare() makes them strings)."""

LabelMapped = tuple[Any, Any, Any]
"""(true label, predicted label or None, probabilities or None), labels raw JSON scalars."""

ProbMapped = tuple[Any, Any]
"""(true label, probabilities {label: p}), the label a raw JSON scalar."""

NO_PROBS = "output has no probabilities (this metric needs {'probabilities': …})"


def label_of(value: Any) -> str:
    """A JSON scalar as a label string (``1``, ``1.0`` and ``"1"`` are all ``"1"``); numpy
    scalars from in-memory data count as the numbers they hold."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return str(int(number)) if number.is_integer() else str(number)
    raise ValueError(f"a label must be a string or a number, got {type(value).__name__}")


def _probabilities(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        raise ValueError("'probabilities' must be a non-empty object {label: probability}")
    for key, p in raw.items():
        if not isinstance(p, numbers.Real):  # true / false read as 1 / 0, as in prepare()
            raise ValueError(f"probability of {key!r} must be a number, got {type(p).__name__}")
    return raw


def read_output(content: Content) -> tuple[str | None, dict[str, Any] | None]:
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


def read_truth(content: Content) -> Any:
    """The true label: a raw JSON scalar, or the label string of any other content."""
    value = content.value
    if value.__class__ in SCALARS:
        return value
    if content.kind == "json":
        return label_of(value)  # an object, a list or null: not a label
    if content.kind == "row":
        row = content.row
        assert row is not None
        return label_of(row.prediction)
    return content.as_text()


def map_labels(record: Record) -> LabelMapped:
    """What a label metric needs from one record; Skip when it has neither label nor probs.

    The runner only calls it on records with an output and a reference (``requires``).
    """
    truth = record.reference.value  # type: ignore[union-attr]
    if truth.__class__ not in SCALARS:
        truth = read_truth(record.reference)  # type: ignore[arg-type]
    out = record.output.value  # type: ignore[union-attr]
    kind = out.__class__
    if kind is dict:
        label = out.get("label")
        if label.__class__ in SCALARS:
            return truth, label, out.get("probabilities")
    elif kind is str:
        if out[:1] != "{":
            return truth, out, None
    elif kind in SCALARS:
        return truth, out, None
    label_text, probs = read_output(record.output)  # type: ignore[arg-type]
    if label_text is None and probs is None:
        raise Skip("output has no label and no probabilities")
    return truth, label_text, probs  # a missing label is the argmax, taken in prepare()


def map_probs(record: Record) -> ProbMapped:
    """What a probability metric needs from one record; Skip when it has no probabilities."""
    truth = record.reference.value  # type: ignore[union-attr]
    if truth.__class__ not in SCALARS:
        truth = read_truth(record.reference)  # type: ignore[arg-type]
    out = record.output.value  # type: ignore[union-attr]
    kind = out.__class__
    if kind is dict:
        probs = out.get("probabilities")
        if probs.__class__ is dict and probs:
            return truth, probs
    elif kind is TabularRow and out.probabilities:
        return truth, out.probabilities
    _, probs = read_output(record.output)  # type: ignore[arg-type]
    if probs is None:
        raise Skip(NO_PROBS)
    return truth, probs
