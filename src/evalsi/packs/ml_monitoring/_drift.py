"""Drift between the reference (the ``baseline`` dataset) and the current data, per feature.

- ``psi``: population stability index over the reference's quantile bins (see ``_bins``) or
  the categories; a feature drifts when PSI >= ``threshold`` (0.2).
- ``js-distance``: Jensen-Shannon distance, base 2 (0..1), over the same bins; drifts when
  >= ``threshold`` (0.1).
- ``ks`` (module ``_ks``): the two-sample Kolmogorov-Smirnov test on numerical features.

Each reports its largest per-feature value as the main number, ``drifted-share`` (share of
judged features that drift), ``no-drift`` (passed when none does), one number per feature and
a structured ``detail``. Missing values are left out of both samples and counted; text in a
numerical feature is left out and counted as ``non_numeric``.

Bootstrap: the weighted protocol with the reference fixed, so an interval reflects the
sampling noise of the current rows only. A divergence cannot go below 0, so near "no drift"
the interval sits above the point value: judge drift on the value, read the interval as its
noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from evalsi.core import Record, Score
from evalsi.evaluators import Skip, WeightedReduce
from evalsi.packs._declare import check_at_least
from evalsi.packs.ml_monitoring._base import (
    F64,
    Bools,
    Ints,
    check_range,
    count,
    per_name,
    weights_of,
)
from evalsi.packs.ml_monitoring._bins import Bins, js_distance, psi, quantile_bins
from evalsi.packs.ml_monitoring._fields import (
    ABSENT,
    as_numbers,
    category_of,
    check_names,
    is_missing,
    lookup,
)
from evalsi.packs.ml_monitoring._reference import Column, Reference, load_reference

Values = tuple[Any, ...]
"""One current record: the raw value of each feature, in the reference's feature order."""


class DriftBase:
    """Reads the baseline at bind time; map() picks the same features from current records."""

    metric: ClassVar[str] = ""
    reference: Reference

    def _setup(
        self, baseline: str, features: list[str] | None, categorical: list[str] | None
    ) -> None:
        features = check_names(self.metric, "features", features)
        categorical = check_names(self.metric, "categorical", categorical)
        self.reference = load_reference(self.metric, baseline, features, categorical)

    def map(self, record: Record) -> Values:
        values = [lookup(record, name, ABSENT) for name in self.reference.names]
        if all(v is ABSENT for v in values):
            raise Skip("record has none of the features of the baseline")
        return tuple(None if v is ABSENT else v for v in values)

    def _scores(self, values: dict[str, float], detail: dict[str, Any], rule: str) -> list[Score]:
        features = detail["features"]
        if not values:
            reasons = "; ".join(f"{k}: {v['reason']}" for k, v in features.items())
            raise ValueError(f"no feature could be compared ({reasons})")
        worst = max(values, key=values.__getitem__)
        drifted = [k for k, v in features.items() if v["drifted"]]
        skipped = [k for k, v in features.items() if not v["judged"]]
        text = f"{len(drifted)} of {len(values)} features drifted ({rule})"
        text += f": {', '.join(drifted)}" if drifted else ""
        text += f"; largest {values[worst]:.4g} ({worst})"
        text += f"; not judged: {', '.join(skipped)}" if skipped else ""
        return [
            Score(name=self.metric, number=values[worst], explanation=text),
            Score(name="drifted-share", number=len(drifted) / len(values)),
            Score(name="no-drift", passed=not drifted),
            *per_name(self.metric, values),
            Score(name="detail", structured=detail),
        ]

    def _entry(
        self,
        detail: dict[str, Any],
        column: Column,
        w: F64,
        missing: Bools,
        invalid: Bools,
        current: float,
        *extra: str,
    ) -> dict[str, Any]:
        """A feature's detail with every key present, the reason set when it cannot be judged;
        ``extra`` keys (``p_value``) follow ``value``."""
        entry: dict[str, Any] = {"type": column.kind, "judged": False, "value": None}
        entry.update(dict.fromkeys(extra))
        reason = ""
        if column.kind == "empty":
            reason = "no values in the reference"
        elif current == 0:
            reason = "no values in the current data"
        entry.update(
            drifted=False,
            reason=reason,
            reference=column.size,
            reference_missing=column.missing,
            current=count(current),
            missing=count(float(w[missing].sum())),
            non_numeric=count(float(w[invalid].sum())),
        )
        detail["features"][column.name] = entry
        return entry

    def _detail(self, **method: Any) -> dict[str, Any]:
        return {"baseline": self.reference.describe(), **method, "features": {}}


@dataclass(frozen=True, slots=True)
class _Current:
    """One feature of the current rows, binned once: the bin (or category) of each row."""

    column: Column
    codes: Ints  # -1: missing, or not a number in a numerical feature
    missing: Bools
    invalid: Bools
    reference: F64  # the reference's share per bin (0 for categories new in the current data)
    labels: tuple[str, ...]  # categorical: the category of each bin
    bins: Bins | None


class _Binned(DriftBase, WeightedReduce[list[_Current], list[Score]]):
    """PSI and JS: the same bins, a different divergence; weighted for the bootstrap."""

    bins: int = 10
    threshold: float = 0.0
    binned: dict[str, Bins]

    def _bin_reference(self) -> None:
        self.binned = {
            c.name: quantile_bins(c.numbers, self.bins)
            for c in self.reference.columns
            if c.kind == "numerical"
        }

    def divergence(self, reference: F64, current: F64) -> float:
        raise NotImplementedError

    def method(self) -> dict[str, Any]:
        return {"bins": self.bins, "threshold": self.threshold}

    def prepare(self, values: Sequence[Values]) -> list[_Current]:
        out = []
        for j, column in enumerate(self.reference.columns):
            raw = [v[j] for v in values]
            missing = np.array([is_missing(v) for v in raw], dtype=bool)
            codes = np.full(len(raw), -1, dtype=np.intp)
            invalid = np.zeros(len(raw), dtype=bool)
            if column.kind == "numerical":
                bins = self.binned[column.name]
                x = as_numbers(raw)
                ok = ~np.isnan(x)
                invalid = ~missing & ~ok
                codes[ok] = bins.assign(x[ok])
                out.append(_Current(column, codes, missing, invalid, bins.reference, (), bins))
                continue
            if column.kind == "empty":
                out.append(_Current(column, codes, missing, invalid, np.zeros(0), (), None))
                continue
            cats = [None if m else category_of(v) for v, m in zip(raw, missing, strict=True)]
            known = set(column.categories)
            labels = column.categories + tuple(sorted({c for c in cats if c is not None} - known))
            index = {c: i for i, c in enumerate(labels)}
            codes = np.array([-1 if c is None else index[c] for c in cats], dtype=np.intp)
            share = np.zeros(len(labels))
            share[: len(column.categories)] = column.counts / column.counts.sum()
            out.append(_Current(column, codes, missing, invalid, share, labels, None))
        return out

    def reduce_weighted(self, prepared: list[_Current], weights: Any) -> list[Score]:
        n = int(prepared[0].codes.size) if prepared else 0
        w = weights_of(weights, n)
        found: dict[str, float] = {}
        detail = self._detail(**self.method())
        for cur in prepared:
            column = cur.column
            valid = cur.codes >= 0
            counts = np.bincount(cur.codes[valid], weights=w[valid], minlength=cur.reference.size)
            total = float(counts.sum())
            entry = self._entry(detail, column, w, cur.missing, cur.invalid, total)
            if entry["reason"]:
                continue
            value = self.divergence(cur.reference, counts / total)
            found[column.name] = value
            entry.update(judged=True, value=value, drifted=value >= self.threshold)
            if cur.bins is not None:
                entry["bins"] = cur.bins.size
                entry["edges"] = cur.bins.edges.tolist()
                if cur.bins.collapsed:
                    entry["collapsed"] = True  # below / equal to / above one reference value
            else:
                seen = (cur.reference > 0) | (counts > 0)
                entry["categories"] = int(seen.sum())
                fresh = (counts > 0) & (cur.reference == 0)
                entry["new_categories"] = [cur.labels[i] for i in np.flatnonzero(fresh)[:20]]
        return self._scores(found, detail, self.rule())

    def rule(self) -> str:
        return f"{self.metric} >= {self.threshold:g}"


class Psi(_Binned):
    """Population stability index per feature between the baseline and the current data."""

    metric: ClassVar[str] = "psi"

    def __init__(
        self,
        *,
        baseline: str,
        features: list[str] | None = None,
        categorical: list[str] | None = None,
        bins: int = 10,
        epsilon: float = 1e-4,
        threshold: float = 0.2,
    ) -> None:
        check_at_least(self.metric, "bins", bins, 2)
        check_range(self.metric, "epsilon", epsilon, 0.0, 1.0)
        check_range(self.metric, "threshold", threshold, 0.0, float("inf"))
        self.bins, self.epsilon, self.threshold = bins, epsilon, threshold
        self._setup(baseline, features, categorical)
        self._bin_reference()

    def method(self) -> dict[str, Any]:
        return {**super().method(), "epsilon": self.epsilon}

    def divergence(self, reference: F64, current: F64) -> float:
        return psi(reference, current, self.epsilon)


class JsDistance(_Binned):
    """Jensen-Shannon distance (base 2) per feature between the baseline and the current data."""

    metric: ClassVar[str] = "js-distance"

    def __init__(
        self,
        *,
        baseline: str,
        features: list[str] | None = None,
        categorical: list[str] | None = None,
        bins: int = 10,
        threshold: float = 0.1,
    ) -> None:
        check_at_least(self.metric, "bins", bins, 2)
        check_range(self.metric, "threshold", threshold, 0.0, 1.0)
        self.bins, self.threshold = bins, threshold
        self._setup(baseline, features, categorical)
        self._bin_reference()

    def divergence(self, reference: F64, current: F64) -> float:
        return js_distance(reference, current)
