"""Read the features of a record and classify their values: missing, a number or a category.

One naming rule serves the whole pack (features, data-quality fields, the fairness group):

- ``metadata.<key>`` reads the record's metadata (a CSV or JSONL row's other columns land
  there);
- ``input.<key>`` reads a key of the input object (a JSON object, or a tabular row's
  ``features``);
- a bare ``<key>`` reads the input object's key when it has it, else the metadata key.

Without a list of names, a record's features are its input object's keys, or its metadata keys
when its input is not an object (a CSV file of feature columns, for example).

Missing means absent, ``null``, NaN or blank text (a CSV file has no other way to say it).
Text that spells a plain decimal number counts as that number, because CSV cells are text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from evalsi.core import ParamError, Record
from evalsi.packs._declare import clip

# ``\d+(?:\.\d*)?``, not ``\d+\.?\d*``: the same numbers, but the latter splits a run of
# digits between its two quantifiers every possible way before failing (a feature value of
# 8,000 digits and a letter took 3 s, 100,000 several minutes).
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_META = "metadata."
_INPUT = "input."


def input_object(record: Record) -> Mapping[str, Any] | None:
    """The record's input as a mapping of features, or None when it is not an object."""
    content = record.input
    if content is None:
        return None
    if content.kind == "json" and isinstance(content.value, dict):
        return content.value
    if content.kind == "row":
        return content.value.features  # type: ignore[no-any-return]
    return None


ABSENT: Any = object()
"""What ``lookup`` returns for a key the record does not have, when asked to tell."""


def lookup(record: Record, name: str, absent: Any = None) -> Any:
    """The raw value a name reads; ``absent`` (None by default) when the record lacks the key."""
    if name.startswith(_META):
        return record.metadata.get(name[len(_META) :], absent)
    obj = input_object(record)
    if name.startswith(_INPUT):
        return absent if obj is None else obj.get(name[len(_INPUT) :], absent)
    if obj is not None and name in obj:
        return obj[name]
    return record.metadata.get(name, absent)


def default_fields(record: Record) -> Mapping[str, Any]:
    """name → raw value of every feature the record has when no names are given."""
    obj = input_object(record)
    return obj if obj is not None else record.metadata


def read(record: Record, names: Iterable[str] | None) -> dict[str, Any]:
    """name → raw value: the named features (None where absent), else the record's own."""
    if names is None:
        return dict(default_fields(record))
    return {name: lookup(record, name) for name in names}


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str):
        return not value.strip()
    return False


def as_number(value: Any) -> float | None:
    """A finite number, from a JSON number or text spelling one; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text):
            number = float(text)
            return number if math.isfinite(number) else None
    return None


def as_numbers(values: Iterable[Any]) -> npt.NDArray[np.float64]:
    """``as_number`` of each value as floats, NaN where there is none."""
    found = map(as_number, values)
    return np.array([np.nan if x is None else x for x in found], dtype=np.float64)


def category_of(value: Any) -> str:
    """A value as a category name: ``1``, ``1.0`` and ``"1"`` are all ``"1"``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def check_names(metric: str, param: str, names: list[str] | None) -> list[str] | None:
    """A param listing feature names: non-empty, no blank or repeated names."""
    if names is None:
        return None
    if not names:
        raise ParamError(f"{metric}: param {param!r} is empty; leave it out to use every feature")
    seen: set[str] = set()
    for name in names:
        if not name.strip() or name in (_META, _INPUT):
            raise ParamError(f"{metric}: param {param!r} holds a blank name")
        if name in seen:
            raise ParamError(f"{metric}: param {param!r} names {name!r} twice")
        seen.add(name)
    return list(names)


def shown(value: Any, limit: int = 40) -> str:
    """A short display of a raw value for details and explanations."""
    text = value if isinstance(value, str) else category_of(value)
    return clip(repr(text) if isinstance(value, str) else text, limit)
