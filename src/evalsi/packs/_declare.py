"""How a built-in evaluator is declared: ``builtin/<name>@1.0.0`` in its pack.

Every pack registers its evaluators through ``builtin``, so the namespace, the version and the
shape of an output spec have one home.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from evalsi.core import OutputSpec, Scope
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
