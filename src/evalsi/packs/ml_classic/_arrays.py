"""prepare() for classification: mapped values → encoded labels and a probability matrix.

This is the one pass that walks the per-record values; everything after it is whole-array
numpy. Labels are encoded through a dict of their distinct raw values (a few C-level passes
instead of a string sort), or, when they are all ints, with a lookup table (``encode_ints``);
probabilities are read in one pass, key by key, when every record names the same labels (the
usual case: ``uniform_probs``), else flattened record by record. Batches mapped whole
(``_batch``) arrive as columns already and are merged into the same arrays.

The class set is the union of the labels seen (reference labels, predicted labels and, for
probabilities, the labels they name), sorted like scikit-learn. A record's meaning can depend on
it: a record that leaves exactly one class out of its probabilities gives that class the rest
of the mass. So a weighted reduction whose positive weights leave a class out entirely is
recomputed from those records (``restrict``), to equal the metric of the repeated values.
"""

from __future__ import annotations

import numbers
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from evalsi.packs.ml_classic._extract import LabelMapped, ProbMapped, label_of

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]
Bools = npt.NDArray[np.bool_]
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def encode(raw: list[Any]) -> tuple[list[str], Ints]:
    """Sorted label strings of raw JSON scalars, and each value's index among them."""
    distinct = list(dict.fromkeys(raw))
    if _bools_collide(distinct, raw):  # True == 1 in a dict: key by label string instead
        raw = [label_of(v) for v in raw]
        distinct = list(dict.fromkeys(raw))
    names = [label_of(v) for v in distinct]
    classes = sorted(set(names))
    where = {c: i for i, c in enumerate(classes)}
    lookup = np.array([where[x] for x in names], dtype=np.intp)
    index = {v: i for i, v in enumerate(distinct)}
    return classes, lookup[np.fromiter(map(index.__getitem__, raw), np.intp, len(raw))]


def encode_ints(ints: npt.NDArray[np.integer[Any]], names: Sequence[str]) -> tuple[list[str], Ints]:
    """``encode(ints.tolist() + list(names))`` for exact ints and strings, vectorised: the
    label of an int is its decimal text, so only the few distinct ints are turned to text."""
    values = ints.astype(np.intp, copy=False) if ints.size else np.zeros(0, dtype=np.intp)
    lo = int(values.min()) if values.size else 0
    span = int(values.max()) - lo + 1 if values.size else 0
    small = span <= max(1 << 16, values.size)  # a lookup table indexed by value
    if small:
        shifted = values - lo if lo else values
        distinct = np.flatnonzero(np.bincount(shifted, minlength=span)) + lo
    else:
        distinct, inverse = np.unique(values, return_inverse=True)
    texts = [str(v) for v in distinct.tolist()]
    classes = sorted(set(texts).union(names))
    where = {c: i for i, c in enumerate(classes)}
    lookup = np.fromiter(map(where.__getitem__, texts), np.intp, len(texts))
    tail = np.fromiter(map(where.__getitem__, names), np.intp, len(names))
    if not small:
        codes = lookup[inverse.reshape(-1)]
    elif lo == 0 and lookup.tolist() == list(range(span)):
        codes = values  # e.g. 0 and 1: each value is its own code (no gather)
    else:
        table = np.zeros(span, dtype=np.intp)
        table[distinct - lo] = lookup
        codes = table[shifted]
    return classes, np.concatenate([codes, tail]) if len(tail) else codes


def _bools_collide(distinct: list[Any], raw: list[Any]) -> bool:
    risky = any(v.__class__ is bool or (v.__class__ is not str and v in (0, 1)) for v in distinct)
    if not risky:
        return False
    kinds = set(map(type, raw))
    return bool in kinds and (int in kinds or float in kinds)


def default_positive(classes: list[str], positive: str | None) -> str:
    """The positive label: the param, else ``"1"`` when present, else the greatest label."""
    if positive is not None:
        return positive
    return "1" if "1" in classes else classes[-1]


@dataclass(frozen=True, slots=True)
class Probs:
    """True labels and a (records x classes) probability matrix over sorted ``classes``.

    ``present`` marks the labels each record named (one row shared by all records when they
    all name the same ones); ``values`` are the mapped values behind the arrays (empty for a
    view restricted to some records).
    """

    classes: list[str]
    truth: Ints
    matrix: Floats
    present: Bools
    values: Sequence[ProbMapped] = field(default=(), repr=False)

    def active(self, rows: Bools) -> Bools:
        """The classes the selected records use (as their label or in their probabilities)."""
        k = len(self.classes)
        named = self.present[0] if len(self.present) == 1 else self.present[rows].any(axis=0)
        return named | (np.bincount(self.truth, weights=rows, minlength=k) > 0)

    def take(self, rows: Bools) -> Probs:
        # compress, not matrix[rows]: boolean indexing of a 2-D array is ~10x slower
        present = self.present if len(self.present) == 1 else self.present.compress(rows, 0)
        return Probs(
            self.classes, self.truth.compress(rows), self.matrix.compress(rows, 0), present
        )


def prob_arrays(values: Sequence[ProbMapped]) -> Probs:
    """The probability matrix; a record that leaves out exactly one class gives it the rest of
    the mass (binary outputs often give just p(positive)); other classes left out get 0."""
    n = len(values)
    if not n:
        raise ValueError("no values to reduce")
    truth_raw = list(map(_FIRST, values))
    dicts = list(map(_SECOND, values))
    first = dicts[0]
    keys = list(first) if first.__class__ is dict else []
    columns = _uniform_columns(dicts, keys) if keys else None
    if columns is not None:
        return uniform_probs(*encode(truth_raw + keys), keys, columns, values)
    return _flat(values, truth_raw, dicts)


def uniform_probs(
    classes: list[str], codes: Ints, keys: Sequence[Any], columns: Floats, values: Sequence[Any]
) -> Probs:
    """The probability matrix when every record names exactly ``keys`` (``columns``: records x
    keys); ``codes`` are the true labels' then the keys' indexes in ``classes``."""
    n = len(columns)
    cols = codes[n:]
    if len(set(cols.tolist())) < len(keys):
        raise ValueError(f"probabilities name a label twice: {sorted(map(str, keys))}")
    _check(columns)
    k = len(classes)
    if k == len(keys) and (cols == np.arange(k)).all() and columns.flags.writeable:
        matrix = columns  # the keys are the classes, in order: no copy
    else:
        matrix = np.zeros((n, k), dtype=np.float64)
        matrix[:, cols] = columns
    present = np.zeros((1, k), dtype=bool)
    present[0, cols] = True
    return _fill(Probs(classes, codes[:n], matrix, present, values))


def _uniform_columns(dicts: list[Any], keys: list[Any]) -> Floats | None:
    """(records x keys) when every record names exactly ``keys`` with numbers, else None."""
    try:
        if set(map(len, dicts)) != {len(keys)}:
            return None
        # one pass over the records for all keys; array('d') refuses text and null
        row = itemgetter(*keys) if len(keys) > 1 else lambda d: (d[keys[0]],)
        flat = array("d", chain.from_iterable(map(row, dicts)))
    except (KeyError, TypeError):
        return None  # other labels, no probabilities, or not numbers: read record by record
    return np.frombuffer(flat).reshape(len(dicts), len(keys))


def _flat(values: Sequence[ProbMapped], truth_raw: list[Any], dicts: list[Any]) -> Probs:
    n = len(values)
    dicts = [d if d.__class__ is dict else {} for d in dicts]
    sizes = np.fromiter(map(len, dicts), np.intp, n)
    keys = list(chain.from_iterable(dicts))
    try:
        given = np.frombuffer(array("d", chain.from_iterable(map(dict.values, dicts))))
    except TypeError:
        key, bad = next(
            ((k, v) for d in dicts for k, v in d.items() if not isinstance(v, numbers.Real)),
            ("?", None),
        )
        raise ValueError(
            f"probability of {key!r} must be a number, got {type(bad).__name__}"
        ) from None
    _check(given)
    classes, codes = encode(truth_raw + keys)
    k = len(classes)
    rows, cols = np.repeat(np.arange(n), sizes), codes[n:]
    present = np.zeros((n, k), dtype=bool)
    present[rows, cols] = True
    if int(present.sum()) < len(keys):
        raise ValueError("a record's probabilities name a label twice (e.g. 1 and '1')")
    matrix = np.zeros((n, k), dtype=np.float64)
    matrix[rows, cols] = given
    return _fill(Probs(classes, codes[:n], matrix, present, values))


def _check(given: Floats) -> None:
    nan = np.isnan(given)
    if nan.any():
        raise ValueError(
            f"{int(nan.sum())} probabilities are NaN; every probability must be a number"
        )
    if given.size and (given.min() < 0 or given.max() > 1):
        raise ValueError(
            f"probabilities must lie in [0, 1], got values from {given.min()} to {given.max()}"
        )


def _fill(p: Probs) -> Probs:
    """Give the rest of the mass to the one class a record leaves out, if exactly one."""
    k = len(p.classes)
    left = k - p.present.sum(axis=1)
    one_left = left == 1
    if not one_left.any():
        return p
    rest = np.maximum(0.0, 1.0 - p.matrix.sum(axis=1))
    if len(p.present) == 1:
        p.matrix[:, ~p.present[0]] = rest[:, None]
    else:
        fill = one_left[:, None] & ~p.present
        p.matrix[fill] = np.broadcast_to(rest[:, None], p.matrix.shape)[fill]
    return p


def restrict(p: Probs, weights: Floats) -> tuple[Probs, Floats]:
    """The records with positive weight; rebuilt from them when they leave a class out."""
    if weights.min() > 0:
        return p, weights
    rows = weights > 0
    if p.active(rows).all():
        return p.take(rows), weights[rows]
    kept = [p.values[i] for i in np.flatnonzero(rows).tolist()]
    return replace(prob_arrays(kept), values=()), weights[rows]


@dataclass(frozen=True, slots=True)
class Labels:
    """True and predicted labels encoded against sorted ``classes``.

    ``probs`` holds the probabilities when some predicted labels are their argmax (the class
    set they were taken over decides a weighted reduction's fate, see ``restrict``).
    """

    classes: list[str]
    truth: Ints
    pred: Ints
    probs: Probs | None = None
    values: Sequence[LabelMapped] = field(default=(), repr=False)

    def confusion(self, weights: Floats) -> tuple[list[str], Floats]:
        """Weighted counts, rows true labels, columns predicted ones, over the classes used."""
        k = len(self.classes)
        flat = np.bincount(self.truth * k + self.pred, weights=weights, minlength=k * k)
        c = flat.reshape(k, k).astype(np.float64, copy=False)
        used = (c.sum(axis=0) + c.sum(axis=1)) > 0
        if used.all():
            return self.classes, c
        return [x for x, u in zip(self.classes, used, strict=True) if u], c[used][:, used]


def label_arrays(values: Sequence[LabelMapped]) -> Labels:
    """Encoded labels; a record without a predicted label predicts its most probable class
    (ties: the first in sorted order, as numpy's argmax)."""
    n = len(values)
    if not n:
        raise ValueError("no values to reduce")
    truth = list(map(_FIRST, values))
    pred = list(map(_SECOND, values))
    probs = None
    if None in pred:
        probs = prob_arrays([(t, p) for t, _, p in values])
        names = np.array(probs.classes, dtype=object)[probs.matrix.argmax(axis=1)]
        pred = [names[i] if p is None else p for i, p in enumerate(pred)]
    classes, codes = encode(truth + pred)
    return Labels(classes, codes[:n], codes[n:], probs, values)


def label_weights(lab: Labels, weights: Floats) -> tuple[Labels, Floats]:
    """As ``restrict``, for labels: only argmax labels can change with the class set."""
    if lab.probs is None or weights.min() > 0:
        return lab, weights
    rows = weights > 0
    if lab.probs.active(rows).all():
        return lab, weights  # zero weights count for nothing in the confusion matrix
    kept = [lab.values[i] for i in np.flatnonzero(rows).tolist()]
    return label_arrays(kept), weights[rows]
