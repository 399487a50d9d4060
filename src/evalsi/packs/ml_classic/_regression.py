"""Regression metrics: MAE, MSE, RMSE, R² and MAPE over the whole dataset.

``output`` is the predicted number (a JSON number, numeric text, or a tabular row's
``prediction``), ``reference`` the true number. Each metric equals scikit-learn's
(``mean_absolute_error``, ``mean_squared_error``, ``root_mean_squared_error``, ``r2_score``,
``mean_absolute_percentage_error``), also with ``sample_weight`` = the weights.

A record whose output or reference is null (or a row without a prediction) is SKIPPED; one that
is not a number is an ERROR with the reason. NaN or infinite values make the metric an ERROR
that counts them: scikit-learn refuses them too, and dropping them would flatter the model.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from evalsi.core import Content, Record, Score
from evalsi.evaluators import Skip
from evalsi.packs.ml_classic._base import Weighted, check_weights, fmt

Floats = npt.NDArray[np.float64]
Pair = tuple[Any, Any]
"""(true number, predicted number) of one record, as int or float."""

_FIRST, _SECOND = itemgetter(0), itemgetter(1)
EPS = float(np.finfo(np.float64).eps)


def number_of(content: Content, what: str) -> float:
    """The number a content holds; Skip when it holds none (null), ValueError when not one."""
    value: Any = content.value
    if content.kind == "row":
        value = content.row.prediction if content.row is not None else None
        if value is None:
            raise Skip(f"{what} is a row without a prediction")
    elif content.kind == "messages":
        value = content.as_text()
    elif content.kind not in ("json", "text"):
        raise ValueError(f"{what} must be a number, got {content.kind} content")
    if value is None:
        raise Skip(f"{what} is null")
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{what} is a boolean ({str(value).lower()}), not a number")
    if isinstance(value, numbers.Real):  # numpy scalars from in-memory data too
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except (ValueError, OverflowError):
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise ValueError(f"{what} {shown!r} is not a number") from None
    raise ValueError(f"{what} must be a number, got {type(value).__name__}")


def map_pair(record: Record) -> Pair:
    """(truth, prediction) of one record: JSON numbers as they are, anything else parsed."""
    truth = record.reference.value  # type: ignore[union-attr]
    pred = record.output.value  # type: ignore[union-attr]
    kind_t, kind_p = truth.__class__, pred.__class__
    if (kind_t is float or kind_t is int) and (kind_p is float or kind_p is int):
        return truth, pred
    return number_of(record.reference, "reference"), number_of(record.output, "output")  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Pairs:
    """True and predicted numbers, one per record."""

    truth: Floats
    pred: Floats


def pair_arrays(values: Sequence[Pair]) -> Pairs:
    """The two columns as float64; NaN or infinity anywhere is an error that counts them."""
    n = len(values)
    truth = np.fromiter(map(_FIRST, values), np.float64, n)
    pred = np.fromiter(map(_SECOND, values), np.float64, n)
    problems = [
        f"{count} {name}{'s are' if count > 1 else ' is'} {what}"
        for name, col in (("output", pred), ("reference", truth))
        for what, count in (
            ("NaN", int(np.isnan(col).sum())),
            ("infinite", int(np.isinf(col).sum())),
        )
        if count
    ]
    if problems:
        raise ValueError(f"{', '.join(problems)}; every value must be a finite number")
    return Pairs(truth, pred)


class RegressionMetric(Weighted[Pairs]):
    """map(): (truth, prediction); prepare(): two float64 columns."""

    map = staticmethod(map_pair)  # the runner calls it once per record: no extra frame
    prepare = staticmethod(pair_arrays)

    def reduce_weighted(self, prepared: Pairs, weights: Floats) -> Score:
        w = check_weights(weights, len(prepared.truth))
        value, note = self.value(prepared.truth, prepared.pred, w)
        if not np.isfinite(value):
            raise ValueError(f"the metric overflows ({value}); {note}")
        return Score(number=float(value), explanation=f"{note}, {fmt(w.sum())} records")

    def value(self, y: Floats, p: Floats, w: Floats) -> tuple[float, str]:  # pragma: no cover
        raise NotImplementedError


class Mae(RegressionMetric):
    """Mean absolute error, mean |y - ŷ|."""

    def value(self, y: Floats, p: Floats, w: Floats) -> tuple[float, str]:
        return float(np.average(np.abs(p - y), weights=w)), "mean |reference - output|"


class Mse(RegressionMetric):
    """Mean squared error, mean (y - ŷ)²."""

    def value(self, y: Floats, p: Floats, w: Floats) -> tuple[float, str]:
        return float(np.average((y - p) ** 2, weights=w)), "mean (reference - output)²"


class Rmse(RegressionMetric):
    """Root mean squared error, sqrt(mean (y - ŷ)²), in the unit of the reference."""

    def value(self, y: Floats, p: Floats, w: Floats) -> tuple[float, str]:
        mse = float(np.average((y - p) ** 2, weights=w))
        return float(np.sqrt(mse)), "sqrt(mean (reference - output)²)"


class R2(RegressionMetric):
    """Coefficient of determination, 1 - SS_res / SS_tot (1 is perfect, can be negative).

    As scikit-learn: a constant reference (SS_tot = 0) gives 1.0 for perfect predictions, else
    0.0; fewer than two records is an error (scikit-learn returns NaN). The reference counts as
    constant when all its values are equal, so rounding in the mean cannot turn SS_tot into a
    tiny positive number.
    """

    def value(self, y: Floats, p: Floats, w: Floats) -> tuple[float, str]:
        total = float(w.sum())
        if total < 2:
            raise ValueError(
                f"R² is not defined for fewer than two records (got {fmt(total)}); "
                "scikit-learn returns NaN"
            )
        num = float((w * (y - p) ** 2).sum())
        used = y if w.min() > 0 else y[w > 0]
        if used.min() == used.max():
            value = 1.0 if num == 0 else 0.0
            return value, "the reference is constant (1.0 if every output equals it, else 0.0)"
        den = float((w * (y - np.average(y, weights=w)) ** 2).sum())
        return 1.0 - num / den, "1 - SS_res / SS_tot"


class Mape(RegressionMetric):
    """Mean absolute percentage error as a fraction: mean |y - ŷ| / max(|y|, eps).

    0.05 means 5%. A zero reference divides by machine epsilon (2.2e-16), as scikit-learn
    does, so any error on it dominates the mean: the explanation counts such records.
    """

    def value(self, y: Floats, p: Floats, w: Floats) -> tuple[float, str]:
        ratio = np.abs(p - y) / np.maximum(np.abs(y), EPS)
        zeros = int(((y == 0) & (w > 0)).sum())
        note = "mean |reference - output| / |reference|, a fraction"
        if zeros:
            note += f"; {zeros} records have reference 0 (divided by machine epsilon)"
        return float(np.average(ratio, weights=w)), note
