"""``WeightedReduce``: the base of a dataset-scope evaluator that reduces weighted arrays.

Such an evaluator implements ``prepare(values)`` (the mapped values as arrays, once) and
``reduce_weighted(prepared, weights)`` (one weight per value: bootstrap resample counts); the
plain ``reduce`` is then the weighted one with unit weights, so the two can never disagree and
the runner's bootstrap needs no list copies (see ``DatasetRunner.weighted_reducer``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

if TYPE_CHECKING:  # numpy loads when a dataset-scope evaluator reduces (start-up: issue 16)
    import numpy as np
    import numpy.typing as npt

P = TypeVar("P")
R = TypeVar("R")
F64: TypeAlias = "npt.NDArray[np.float64]"


class WeightedReduce(Generic[P, R]):
    """``reduce(values) == reduce_weighted(prepare(values), ones)``; subclasses give the two."""

    def prepare(self, values: Sequence[Any]) -> P:  # pragma: no cover - abstract
        raise NotImplementedError

    def reduce_weighted(self, prepared: P, weights: F64) -> R:  # pragma: no cover - abstract
        raise NotImplementedError

    def reduce(self, values: Sequence[Any]) -> R:
        import numpy as np

        return self.reduce_weighted(self.prepare(values), np.ones(len(values)))
