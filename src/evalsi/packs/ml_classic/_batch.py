"""Batch map for classification metrics: a whole batch of records → columns in a few C passes.

The runner calls ``map_batch(records)`` instead of ``map`` once per record (see
``DatasetRunner``). Per-record Python work is what made a million predictions slow, so a batch
is read with C-level ``map``/``attrgetter``/``itemgetter``/``array`` passes while its records
are still in the CPU caches, and prepare() then only concatenates the chunks.

Only the common uniform shape is taken here: every reference a JSON scalar and every output a
JSON object with a scalar ``label`` (label metrics; a plain scalar output too) or the same
``probabilities`` keys with numbers (probability metrics). Anything else returns None and the
runner maps that batch record by record with ``map``, so odd records keep their exact outcome.
A chunk keeps the raw objects it read, so ``unbatch`` gives back exactly the values ``map``
returns, and prepare() merges chunks into the very arrays it builds from those values: the
rare paths that need per-record values (``restrict``, a re-reducing bootstrap) see no change.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter, itemgetter, methodcaller
from typing import Any

import numpy as np
import numpy.typing as npt

from evalsi.core import Record
from evalsi.packs.ml_classic._arrays import (
    Labels,
    Probs,
    encode,
    encode_ints,
    label_arrays,
    prob_arrays,
    uniform_probs,
)
from evalsi.packs.ml_classic._extract import SCALARS, LabelMapped, ProbMapped

Ints = npt.NDArray[np.integer[Any]]
Floats = npt.NDArray[np.float64]

_OUT, _REF = attrgetter("output.value"), attrgetter("reference.value")
_LABEL, _PROBS = itemgetter("label"), itemgetter("probabilities")
_BRACE = methodcaller("startswith", "{")
_NUMBERS = frozenset((int, float, bool))


def _all(kind: type, values: list[Any]) -> bool:
    """Every value exactly of ``kind`` (a list of types counted by identity: a cheap C pass)."""
    return list(map(type, values)).count(kind) == len(values)


def _ints(values: list[Any]) -> Ints | None:
    """Exact ints as an integer array (bytes when they fit: the cheapest C pass); else None."""
    if not _all(int, values):
        return None
    try:
        return np.frombuffer(bytes(values), dtype=np.uint8)
    except ValueError:  # outside 0..255
        pass
    try:
        return np.frombuffer(array("q", values), dtype=np.int64)
    except OverflowError:
        return None


def _scalars(values: list[Any], ints: Ints | None) -> bool:
    return ints is not None or set(map(type, values)) <= SCALARS


def _read(records: Sequence[Record]) -> tuple[list[Any], list[Any], Ints | None] | None:
    """(references, outputs, references as ints if they all are); None when a record lacks
    either (``requires``) or a reference is not a JSON scalar."""
    try:
        truths = list(map(_REF, records))
        outs = list(map(_OUT, records))
    except AttributeError:  # None has no .value: the runner skips that record
        return None
    ints = _ints(truths)
    return (truths, outs, ints) if _scalars(truths, ints) else None


@dataclass(frozen=True, slots=True)
class LabelChunk:
    """A batch for a label metric: raw true and predicted labels (int64 when all are ints)."""

    truths: list[Any]
    preds: list[Any]
    outs: list[Any] | None  # the output objects, for their probabilities; None: scalar outputs
    truth_ints: Ints | None
    pred_ints: Ints | None

    def __len__(self) -> int:
        return len(self.truths)


def map_label_batch(records: Sequence[Record]) -> LabelChunk | None:
    """``map_labels`` over a uniform batch; None when the batch must be mapped per record."""
    read = _read(records)
    if read is None:
        return None
    truths, outs, t_ints = read
    objects: list[Any] | None = None
    if _all(dict, outs):
        try:
            preds = list(map(_LABEL, outs))
        except KeyError:  # no label: the argmax of the probabilities, per record
            return None
        objects = outs
    else:
        kinds = set(map(type, outs))
        if not (kinds <= _NUMBERS or (kinds == {str} and not any(map(_BRACE, outs)))):
            return None
        preds = outs  # the output is the label
    p_ints = None if t_ints is None else _ints(preds)
    if not _scalars(preds, p_ints):
        return None
    return LabelChunk(truths, preds, objects, t_ints, p_ints)


def unbatch_labels(chunk: LabelChunk) -> list[LabelMapped]:
    """The values ``map_labels`` returns for the chunk's records."""
    probs = (
        repeat(None) if chunk.outs is None else map(dict.get, chunk.outs, repeat("probabilities"))
    )
    return list(zip(chunk.truths, chunk.preds, probs, strict=False))


def merge_labels(values: Sequence[LabelMapped]) -> Labels:
    """``label_arrays(values)``, from the chunks when every batch was mapped whole."""
    chunks = getattr(values, "chunks", None)
    if not chunks or any(c.__class__ is not LabelChunk for c in chunks):
        return label_arrays(values)
    n = len(values)
    if all(c.pred_ints is not None for c in chunks):
        ints = np.concatenate([c.truth_ints for c in chunks] + [c.pred_ints for c in chunks])
        classes, codes = encode_ints(ints, ())
    else:
        truth = list(chain.from_iterable(c.truths for c in chunks))
        classes, codes = encode(truth + list(chain.from_iterable(c.preds for c in chunks)))
    return Labels(classes, codes[:n], codes[n:], None, values)


@dataclass(frozen=True, slots=True)
class ProbChunk:
    """A batch for a probability metric: raw true labels, the probability objects and their
    values as a (records x keys) matrix, every record naming exactly ``keys``."""

    truths: list[Any]
    probs: list[dict[Any, Any]]
    keys: tuple[Any, ...]
    columns: Floats
    truth_ints: Ints | None

    def __len__(self) -> int:
        return len(self.truths)


def map_prob_batch(records: Sequence[Record]) -> ProbChunk | None:
    """``map_probs`` over a uniform batch; None when the batch must be mapped per record."""
    read = _read(records)
    if read is None:
        return None
    truths, outs, t_ints = read
    if not _all(dict, outs):
        return None
    try:
        probs = list(map(_PROBS, outs))
    except KeyError:
        return None
    if not _all(dict, probs):
        return None
    keys = tuple(probs[0])
    if not keys or sum(map(len, probs)) != len(keys) * len(probs):  # the keys, no others
        return None
    columns = np.empty((len(probs), len(keys)), dtype=np.float64)
    try:  # a list per key, then array('d'), which refuses text and null like prepare()
        for j, key in enumerate(keys):
            columns[:, j] = np.frombuffer(array("d", list(map(itemgetter(key), probs))))
    except (KeyError, TypeError, OverflowError):
        return None
    return ProbChunk(truths, probs, keys, columns, t_ints)


def unbatch_probs(chunk: ProbChunk) -> list[ProbMapped]:
    """The values ``map_probs`` returns for the chunk's records."""
    return list(zip(chunk.truths, chunk.probs, strict=True))


def merge_probs(values: Sequence[ProbMapped]) -> Probs:
    """``prob_arrays(values)``, from the chunks when every batch was mapped whole with the same
    probability keys (else from the values, which covers every other case)."""
    chunks = getattr(values, "chunks", None)
    if not chunks or any(c.__class__ is not ProbChunk for c in chunks):
        return prob_arrays(values)
    keys = chunks[0].keys
    if any(set(c.keys) != set(keys) for c in chunks):
        return prob_arrays(values)
    columns = np.concatenate([_reorder(c, keys) for c in chunks])
    names = list(keys)
    if all(c.truth_ints is not None for c in chunks) and all(k.__class__ is str for k in keys):
        ints = np.concatenate([c.truth_ints for c in chunks])
        classes, codes = encode_ints(ints, names)
    else:
        classes, codes = encode(list(chain.from_iterable(c.truths for c in chunks)) + names)
    return uniform_probs(classes, codes, names, columns, values)


def _reorder(chunk: ProbChunk, keys: tuple[Any, ...]) -> Floats:
    if chunk.keys == keys:
        return chunk.columns
    return chunk.columns[:, [chunk.keys.index(k) for k in keys]]
