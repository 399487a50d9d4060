"""DatasetRunner with ``map_batch``: whole batches mapped at once, per-record ``map`` for a batch
the evaluator declines (or fails on), and every reader of the mapped values unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from evalsi.core import Content, Outcome, Record, Score
from evalsi.evaluators import DatasetRunner, Skip, evaluator
from evalsi.runs._aggregate import Aggregator
from evalsi.runs._dataset_scope import dataset_bootstrap, finish_dataset_scope

Floats = npt.NDArray[np.float64]


class _Chunk:
    """A batch of numbers as an array (what a real map_batch keeps: columns)."""

    def __init__(self, x: Floats) -> None:
        self.x = x

    def __len__(self) -> int:
        return len(self.x)


class _Mean:
    """Mean of numeric outputs; text "skip" is skipped, text "bad" fails, per record."""

    calls: list[str]

    def __init__(self) -> None:
        self.calls = []

    def map(self, record: Record) -> float:
        assert record.output is not None
        value = record.output.value
        if value == "skip":
            raise Skip("asked to skip")
        if value == "bad":
            raise ValueError("not a number")
        self.calls.append("map")
        return float(value)

    def reduce(self, values: Sequence[float]) -> Score:
        return Score(number=float(np.mean(list(values))))


class _Batched(_Mean):
    def map_batch(self, records: Sequence[Record]) -> _Chunk | None:
        self.calls.append("map_batch")
        outs = [r.output.value if r.output is not None else None for r in records]
        if any(o == "boom" for o in outs):
            raise RuntimeError("a bug in map_batch")
        if not all(type(o) is int for o in outs):
            return None  # not uniform: the runner maps it record by record
        return _Chunk(np.asarray(outs, dtype=np.float64))

    def unbatch(self, chunk: _Chunk) -> list[float]:
        return [float(v) for v in chunk.x]


class _WeightedBatched(_Batched):
    def prepare(self, values: Sequence[float]) -> Floats:
        chunks = getattr(values, "chunks", None)
        if chunks is None:
            return np.asarray(values, dtype=np.float64)
        return np.concatenate([c.x if isinstance(c, _Chunk) else np.asarray(c) for c in chunks])

    def reduce_weighted(self, x: Floats, w: Floats) -> Score:
        return Score(number=float((x * w).sum() / w.sum()))


def _runner(cls: type, name: str = "mean", *, per_record: bool = False) -> DatasetRunner:
    ev = evaluator(name=f"t/{name}", scope="dataset", requires=("output",), outputs=[name])(cls)
    bound = ev.bind()
    if per_record:
        bound.instance.map_batch = None
    return DatasetRunner(bound)


def _rec(i: int, value: Any) -> Record:
    return Record(id=str(i), output=None if value is None else Content.from_value(value))


BATCHES = [
    [_rec(0, 1), _rec(1, 2), _rec(2, 3)],  # uniform: one map_batch call
    [_rec(3, 4), _rec(4, None), _rec(5, "skip"), _rec(6, "bad"), _rec(7, 5.5)],  # per record
    [_rec(8, "boom"), _rec(9, 6)],  # map_batch raises: per record, "boom" fails in map
    [],
    [_rec(10, 7), _rec(11, 8)],
]


@pytest.mark.parametrize("cls", [_Batched, _WeightedBatched])
def test_batches_mapped_whole_or_record_by_record_same_as_map(cls: type) -> None:
    fast, slow = _runner(cls), _runner(cls, per_record=True)
    for batch in BATCHES:
        fast.feed(batch)
        slow.feed(batch)
    assert fast.mapped == slow.mapped == 8
    assert fast.skip_reasons == slow.skip_reasons
    assert fast.skip_reasons == {"record has no output": 1, "asked to skip": 1}
    assert fast.error_reasons == slow.error_reasons
    assert fast.error_reasons == {
        "ValueError: not a number": 1,
        "ValueError: could not convert string to float: 'boom'": 1,
    }
    values = fast.values
    assert [type(c).__name__ for c in values.chunks] == ["_Chunk", "list", "list", "_Chunk"]  # type: ignore[attr-defined]
    assert len(values) == 8
    assert list(values) == slow.values == [1.0, 2.0, 3.0, 4.0, 5.5, 6.0, 7.0, 8.0]
    assert values[4] == 5.5
    assert fast.finish().scores[0].number == slow.finish().scores[0].number
    assert dataset_bootstrap(fast, seed=3) == dataset_bootstrap(slow, seed=3)


def test_values_follow_later_feeds() -> None:
    runner = _runner(_Batched, "grow")
    runner.feed([_rec(0, 1)])
    assert list(runner.values) == [1.0]
    runner.feed([_rec(1, 2), _rec(2, 3)])
    assert len(runner.values) == 3
    assert list(runner.values) == [1.0, 2.0, 3.0]


def test_map_batch_needs_unbatch_too() -> None:
    """Without ``unbatch`` the values could not be expanded: the runner maps per record."""

    class _NoUnbatch(_Mean):
        def map_batch(self, records: Sequence[Record]) -> _Chunk:  # pragma: no cover
            raise AssertionError("never called")

    runner = _runner(_NoUnbatch, "no-unbatch")
    runner.feed([_rec(0, 1), _rec(1, 2)])
    assert runner.values == [1.0, 2.0]


def test_nothing_mapped_is_skipped_with_the_reason() -> None:
    runner = _runner(_Batched, "none")
    runner.feed([_rec(0, "skip"), _rec(1, None)])
    result = runner.finish()
    assert result.outcome is Outcome.SKIPPED
    assert result.reason == "no record was eligible: 1 of 2 records skipped: asked to skip"


def test_finish_dataset_scope_counts_mapped_records() -> None:
    runner = _runner(_WeightedBatched, "scope")
    for batch in BATCHES:
        runner.feed(batch)
    aggregator = Aggregator([("scope", runner.bound.manifest.outputs)], cluster_by=None)
    scope = finish_dataset_scope([runner], aggregator, seed=1)
    assert scope.results[0].scores[0].number == pytest.approx(np.mean([1, 2, 3, 4, 5.5, 6, 7, 8]))
    assert set(scope.intervals[0]) == {"scope"}


def test_a_chunk_that_misses_records_is_not_trusted() -> None:
    """A chunk must map every record of its batch; a shorter one (or a list) is ignored and
    the batch is mapped record by record."""

    class _Short(_Batched):
        def map_batch(self, records: Sequence[Record]) -> _Chunk | None:
            chunk = super().map_batch(records)
            return None if chunk is None else _Chunk(chunk.x[:-1])

    class _List(_Batched):
        def map_batch(self, records: Sequence[Record]) -> Any:
            return [0.0] * len(records)

    for cls in (_Short, _List):
        runner = _runner(cls)
        runner.feed([_rec(0, 1), _rec(1, 2)])
        assert runner.mapped == 2
        assert runner.values.chunks == [[1.0, 2.0]]  # type: ignore[attr-defined]
        assert runner.finish().scores[0].number == 1.5
