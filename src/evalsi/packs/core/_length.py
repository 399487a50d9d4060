"""The ``length`` evaluator: how long the output is, in characters or words, and within bounds."""

from __future__ import annotations

from typing import Literal

from evalsi.core import ParamError, Record, Score
from evalsi.packs._declare import builtin, check_at_least, number, passed


class Length:
    """Measure the output's length in characters or words, optionally against bounds.

    Counts ``output.as_text()``: ``chars`` are Unicode code points, ``words`` are runs of
    non-whitespace. Emits ``length`` (number) and, when ``min`` or ``max`` is set,
    ``length-in-bounds`` (passed when min <= length <= max, bounds inclusive).

    Args:
        unit: ``chars`` (default) or ``words``.
        min: the smallest acceptable length.
        max: the largest acceptable length.
    """

    __slots__ = ("_bounded", "_high", "_low", "_words")

    def __init__(
        self,
        *,
        unit: Literal["chars", "words"] = "chars",
        min: int | None = None,  # shadows the builtin: `min` is the name users write
        max: int | None = None,
    ) -> None:
        for name, bound in (("min", min), ("max", max)):
            if bound is not None:
                check_at_least("length", name, bound, 0)
        if min is not None and max is not None and min > max:
            raise ParamError(f"length: param 'min' ({min}) is greater than param 'max' ({max})")
        self._words = unit == "words"
        self._bounded = min is not None or max is not None
        self._low = 0 if min is None else min
        self._high = max

    def __call__(self, record: Record) -> float | list[Score]:
        out = record.output
        assert out is not None
        text = out.as_text()
        n = len(text.split()) if self._words else len(text)
        if not self._bounded:
            return float(n)
        high = self._high
        inside = self._low <= n and (high is None or n <= high)
        return [Score(number=float(n)), Score(name="length-in-bounds", passed=inside)]


length = builtin(
    "core",
    "length",
    number("length", "length of the output in `unit`s (>= 0)", None, None),
    passed("length-in-bounds", "min <= length <= max (only when a bound is set)"),
    example="evalsi eval --data summaries.jsonl --evaluators length "
    "--param length.unit=words --param length.max=120",
)(Length)
