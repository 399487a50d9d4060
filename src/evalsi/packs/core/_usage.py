"""What producing the output cost: ``latency``, ``tokens`` and ``cost``, each with a budget.

The values come from ``record.usage``; a record whose usage lacks the field is skipped by the
runner (``requires``), never scored as zero. Over budget, the explanation shows both:
``latency 2310 ms > budget 2000 ms``.
"""

from __future__ import annotations

from collections.abc import Callable

from evalsi.core import OutputSpec, ParamError, Record, Score
from evalsi.evaluators import evaluator


def _budget(evaluator_name: str, param: str, value: float | None) -> float | None:
    if value is not None and value < 0:
        raise ParamError(f"{evaluator_name}: param {param!r} must be >= 0, got {value}")
    return value


def _measured(
    value: float, budget: float | None, metric: str, show: Callable[[float], str]
) -> float | list[Score]:
    if budget is None:
        return float(value)
    if value <= budget:
        return [Score(number=float(value)), Score(name=metric, passed=True)]
    why = f"{metric.split('-')[0]} {show(value)} > budget {show(budget)}"
    return [Score(number=float(value)), Score(name=metric, passed=False, explanation=why)]


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.3g} ms"


def _tokens(value: float) -> str:
    return f"{value:.0f}"


def _usd(value: float) -> str:
    return f"${value:.6g}"


class Latency:
    """Report how long producing the output took, in milliseconds.

    Reads ``usage.latency_ms``. Emits ``latency`` (number, lower is better) and, when
    ``max_ms`` is set, ``latency-within-budget`` (passed when latency <= max_ms).

    Args:
        max_ms: the latency budget in milliseconds.
    """

    __slots__ = ("_max",)

    def __init__(self, *, max_ms: float | None = None) -> None:
        self._max = _budget("latency", "max_ms", max_ms)

    def __call__(self, record: Record) -> float | list[Score]:
        usage = record.usage
        assert usage is not None  # `requires` checked it
        assert usage.latency_ms is not None
        return _measured(usage.latency_ms, self._max, "latency-within-budget", _ms)


latency = evaluator(
    name="builtin/latency",
    version="1.0.0",
    pack="core",
    requires=("usage.latency_ms",),
    outputs=[
        OutputSpec("latency", "number", None, False, "time to produce the output, in ms"),
        OutputSpec(
            "latency-within-budget", "passed", (0.0, 1.0), True, "latency <= max_ms (when set)"
        ),
    ],
    example="evalsi eval --data traces.jsonl --evaluators latency --param latency.max_ms=2000",
)(Latency)


class Tokens:
    """Report how many tokens producing the output used.

    Reads ``usage.tokens()``: ``total_tokens`` when given, else input + output tokens. Emits
    ``tokens`` (number, lower is better) and, when ``max_tokens`` is set,
    ``tokens-within-budget`` (passed when tokens <= max_tokens).

    Args:
        max_tokens: the token budget.
    """

    __slots__ = ("_max",)

    def __init__(self, *, max_tokens: int | None = None) -> None:
        self._max = _budget("tokens", "max_tokens", max_tokens)

    def __call__(self, record: Record) -> float | list[Score]:
        usage = record.usage
        assert usage is not None
        tokens = usage.tokens()
        assert tokens is not None
        return _measured(tokens, self._max, "tokens-within-budget", _tokens)


tokens = evaluator(
    name="builtin/tokens",
    version="1.0.0",
    pack="core",
    requires=("usage.tokens",),
    outputs=[
        OutputSpec("tokens", "number", None, False, "total tokens used for the output"),
        OutputSpec(
            "tokens-within-budget", "passed", (0.0, 1.0), True, "tokens <= max_tokens (when set)"
        ),
    ],
    example="evalsi eval --data traces.jsonl --evaluators tokens --param tokens.max_tokens=4096",
)(Tokens)


class Cost:
    """Report what producing the output cost, in US dollars.

    Reads ``usage.cost_usd``. Emits ``cost`` (number, lower is better) and, when ``max_usd`` is
    set, ``cost-within-budget`` (passed when cost <= max_usd).

    Args:
        max_usd: the cost budget in US dollars.
    """

    __slots__ = ("_max",)

    def __init__(self, *, max_usd: float | None = None) -> None:
        self._max = _budget("cost", "max_usd", max_usd)

    def __call__(self, record: Record) -> float | list[Score]:
        usage = record.usage
        assert usage is not None
        assert usage.cost_usd is not None
        return _measured(usage.cost_usd, self._max, "cost-within-budget", _usd)


cost = evaluator(
    name="builtin/cost",
    version="1.0.0",
    pack="core",
    requires=("usage.cost_usd",),
    outputs=[
        OutputSpec("cost", "number", None, False, "what the output cost, in US dollars"),
        OutputSpec("cost-within-budget", "passed", (0.0, 1.0), True, "cost <= max_usd (when set)"),
    ],
    example="evalsi eval --data traces.jsonl --evaluators cost --param cost.max_usd=0.01",
)(Cost)
