"""What producing the output cost: ``latency``, ``tokens`` and ``cost``, each with a budget.

The values come from ``record.usage``; a record whose usage lacks the field is skipped by the
runner (``requires``), never scored as zero. Over budget, the explanation shows both:
``latency 2310 ms > budget 2000 ms``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from evalsi.core import Record, Score, Usage
from evalsi.evaluators import Evaluator
from evalsi.packs._declare import builtin, check_at_least, lower, passed


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.3g} ms"


class _Budgeted:
    """One usage figure, and whether it is within the budget when one is set."""

    __slots__ = ("_max",)
    metric: ClassVar[str]
    param: ClassVar[str]
    show: ClassVar[Callable[[float], str]]

    def __init__(self, budget: float | None) -> None:
        if budget is not None:
            check_at_least(self.metric, self.param, budget, 0)
        self._max = budget

    def __call__(self, record: Record) -> float | list[Score]:
        assert record.usage is not None  # `requires` checked it
        value = self.read(record.usage)
        assert value is not None
        budget = self._max
        if budget is None:
            return float(value)
        metric, show = f"{self.metric}-within-budget", type(self).show
        if value <= budget:
            return [Score(number=float(value)), Score(name=metric, passed=True)]
        why = f"{self.metric} {show(value)} > budget {show(budget)}"
        return [Score(number=float(value)), Score(name=metric, passed=False, explanation=why)]

    def read(self, usage: Usage) -> float | None:
        raise NotImplementedError


class Latency(_Budgeted):
    """Report how long producing the output took, in milliseconds.

    Reads ``usage.latency_ms``. Emits ``latency`` (number, lower is better) and, when
    ``max_ms`` is set, ``latency-within-budget`` (passed when latency <= max_ms).

    Args:
        max_ms: the latency budget in milliseconds.
    """

    __slots__ = ()
    metric, param, show = "latency", "max_ms", _ms

    def __init__(self, *, max_ms: float | None = None) -> None:
        super().__init__(max_ms)

    def read(self, usage: Usage) -> float | None:
        return usage.latency_ms


class Tokens(_Budgeted):
    """Report how many tokens producing the output used.

    Reads ``usage.tokens()``: ``total_tokens`` when given, else input + output tokens. Emits
    ``tokens`` (number, lower is better) and, when ``max_tokens`` is set,
    ``tokens-within-budget`` (passed when tokens <= max_tokens).

    Args:
        max_tokens: the token budget.
    """

    __slots__ = ()
    metric, param, show = "tokens", "max_tokens", "{:.0f}".format

    def __init__(self, *, max_tokens: int | None = None) -> None:
        super().__init__(max_tokens)

    def read(self, usage: Usage) -> float | None:
        return usage.tokens()


class Cost(_Budgeted):
    """Report what producing the output cost, in US dollars.

    Reads ``usage.cost_usd``. Emits ``cost`` (number, lower is better) and, when ``max_usd`` is
    set, ``cost-within-budget`` (passed when cost <= max_usd).

    Args:
        max_usd: the cost budget in US dollars.
    """

    __slots__ = ()
    metric, param, show = "cost", "max_usd", "${:.6g}".format

    def __init__(self, *, max_usd: float | None = None) -> None:
        super().__init__(max_usd)

    def read(self, usage: Usage) -> float | None:
        return usage.cost_usd


def _declare(cls: type[_Budgeted], requires: str, desc: str, budget: str) -> Evaluator:
    name = cls.metric
    return builtin(
        "core",
        name,
        lower(name, desc),
        passed(f"{name}-within-budget", f"{name} <= {cls.param} (when set)"),
        requires=(requires,),
        example=f"evalsi eval --data traces.jsonl --evaluators {name} --param {name}.{budget}",
    )(cls)


latency = _declare(Latency, "usage.latency_ms", "time to produce the output, in ms", "max_ms=2000")
tokens = _declare(Tokens, "usage.tokens", "total tokens used for the output", "max_tokens=4096")
cost = _declare(Cost, "usage.cost_usd", "what the output cost, in US dollars", "max_usd=0.01")
