"""Input checks shared by the statistics modules: one-dimensional finite floats, a valid level."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
# Anything numpy turns into a 1-D float array: lists of floats/ints/bools or an ndarray.
Values = Sequence[float] | NDArray[Any]


def as_values(values: Values, name: str = "values") -> FloatArray:
    """Return ``values`` as a 1-D float64 array, rejecting NaN and infinities.

    A non-finite value is a bug upstream (a Score must be finite); averaging it in would turn the
    whole aggregate into NaN without saying where it came from.
    """
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite numbers")
    return array


def check_level(level: float) -> float:
    """Return ``level`` if it is a usable confidence level, strictly between 0 and 1."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level}")
    return float(level)
