"""Data quality over the whole dataset: missing values, type violations, out-of-range values.

Fields are named as in the rest of the pack (input keys, ``metadata.<key>``). Each evaluator
reports a rate per field (``missing-rate[age]``…), the worst field's rate as its main number
(so a gate such as ``metric('missing-rate').mean <= 0.05`` holds for every field) and a
structured ``detail``. All three follow the weighted bootstrap protocol: every record is
resampled.

- ``missing-rate``: share of records where the field is missing (absent, null, NaN or blank
  text), over all records. Without ``features`` the fields are every key seen.
- ``type-violations``: share of a field's non-missing values that are not of the type the
  ``types`` param expects (number, integer, string, boolean, object, array). With
  ``strict=false`` text spelling a number counts as a number (an integer when whole), and
  ``true``/``false`` text as a boolean: CSV cells are always text.
- ``out-of-range``: share of a field's numeric values (numbers, or text spelling one) outside
  the inclusive ``[low, high]`` of the ``bounds`` param (null: unbounded on that side).
  Missing and non-numeric values are not counted here (type-violations does that).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from evalsi.core import ParamError, Record, Score
from evalsi.evaluators import WeightedReduce
from evalsi.packs.ml_monitoring._base import (
    F64,
    Bools,
    Ints,
    count,
    per_name,
    weights_of,
)
from evalsi.packs.ml_monitoring._fields import (
    as_number,
    as_numbers,
    check_names,
    is_missing,
    read,
    shown,
)

Row = dict[str, Any]

TYPES = ("number", "integer", "string", "boolean", "object", "array")


@dataclass(frozen=True, slots=True)
class Table:
    """The mapped records as boolean columns, one per field: what each metric counts."""

    names: list[str]
    slot: Ints  # (records, fields): where the record holds the key among its keys, -1: absent
    flags: dict[str, Bools]  # kind of flag → (records, fields)
    numbers: F64  # (records, fields), NaN where not a number (out-of-range only)
    shown: list[list[str]]  # per field, the display of each record's value (type-violations)


def _column(rows: Sequence[Row], name: str, fn: Callable[[Any], bool]) -> Bools:
    return np.fromiter((fn(r.get(name)) for r in rows), dtype=bool, count=len(rows))


def _named(n: int, fields: int) -> Ints:
    """Slots of named fields: every record counts for every field, in the given order."""
    return np.zeros((n, fields), dtype=np.intp)


def _stack(columns: list[Bools], n: int) -> Bools:
    return np.stack(columns, axis=1) if columns else np.zeros((n, 0), dtype=bool)


class _Quality(WeightedReduce[Table, list[Score]]):
    metric: ClassVar[str] = ""
    names: list[str] | None = None

    def map(self, record: Record) -> Row:
        return read(record, self.names)

    def _scores(self, rates: dict[str, float], detail: dict[str, Any], what: str) -> list[Score]:
        if not rates:
            raise ValueError(
                "no fields to check: records have no input object and no metadata "
                "(name the fields with param features)"
            )
        worst = max(rates, key=rates.__getitem__)
        text = f"worst field {worst!r}: {rates[worst]:.4g} {what}; {len(rates)} fields checked"
        return [
            Score(name=self.metric, number=rates[worst], explanation=text),
            *per_name(self.metric, rates),
            Score(name="detail", structured=detail),
        ]


class MissingRate(_Quality):
    """Share of records missing each field (absent, null, NaN or blank); the worst field's."""

    metric: ClassVar[str] = "missing-rate"

    def __init__(self, *, features: list[str] | None = None) -> None:
        self.names = check_names(self.metric, "features", features)

    def prepare(self, values: Sequence[Row]) -> Table:
        names = self.names
        if names is None:
            names = list(dict.fromkeys(k for row in values for k in row))
            index = {k: j for j, k in enumerate(names)}
            slot = np.full((len(values), len(names)), -1, dtype=np.intp)
            for i, row in enumerate(values):
                for s, k in enumerate(row):
                    slot[i, index[k]] = s
        else:
            slot = _named(len(values), len(names))
        missing = _stack([_column(values, k, is_missing) for k in names], len(values))
        return Table(names, slot, {"missing": missing}, np.zeros((0, 0)), [])

    def reduce_weighted(self, prepared: Table, weights: Any) -> list[Score]:
        n = prepared.slot.shape[0]
        w = weights_of(weights, n)
        total = float(w.sum())
        if total == 0:
            raise ValueError("no records to check")
        # fields in the order the drawn records first show them (what reduce() of the
        # resample would list); a field only undrawn records hold is left out
        held = (prepared.slot >= 0) & (w > 0)[:, None]
        first = np.where(held, np.arange(n)[:, None], n).min(axis=0)
        slot = prepared.slot[np.minimum(first, n - 1), np.arange(len(prepared.names))]
        missing = w @ prepared.flags["missing"]
        rates: dict[str, float] = {}
        fields: dict[str, Any] = {}
        for j in np.lexsort((slot, first)):
            name = prepared.names[j]
            if first[j] < n:
                rates[name] = float(missing[j] / total)
                fields[name] = {"missing": count(float(missing[j])), "rate": rates[name]}
        detail = {"records": count(total), "fields": fields}
        return self._scores(rates, detail, "missing")


def _conforms(expected: str, strict: bool) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if expected in ("number", "integer") and not isinstance(value, bool):
            if isinstance(value, (int, float)):
                return expected == "number" or float(value).is_integer()
            number = None if strict else as_number(value)
            return number is not None and (expected == "number" or number.is_integer())
        if expected == "boolean":
            if isinstance(value, bool):
                return True
            return not strict and isinstance(value, str) and value.strip().lower() in _BOOLS
        kind = {"string": str, "object": dict, "array": list}.get(expected)
        return kind is not None and isinstance(value, kind)

    return check


_BOOLS = ("true", "false")


class TypeViolations(_Quality):
    """Share of each field's non-missing values that are not of the expected type."""

    metric: ClassVar[str] = "type-violations"

    def __init__(self, *, types: dict[str, Any], strict: bool = True) -> None:
        if not types:
            raise ParamError(f"{self.metric}: param 'types' is empty; map fields to types")
        for name, expected in types.items():
            if expected not in TYPES:
                raise ParamError(
                    f"{self.metric}: param 'types' gives {name!r} the type {expected!r}; "
                    f"allowed: {', '.join(TYPES)}"
                )
        self.names = check_names(self.metric, "types", list(types))
        self.types: dict[str, str] = dict(types)
        self.strict = strict

    def prepare(self, values: Sequence[Row]) -> Table:
        names = list(self.types)
        checked = _stack(
            [_column(values, k, lambda v: not is_missing(v)) for k in names], len(values)
        )
        bad = _stack(
            [_column(values, k, _conforms(self.types[k], self.strict)) for k in names], len(values)
        )
        bad = checked & ~bad
        show = [
            [shown(r.get(k)) if bad[i, j] else "" for i, r in enumerate(values)]
            for j, k in enumerate(names)
        ]
        return Table(
            names,
            _named(len(values), len(names)),
            {"checked": checked, "bad": bad},
            np.zeros((0, 0)),
            show,
        )

    def reduce_weighted(self, prepared: Table, weights: Any) -> list[Score]:
        w = weights_of(weights, prepared.slot.shape[0])
        checked = w @ prepared.flags["checked"]
        bad = w @ prepared.flags["bad"]
        rates: dict[str, float] = {}
        fields: dict[str, Any] = {}
        drawn = w > 0
        for j, name in enumerate(prepared.names):
            rates[name] = float(bad[j] / checked[j]) if checked[j] > 0 else 0.0
            rows = np.flatnonzero(prepared.flags["bad"][:, j] & drawn)
            examples = list(dict.fromkeys(prepared.shown[j][i] for i in rows[:50]))[:3]
            fields[name] = {
                "expected": self.types[name],
                "checked": count(float(checked[j])),
                "violations": count(float(bad[j])),
                "rate": rates[name],
                "examples": examples,
            }
        detail = {"strict": self.strict, "records": count(float(w.sum())), "fields": fields}
        return self._scores(rates, detail, "of its values of the wrong type")


Bounds = tuple[float, float]


def _bounds(metric: str, raw: dict[str, Any]) -> dict[str, Bounds]:
    if not raw:
        raise ParamError(f"{metric}: param 'bounds' is empty; map fields to [low, high]")
    out = {}
    for name, pair in raw.items():
        ok = isinstance(pair, (list, tuple)) and len(pair) == 2
        ends = list(pair) if ok else []
        for end in ends:
            if end is not None and (
                isinstance(end, bool) or not isinstance(end, (int, float)) or not math.isfinite(end)
            ):
                ok = False
        if not ok or ends == [None, None]:
            raise ParamError(
                f"{metric}: param 'bounds' gives {name!r} {pair!r}; expected [low, high] with "
                'numbers or null for an open side, for example {"age": [0, 120]}'
            )
        low = -math.inf if ends[0] is None else float(ends[0])
        high = math.inf if ends[1] is None else float(ends[1])
        if low > high:
            raise ParamError(f"{metric}: param 'bounds' gives {name!r} low {low:g} > high {high:g}")
        out[name] = (low, high)
    return out


class OutOfRange(_Quality):
    """Share of each field's numeric values outside its inclusive [low, high] bounds."""

    metric: ClassVar[str] = "out-of-range"

    def __init__(self, *, bounds: dict[str, Any]) -> None:
        self.bounds = _bounds(self.metric, bounds)
        self.names = check_names(self.metric, "bounds", list(self.bounds))

    def prepare(self, values: Sequence[Row]) -> Table:
        names = list(self.bounds)
        x = np.stack([as_numbers(r.get(k) for r in values) for k in names], axis=1)
        missing = _stack([_column(values, k, is_missing) for k in names], len(values))
        numeric = ~np.isnan(x)
        low = np.array([self.bounds[k][0] for k in names])
        high = np.array([self.bounds[k][1] for k in names])
        flags = {
            "numeric": numeric,
            "out": numeric & ((x < low) | (x > high)),
            "non_numeric": ~missing & ~numeric,
        }
        return Table(names, _named(len(values), len(names)), flags, x, [])

    def reduce_weighted(self, prepared: Table, weights: Any) -> list[Score]:
        w = weights_of(weights, prepared.slot.shape[0])
        flags = prepared.flags
        checked, out, other = (w @ flags[k] for k in ("numeric", "out", "non_numeric"))
        rates: dict[str, float] = {}
        fields: dict[str, Any] = {}
        drawn = (w > 0)[:, None] & flags["numeric"]
        for j, name in enumerate(prepared.names):
            rates[name] = float(out[j] / checked[j]) if checked[j] > 0 else 0.0
            seen = prepared.numbers[drawn[:, j], j]
            low, high = self.bounds[name]
            fields[name] = {
                "bounds": [None if math.isinf(low) else low, None if math.isinf(high) else high],
                "checked": count(float(checked[j])),
                "out_of_range": count(float(out[j])),
                "rate": rates[name],
                "non_numeric": count(float(other[j])),
                "min": float(seen.min()) if seen.size else None,
                "max": float(seen.max()) if seen.size else None,
            }
        detail = {"records": count(float(w.sum())), "fields": fields}
        return self._scores(rates, detail, "of its values out of range")
