"""The batch map of the classification metrics (``map_batch``) changes nothing but speed.

Every classification metric runs twice over the same batches: through ``map_batch`` (the
default) and record by record (``map_batch`` switched off on the instance). Hypothesis mixes
uniform records (the shape ``map_batch`` takes) with odd ones: missing or null fields, text
and brace-text outputs, bool / float / text labels, outputs without a label or without
probabilities, probabilities that are text, NaN, out of range, in another key order, with an
extra or a missing key. Both runs must agree exactly: mapped count, skip and error reasons,
the per-record values, the result, weighted reductions under resample counts (zeros included,
so ``restrict`` rebuilds from per-record values) and the bootstrap intervals for one seed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from evalsi.core import Content, Record
from evalsi.evaluators import DatasetRunner, Registry
from evalsi.packs import ml_classic
from evalsi.packs.ml_classic._arrays import encode, encode_ints
from evalsi.packs.ml_classic._batch import LabelChunk, ProbChunk
from evalsi.runs._dataset_scope import dataset_bootstrap

REG = Registry(ml_classic.EVALUATORS)
METRICS: list[tuple[str, dict[str, Any]]] = [
    ("accuracy", {}),
    ("balanced-accuracy", {}),
    ("precision", {"average": "macro"}),
    ("recall", {"average": "weighted"}),
    ("f1", {}),
    ("f1", {"average": "micro"}),
    ("mcc", {}),
    ("cohen-kappa", {"weights": "linear"}),
    ("confusion-matrix", {}),
    ("roc-auc", {}),
    ("roc-auc", {"average": "weighted"}),
    ("pr-auc", {}),
    ("log-loss", {}),
    ("brier", {}),
    ("ece", {"bins": 5}),
]


def _runners(name: str, params: dict[str, Any]) -> tuple[DatasetRunner, DatasetRunner]:
    fast = DatasetRunner(REG.resolve(name).bind(params))
    bound = REG.resolve(name).bind(params)
    bound.instance.map_batch = None  # the per-record path
    return fast, DatasetRunner(bound)


def _record(i: int, output: Any, reference: Any) -> Record:
    def content(value: Any) -> Content | None:
        return None if value is _MISSING else Content.from_value(value)

    return Record(id=str(i), output=content(output), reference=content(reference))


_MISSING = object()
BINARY = ["0", "1"]
LABELS = st.sampled_from([0, 1, 2, "0", "1", "a", "b", True, False, 1.0, 2.5])
ODD_REFERENCE = st.one_of(LABELS, st.none(), st.just(_MISSING), st.just({"x": 1}), st.just([1]))
PROB = st.floats(0.0, 1.0)
ODD_PROB = st.one_of(PROB, st.just(math.nan), st.just(1.5), st.just("0.3"), st.none(), st.just(1))


@st.composite
def _probs(draw: st.DrawFn, keys: list[Any]) -> dict[Any, Any]:
    return {k: draw(PROB) for k in keys}


@st.composite
def _odd_output(draw: st.DrawFn, keys: list[Any]) -> Any:
    kind = draw(st.integers(0, 9))
    probs = draw(_probs(keys))
    if kind == 0:
        return _MISSING
    if kind == 1:
        return draw(st.sampled_from([None, "{not json", '{"label": 1}', "a", ""]))
    if kind == 2:
        return draw(LABELS)
    if kind == 3:
        return {"probabilities": probs}  # no label: the argmax
    if kind == 4:
        return {"label": draw(LABELS)}  # no probabilities
    if kind == 5:
        return {"label": draw(LABELS), "probabilities": dict(reversed(probs.items()))}
    if kind == 6:
        return {"label": draw(LABELS), "probabilities": {**probs, "2": draw(PROB)}}
    if kind == 7:
        return {"label": draw(LABELS), "probabilities": dict(list(probs.items())[1:])}
    if kind == 8:
        return {"label": draw(LABELS), "probabilities": {k: draw(ODD_PROB) for k in keys}}
    return {"label": draw(st.sampled_from([None, [1], {"a": 1}])), "probabilities": probs}


@st.composite
def _dataset(draw: st.DrawFn) -> list[list[Record]]:
    """Records in batches: mostly one uniform shape, some odd records."""
    key_sets: list[list[Any]] = [BINARY, ["0", "1", "2"], ["a", "b"], [0, 1]]
    truths: list[list[Any]] = [[0, 1], [0, 1, 2], ["0", "1"], ["a", "b"], [1, 300], [True, False]]
    keys, truth = draw(st.sampled_from(key_sets)), draw(st.sampled_from(truths))
    scalar_output = draw(st.booleans())
    odd_rate = draw(st.sampled_from([0.0, 0.05, 0.3]))
    n = draw(st.integers(1, 40))
    records = []
    for i in range(n):
        ref = draw(st.sampled_from(truth))
        label = draw(st.sampled_from(truth))
        out = label if scalar_output else {"label": label, "probabilities": draw(_probs(keys))}
        if draw(st.floats(0, 1)) < odd_rate:  # one side odd, the other regular
            if draw(st.booleans()):
                out = draw(_odd_output(keys))
            else:
                ref = draw(ODD_REFERENCE)
        records.append(_record(i, out, ref))
    cuts = sorted(draw(st.sets(st.integers(1, max(n - 1, 1)), max_size=4)))
    return [records[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True) if a < b]


def _same_scores(a: Any, b: Any) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    assert [s.name for s in a] == [s.name for s in b]
    for x, y in zip(a, b, strict=True):
        assert (x.number, x.structured, x.explanation, x.metadata) == (
            y.number,
            y.structured,
            y.explanation,
            y.metadata,
        ) or (x.number is not None and math.isnan(x.number) and math.isnan(y.number or 0.0))


@settings(max_examples=250, deadline=None)
@given(batches=_dataset(), metric=st.sampled_from(METRICS), seed=st.integers(0, 2**16))
def test_batch_map_equals_per_record_map(
    batches: list[list[Record]], metric: tuple[str, dict[str, Any]], seed: int
) -> None:
    fast, slow = _runners(*metric)
    for batch in batches:
        fast.feed(batch)
        slow.feed(batch)
    assert fast.mapped == slow.mapped == len(slow.values)
    assert fast.skip_reasons == slow.skip_reasons
    assert fast.error_reasons == slow.error_reasons
    assert list(fast.values) == slow.values
    kinds = {type(c).__name__ for c in fast.values.chunks}  # type: ignore[attr-defined]
    event(f"chunks: {sorted(kinds)}")
    a, b = fast.finish(), slow.finish()
    assert (a.outcome, a.reason) == (b.outcome, b.reason)
    _same_scores(a.scores, b.scores)
    if not a.scores:
        return
    reduce_fast, reduce_slow = fast.weighted_reducer(), slow.weighted_reducer()
    rng = np.random.default_rng(seed)
    for _ in range(4):  # resample counts: zeros leave records (and maybe classes) out
        counts = np.bincount(rng.integers(0, fast.mapped, fast.mapped), minlength=fast.mapped)
        _same_scores(reduce_fast(counts.astype(np.float64)), reduce_slow(counts.astype(float)))
    assert dataset_bootstrap(fast, seed=seed) == dataset_bootstrap(slow, seed=seed)


def _uniform(n: int, offset: int = 0) -> list[Record]:
    rng = np.random.default_rng(n)
    y, p = rng.integers(0, 2, n), rng.random(n)
    outs = [{"label": int(x >= 0.5), "probabilities": {"0": 1 - x, "1": x}} for x in p]
    return [_record(offset + i, outs[i], int(y[i])) for i in range(n)]


@pytest.mark.parametrize(("name", "params"), METRICS)
def test_uniform_batches_are_mapped_whole(name: str, params: dict[str, Any]) -> None:
    """The fast path is taken (the test above is not vacuous) and a batch with one odd record
    is mapped record by record."""
    fast, slow = _runners(name, params)
    odd = _record(99, "1", 0)  # a text label
    batches = [_uniform(30), _uniform(20, 30), [*_uniform(5, 50), odd]]
    for batch in batches:
        fast.feed(batch)
        slow.feed(batch)
    chunks = fast.values.chunks  # type: ignore[attr-defined]
    kind = ProbChunk if name in ("roc-auc", "pr-auc", "log-loss", "brier", "ece") else LabelChunk
    assert [type(c) for c in chunks] == [kind, kind, list]
    assert list(fast.values) == slow.values
    a, b = fast.finish(), slow.finish()
    _same_scores(a.scores, b.scores)
    assert dataset_bootstrap(fast, seed=5) == dataset_bootstrap(slow, seed=5)


def test_chunks_with_other_key_orders_merge_to_the_same_matrix() -> None:
    fast, slow = _runners("log-loss", {})
    flipped = [
        _record(i, {"probabilities": {"1": p, "0": 1 - p}}, i % 2)
        for i, p in enumerate([0.2, 0.7, 0.9])
    ]
    for batch in (_uniform(10), flipped):
        fast.feed(batch)
        slow.feed(batch)
    assert [type(c) for c in fast.values.chunks] == [ProbChunk, ProbChunk]  # type: ignore[attr-defined]
    _same_scores(fast.finish().scores, slow.finish().scores)


@settings(max_examples=200, deadline=None)
@given(
    ints=st.lists(st.one_of(st.integers(0, 300), st.integers(-(2**63), 2**63 - 1)), min_size=1),
    names=st.lists(st.sampled_from(["0", "1", "7", "-3", "a", "10"]), max_size=4),
)
def test_encode_ints_equals_encode(ints: list[int], names: list[str]) -> None:
    classes, codes = encode_ints(np.array(ints, dtype=np.int64), names)
    want_classes, want_codes = encode([*ints, *names])
    assert classes == want_classes
    assert codes.tolist() == want_codes.tolist()


@pytest.mark.parametrize("name", ["log-loss", "roc-auc", "brier", "accuracy"])
def test_chunks_naming_other_labels_fall_back_to_the_values(name: str) -> None:
    """Uniform batches whose probabilities name different labels ({"0", "1"}, then {"1"}
    alone: its rest of the mass goes to "0") merge through the per-record values."""
    fast, slow = _runners(name, {})
    only_one = [
        _record(i, {"label": int(p > 0.5), "probabilities": {"1": p}}, i % 2)
        for i, p in enumerate([0.2, 0.7, 0.9, 0.4])
    ]
    for batch in (_uniform(10), only_one):
        fast.feed(batch)
        slow.feed(batch)
    chunks = fast.values.chunks  # type: ignore[attr-defined]
    assert all(not isinstance(c, list) for c in chunks)
    a, b = fast.finish(), slow.finish()
    assert a.outcome is b.outcome
    _same_scores(a.scores, b.scores)
    assert dataset_bootstrap(fast, seed=9) == dataset_bootstrap(slow, seed=9)
