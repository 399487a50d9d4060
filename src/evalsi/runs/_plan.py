"""Turning what the user named (refs, objects, params) into bound evaluators, checked up front.

Everything that can be wrong with the evaluator list (an unknown name, a bad param, a scope that
does not run yet, two instances with one name) fails here, before any data is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from evalsi.core import ParamError, UserError
from evalsi.evaluators import BoundEvaluator, Evaluator, Registry, Runner, make_runner

EvaluatorLike: TypeAlias = str | Evaluator | BoundEvaluator | Mapping[str, Any]


def bind_all(
    evaluators: Iterable[EvaluatorLike],
    *,
    registry: Registry,
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[BoundEvaluator]:
    """Bind every evaluator with its params; ``params`` is keyed by instance or evaluator name."""
    params = dict(params or {})
    used: set[str] = set()
    bound: list[BoundEvaluator] = []
    for item in evaluators:
        if isinstance(item, BoundEvaluator):
            bound.append(item)
            continue
        alias = ""
        given: Mapping[str, Any] = {}
        if isinstance(item, Mapping):
            unknown = set(item) - {"ref", "params", "name"}
            if unknown or "ref" not in item:
                raise UserError(
                    f"evaluator entry {dict(item)!r}: expected keys ref (required), params, name"
                )
            ev = registry.resolve(str(item["ref"]))
            given = item.get("params") or {}
            if not isinstance(given, Mapping):
                raise ParamError(f"{ev.name}: params must be a mapping, got {type(given).__name__}")
            alias = str(item.get("name") or "")
        elif isinstance(item, Evaluator):
            ev = item
        elif isinstance(item, str):
            ev = registry.resolve(item)
        else:
            raise UserError(
                f"cannot use {item!r} as an evaluator: give a name, an @evaluator, or "
                "{'ref': ..., 'params': ...}"
            )
        name = alias or ev.name
        for key in (name, ev.name, ev.manifest.name):
            if key in params:
                given = {**params[key], **given}
                used.add(key)
                break
        bound.append(ev.bind(given, alias=name))
    names = [b.name for b in bound]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UserError(
            f"evaluator instance name(s) used twice: {', '.join(dupes)}",
            hint="give each instance its own name: {'ref': 'exact-match', 'name': 'em-ci', ...}",
        )
    stray = sorted(set(params) - used)
    if stray:
        raise ParamError(
            f"params given for evaluator(s) not in this run: {', '.join(stray)}",
            hint="the evaluators are: " + ", ".join(names),
        )
    if not bound:
        raise UserError(
            "no evaluators given", hint="name at least one, e.g. --evaluators exact-match"
        )
    return bound


def runners_for(bound: list[BoundEvaluator]) -> list[Runner]:
    return [make_runner(b) for b in bound]


def require_sandboxes(bound: Sequence[BoundEvaluator]) -> None:
    """Stop before any record or call when an evaluator that runs code in the sandbox (one
    with a ``min_isolation`` param: the code pack) has no sandbox rung at or above it here:
    every way in fails closed up front, instead of losing each record to infrastructure.

    Raises:
        UserError: names the evaluator, the level and what to install.
    """
    for b in bound:
        floor = next((p.default for p in b.evaluator.params if p.name == "min_isolation"), None)
        if floor is None:
            continue
        from evalsi.packs.code import require_sandbox

        require_sandbox(str(b.params.get("min_isolation", floor)), who=b.name)
