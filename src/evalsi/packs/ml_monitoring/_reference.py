"""The reference (baseline) sample of a drift evaluator, read once when it is bound.

The evaluated data is the current sample; the reference is a dataset file (any format
``evalsi.datasets`` reads, or an ``hf://`` URI) named by the ``baseline`` param. It is read
at bind time, so a missing or malformed baseline stops the run before any work, and it stays
fixed: the reference fixes each feature's type and bins; bootstrap resampling touches only the
current rows.

A feature is numerical when every non-missing reference value is a number (or text spelling
one) and the ``categorical`` param does not name it; otherwise it is categorical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from evalsi.core import DatasetError, ParamError, UserError
from evalsi.datasets import open_dataset, param_file
from evalsi.packs.ml_monitoring._base import F64
from evalsi.packs.ml_monitoring._fields import as_number, category_of, is_missing, read

Kind = Literal["numerical", "categorical", "empty"]


@dataclass(frozen=True, slots=True)
class Column:
    """One feature of the reference: its type and its values (sorted numbers, or counts)."""

    name: str
    kind: Kind
    numbers: F64
    categories: tuple[str, ...]
    counts: F64
    missing: int

    @property
    def size(self) -> int:
        """Non-missing reference values."""
        return int(self.numbers.size if self.kind == "numerical" else self.counts.sum())


@dataclass(frozen=True, slots=True)
class Reference:
    source: str
    version: str | None
    records: int
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def describe(self) -> dict[str, object]:
        return {"source": self.source, "version": self.version, "records": self.records}


def load_reference(
    metric: str, baseline: str, features: list[str] | None, categorical: list[str] | None
) -> Reference:
    """Read the baseline dataset into per-feature columns (raises UserError on bad input)."""
    if not baseline.strip():
        raise ParamError(f"{metric}: param 'baseline' is empty; give the reference dataset path")
    try:
        dataset = open_dataset(param_file(baseline, what=f"{metric}: param 'baseline'"))
        rows = [read(record, features) for record in dataset]
    except DatasetError as e:  # name the param: the file is not the one given to --data
        hint = e.hint
        if hint and "--on-bad-record" in hint:  # that flag is for --data; a baseline is whole
            hint = "fix that row of the baseline file"
        raise UserError(f"{metric}: param 'baseline': {e.message}", hint=hint) from e
    if not rows:
        raise UserError(f"{metric}: the baseline {baseline} holds no records")
    names = features if features is not None else list(dict.fromkeys(k for r in rows for k in r))
    forced = set(categorical or ())
    unknown = sorted(forced - set(names))
    if unknown:
        raise ParamError(
            f"{metric}: param 'categorical' names {', '.join(map(repr, unknown))}, "
            f"not among the features ({', '.join(names[:10])}{', …' if len(names) > 10 else ''})"
        )
    columns = []
    for name in names:
        column = _column(name, [row.get(name) for row in rows], name in forced)
        if column.kind == "empty" and features is not None:
            raise UserError(
                f"{metric}: feature {name!r} has no value in the baseline {baseline}",
                hint="check the name; metadata.<key> reads a metadata key, input.<key> an "
                "input key",
            )
        columns.append(column)
    if not columns:
        raise UserError(
            f"{metric}: the baseline {baseline} has no features (no input objects, no metadata)",
            hint="give each record an input object of features, or name them with param features",
        )
    return Reference(baseline, dataset.version, len(rows), tuple(columns))


def _column(name: str, values: list[object], forced: bool) -> Column:
    present = [v for v in values if not is_missing(v)]
    missing = len(values) - len(present)
    empty = np.zeros(0, dtype=np.float64)
    if not present:
        return Column(name, "empty", empty, (), empty, missing)
    numbers = [as_number(v) for v in present]
    if not forced and all(x is not None for x in numbers):
        return Column(
            name, "numerical", np.sort(np.array(numbers, dtype=np.float64)), (), empty, missing
        )
    cats, counts = np.unique(
        np.array([category_of(v) for v in present], dtype=str), return_counts=True
    )
    return Column(
        name, "categorical", empty, tuple(str(c) for c in cats), counts.astype(np.float64), missing
    )
