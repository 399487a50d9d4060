"""Shared pieces of the ml-monitoring evaluators: registration, per-name scores, weights.

Every evaluator here is dataset-scope and returns one main number (named after itself), a few
named companions, one number per feature or group (``psi[age]``, ``selection-rate[F]``) and
a structured detail. The weighted ones follow the bootstrap protocol: ``prepare(values)``
turns the mapped values into arrays once, ``reduce_weighted(prepared, weights)`` reduces them
under resample counts, and ``reduce(values)`` is the all-ones case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from evalsi.core import OutputSpec, ParamError, Score
from evalsi.evaluators import Evaluator
from evalsi.packs._declare import builtin, number

F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.intp]

PACK = "ml-monitoring"


def declare(
    name: str,
    cls: type,
    outputs: Sequence[OutputSpec],
    *,
    requires: tuple[str, ...] = (),
    example: str,
) -> Evaluator:
    """Register ``cls`` as ``builtin/<name>@1.0.0``, a dataset-scope ml-monitoring evaluator."""
    return builtin(PACK, name, *outputs, requires=requires, scope="dataset", example=example)(cls)


def rate(name: str, desc: str) -> OutputSpec:
    """A share in 0..1 where lower is better (missing values, drifted features, a gap…)."""
    return number(name, desc, higher=False)


def per_name(metric: str, values: dict[str, float]) -> list[Score]:
    """One number per feature or group, named ``metric[name]``."""
    return [Score(name=f"{metric}[{key}]", number=value) for key, value in values.items()]


def weights_of(weights: Any, n: int) -> F64:
    """Resample counts as a float vector of length ``n``, checked."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"expected {n} weights, got shape {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be finite and non-negative")
    return w


def count(x: float) -> int | float:
    """A weighted count for details: an int when whole (resample counts always are)."""
    return int(x) if float(x).is_integer() else float(x)


def check_range(metric: str, param: str, value: float, low: float, high: float) -> None:
    """``low < value < high`` or a ParamError naming the param and what is allowed."""
    if not low < value < high:
        raise ParamError(
            f"{metric}: param {param!r} must be between {low:g} and {high:g} (exclusive), "
            f"got {value!r}"
        )
