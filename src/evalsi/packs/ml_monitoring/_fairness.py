"""Fairness gaps between the groups of a record field (param ``group``, e.g. metadata.gender).

- ``demographic-parity-difference``: the largest gap between groups in the share of records
  predicted positive (fairlearn's ``demographic_parity_difference``, between groups).
- ``equalized-odds-difference``: the larger of the largest gap in true-positive rate and the
  largest gap in false-positive rate (fairlearn's ``equalized_odds_difference``, worst case).

Labels are read as in ml-classic: ``output`` is the predicted label (text, a JSON scalar,
``{"label": …}`` or a tabular row's prediction), ``reference`` the true label; labels compare
as strings. The positive label is the ``positive`` param, else ``"1"`` when present, else the
greatest label; every other label counts as negative. An output with probabilities but no
label is skipped: a gap depends on the threshold that turns scores into decisions, so make
that decision first. A record without the group field is skipped.

A rate a group cannot have (TPR without positive references, FPR without negatives) counts
as 0, as fairlearn does (``undefined="zero"``); ``undefined="exclude"`` leaves it out of the
gap instead. The detail names the groups concerned either way. Both follow the weighted
bootstrap protocol: every record is resampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from evalsi.core import ParamError, Record, Score
from evalsi.evaluators import Skip, WeightedReduce
from evalsi.packs._declare import check_choice
from evalsi.packs.ml_classic import label_of, read_output, read_truth
from evalsi.packs.ml_monitoring._base import F64, Bools, Ints, count, per_name, weights_of
from evalsi.packs.ml_monitoring._fields import category_of, is_missing, lookup

Mapped = tuple[str, str, str | None]
"""(group, predicted label, true label or None) of one record."""

Undefined = Literal["zero", "exclude"]


@dataclass(frozen=True, slots=True)
class Arrays:
    groups: tuple[str, ...]
    group: Ints
    labels: tuple[str, ...]
    pred: Ints
    truth: Ints  # -1 where the record has no reference


class _Fairness(WeightedReduce[Arrays, list[Score]]):
    metric: ClassVar[str] = ""

    def _setup(self, group: str, positive: str | None) -> None:
        if not group.strip():
            raise ParamError(
                f"{self.metric}: param 'group' is empty; name a field such as metadata.gender"
            )
        self.group = group
        self.positive = positive

    def map(self, record: Record) -> Mapped:
        raw = lookup(record, self.group)
        if is_missing(raw):
            raise Skip(f"record has no {self.group}")
        assert record.output is not None
        label, probs = read_output(record.output)
        if label is None:
            why = "probabilities but no predicted label" if probs else "no predicted label"
            raise Skip(
                f"output has {why}; fairness gaps compare decisions, so give the label "
                "your threshold chose"
            )
        truth = None if record.reference is None else label_of(read_truth(record.reference))
        return category_of(raw), label_of(label), truth

    def prepare(self, values: Sequence[Mapped]) -> Arrays:
        groups, group = np.unique(np.array([v[0] for v in values], dtype=str), return_inverse=True)
        truths = [v[2] for v in values]
        known = [v[1] for v in values] + [t for t in truths if t is not None]
        labels = sorted(set(known))
        index = {lab: i for i, lab in enumerate(labels)}
        pred = np.array([index[v[1]] for v in values], dtype=np.intp)
        truth = np.array([-1 if t is None else index[t] for t in truths], dtype=np.intp)
        return Arrays(
            tuple(str(g) for g in groups), group.astype(np.intp), tuple(labels), pred, truth
        )

    def _drawn(self, a: Arrays, weights: Any) -> tuple[F64, str]:
        """The weights, checked, and the positive label among the labels of the records they
        draw (see the module doc)."""
        w = weights_of(weights, a.pred.size)
        drawn = w > 0
        if not drawn.any():
            raise ValueError("no records to compare")
        if self.positive is not None:
            return w, self.positive
        codes = np.concatenate([a.pred[drawn], a.truth[drawn & (a.truth >= 0)]])
        present = [a.labels[i] for i in np.unique(codes)]
        return w, "1" if "1" in present else present[-1]

    def _is(self, a: Arrays, codes: Ints, label: str) -> Bools:
        if label not in a.labels:
            return np.zeros(codes.size, dtype=bool)
        out: Bools = codes == a.labels.index(label)
        return out

    def _sums(self, a: Arrays, w: F64, mask: Bools | None = None) -> F64:
        weights = w if mask is None else w * mask
        return np.bincount(a.group, weights=weights, minlength=len(a.groups)).astype(np.float64)


def _gap(rates: dict[str, float]) -> tuple[float, str]:
    if len(rates) < 2:
        return 0.0, "fewer than two groups"
    lo = min(rates, key=rates.__getitem__)
    hi = max(rates, key=rates.__getitem__)
    return rates[hi] - rates[lo], f"{hi!r} {rates[hi]:.4g} vs {lo!r} {rates[lo]:.4g}"


class DemographicParityDifference(_Fairness):
    """Largest gap between groups in the share of records predicted positive."""

    metric: ClassVar[str] = "demographic-parity-difference"

    def __init__(self, *, group: str, positive: str | None = None) -> None:
        self._setup(group, positive)

    def reduce_weighted(self, prepared: Arrays, weights: Any) -> list[Score]:
        a = prepared
        w, pos = self._drawn(a, weights)
        size = self._sums(a, w)
        chosen = self._sums(a, w, self._is(a, a.pred, pos))
        rates = {g: float(chosen[i] / size[i]) for i, g in enumerate(a.groups) if size[i] > 0}
        gap, where = _gap(rates)
        groups = {
            g: {"records": count(float(size[i])), "selection_rate": rates[g]}
            for i, g in enumerate(a.groups)
            if size[i] > 0
        }
        detail = {"group": self.group, "positive": pos, "groups": groups}
        text = f"positive label {pos!r}, {len(rates)} groups of {self.group}: {where}"
        return [
            Score(name=self.metric, number=gap, explanation=text),
            *per_name("selection-rate", rates),
            Score(name="detail", structured=detail),
        ]


class EqualizedOddsDifference(_Fairness):
    """The larger of the between-group gaps in true-positive and false-positive rate."""

    metric: ClassVar[str] = "equalized-odds-difference"

    def __init__(
        self, *, group: str, positive: str | None = None, undefined: Undefined = "zero"
    ) -> None:
        check_choice(self.metric, "undefined", undefined, ("zero", "exclude"))
        self._setup(group, positive)
        self.undefined = undefined

    def reduce_weighted(self, prepared: Arrays, weights: Any) -> list[Score]:
        a = prepared
        w, pos = self._drawn(a, weights)
        if (a.truth[w > 0] < 0).any():
            raise ValueError("every record needs a reference label")  # requires= guarantees it
        said, true = self._is(a, a.pred, pos), self._is(a, a.truth, pos)
        size = self._sums(a, w)
        positives, negatives = self._sums(a, w, true), self._sums(a, w, ~true)
        tp, fp = self._sums(a, w, said & true), self._sums(a, w, said & ~true)
        tpr: dict[str, float] = {}
        fpr: dict[str, float] = {}
        groups: dict[str, Any] = {}
        undefined: list[str] = []
        keep_zero = self.undefined == "zero"
        for i, g in enumerate(a.groups):
            if size[i] == 0:
                continue
            t = float(tp[i] / positives[i]) if positives[i] > 0 else None
            f = float(fp[i] / negatives[i]) if negatives[i] > 0 else None
            if t is None or f is None:
                undefined.append(g)
            if t is not None or keep_zero:
                tpr[g] = 0.0 if t is None else t
            if f is not None or keep_zero:
                fpr[g] = 0.0 if f is None else f
            groups[g] = {
                "records": count(float(size[i])),
                "positives": count(float(positives[i])),
                "negatives": count(float(negatives[i])),
                "tpr": t,
                "fpr": f,
            }
        tpr_gap, tpr_where = _gap(tpr)
        fpr_gap, fpr_where = _gap(fpr)
        text = (
            f"positive label {pos!r}, {len(groups)} groups of {self.group}; "
            f"TPR gap {tpr_gap:.4g} ({tpr_where}), FPR gap {fpr_gap:.4g} ({fpr_where})"
        )
        if undefined:
            how = "counted as 0" if keep_zero else "left out"
            text += f"; undefined rates {how} for {', '.join(map(repr, undefined[:10]))}"
        detail = {
            "group": self.group,
            "positive": pos,
            "undefined": self.undefined,
            "undefined_groups": undefined,
            "groups": groups,
        }
        return [
            Score(name=self.metric, number=max(tpr_gap, fpr_gap), explanation=text),
            Score(name="tpr-difference", number=tpr_gap),
            Score(name="fpr-difference", number=fpr_gap),
            *per_name("tpr", tpr),
            *per_name("fpr", fpr),
            Score(name="detail", structured=detail),
        ]
