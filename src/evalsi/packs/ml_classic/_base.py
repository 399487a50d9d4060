"""Shared pieces of the ml-classic evaluators: the bootstrap protocol, param checks, declare().

Every dataset-scope metric here follows the weighted protocol: ``prepare(values)`` turns the
mapped values into numpy arrays once, ``reduce_weighted(prepared, weights)`` computes the metric
with one weight per value (bootstrap resample counts), and ``reduce(values)`` is the weighted
form with unit weights. Weights are what ``sample_weight`` is to scikit-learn, so weighted
metrics equal scikit-learn's with ``sample_weight`` = the counts, and a value of weight ``c``
counts as ``c`` repeats of that value.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from evalsi.core import OutputSpec, OutputType, Score
from evalsi.evaluators import Evaluator, WeightedReduce
from evalsi.packs._declare import builtin

P = TypeVar("P")
Floats = npt.NDArray[np.float64]
AVERAGES = ("binary", "micro", "macro", "weighted")


class Weighted(WeightedReduce[P, Score]):
    """A dataset-scope metric computed from prepared arrays and one weight per record."""


def check_weights(weights: Floats, n: int) -> Floats:
    """The weights as float64, one per value, finite and >= 0 with a positive total."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"expected {n} weights (one per value), got shape {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
        raise ValueError("weights must be finite, >= 0 and not all 0")
    return w


def fmt(x: float) -> str:
    """A count or a weighted count, compactly."""
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.6g}"


def declare(
    name: str,
    cls: type,
    desc: str,
    *,
    output: OutputType = "number",
    bounds: tuple[float, float] | None = (0.0, 1.0),
    higher: bool | None = True,
    scope: str = "dataset",
    example: str = "",
) -> Evaluator:
    """Register ``cls`` as ``builtin/<name>@1.0.0`` in the ml-classic pack.

    ``bounds`` is the metric's range (None when unbounded), ``higher`` whether higher is better
    (None for a structured value); both clip and orient intervals and comparisons.
    """
    return builtin(
        "ml-classic",
        name,
        OutputSpec(name, output, bounds, higher, desc),
        requires=("output", "reference"),
        scope=scope,
        example=example or f"evalsi eval --data predictions.jsonl --evaluators {name}",
    )(cls)
