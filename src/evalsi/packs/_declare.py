"""What the packs' own modules share: how a built-in evaluator is declared (one home for the
namespace, the version and the common shapes of an output spec), param checks and clipping.
A shared module, not a pack: its name starts with an underscore."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from evalsi.core import OutputSpec, ParamError, Scope
from evalsi.evaluators import Evaluator, evaluator


def builtin(
    pack: str,
    name: str,
    *outputs: OutputSpec,
    example: str,
    requires: Iterable[str] = ("output",),
    scope: Scope | str = Scope.RECORD,
) -> Callable[[Any], Evaluator]:
    """The decorator that registers a function or class as ``builtin/<name>@1.0.0``."""
    return evaluator(
        name=f"builtin/{name}",
        version="1.0.0",
        scope=scope,
        pack=pack,
        requires=requires,
        outputs=outputs,
        example=example,
    )


def passed(name: str, desc: str) -> OutputSpec:
    """A pass/fail metric."""
    return OutputSpec(name, "passed", (0.0, 1.0), True, desc)


def number(
    name: str,
    desc: str,
    bounds: tuple[float, float] | None = (0.0, 1.0),
    higher: bool | None = True,
) -> OutputSpec:
    """A numeric metric, a score in 0..1 where higher is better unless said otherwise."""
    return OutputSpec(name, "number", bounds, higher, desc)


def lower(name: str, desc: str) -> OutputSpec:
    """An unbounded number where lower is better: steps, tokens, time, money, edits."""
    return OutputSpec(name, "number", None, False, desc)


def check_at_least(metric: str, param: str, value: float, low: float) -> None:
    """``value >= low`` or a ParamError naming the param."""
    if value < low:
        raise ParamError(f"{metric}: param {param!r} must be >= {low}, got {value}")


def check_choice(metric: str, param: str, value: str, allowed: tuple[str, ...]) -> None:
    """``value`` in ``allowed`` or a ParamError listing them."""
    if value not in allowed:
        raise ParamError(
            f"{metric}: param {param!r} must be one of {', '.join(allowed)}, got {value!r}"
        )


def yes_no(value: Any) -> bool | None:
    """A boolean, or the text true, yes, false or no in any case; else None."""
    if isinstance(value, str):
        value = {"true": True, "yes": True, "false": False, "no": False}.get(value.strip().lower())
    return value if isinstance(value, bool) else None


def few(items: list[str], shown: int = 3) -> str:
    """The first ``shown`` items, and how many more there are, for an explanation."""
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def clip(text: str, limit: int = 120) -> str:
    """``text`` cut to at most ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
