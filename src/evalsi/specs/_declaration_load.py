"""Reading and checking declarations and thresholds (``specs._declaration`` holds the values).

The schema (generated from ``proto/evalsi/v1alpha1/evidence.proto``) says which fields exist;
this module checks what it says poorly: a threshold bounds a category or a metric with exactly
one of min/max, nothing is listed twice, and a declared threshold only ever tightens the spec's
(an owner may promise more than the pack asks, never less).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalsi.specs._checks import Problem, raise_problems, read_spec_text, schema_problems
from evalsi.specs._declaration import CasePolicy, Declaration, Threshold, _statistic
from evalsi.specs._yaml import KeyPath, check_plain, line_of, parse_yaml


def thresholds_from(
    items: Sequence[Mapping[str, Any]], at: KeyPath, lines: Mapping[KeyPath, int], *, source: str
) -> tuple[list[Threshold], list[Problem]]:
    """Schema-valid ``thresholds`` items as ``Threshold``s, and what is wrong with them."""
    out: list[Threshold] = []
    problems: list[Problem] = []
    seen: dict[tuple[str, str, str, str], int] = {}
    for i, t in enumerate(items):
        where: KeyPath = (*at, i)

        def bad(message: str, where: KeyPath = where) -> None:
            problems.append(Problem(line_of(lines, where), where, message))

        category, metric = str(t.get("category", "")), str(t.get("metric", ""))
        if not category and not metric:
            bad("set category, metric or both (what the threshold bounds)")
            continue
        if ("min" in t) == ("max" in t):
            bad("set exactly one of min (the lowest value that passes) or max")
            continue
        bound = float(t["min"] if "min" in t else t["max"])
        if not math.isfinite(bound):
            bad(f"expected a finite bound, got {bound}")
            continue
        if metric and t.get("statistic"):
            bad("statistic applies to a category's tasks; a metric threshold bounds its mean")
            continue
        threshold = Threshold(
            category=category,
            metric=metric,
            min=bound if "min" in t else None,
            max=bound if "max" in t else None,
            kind="comparative" if t.get("kind") == "comparative" else "hard",
            statistic=_statistic(str(t.get("statistic", "")), metric),
            source=source,
        )
        if threshold.key in seen:
            bad(f"the same bound as item {seen[threshold.key]} ({threshold.describe()})")
            continue
        seen[threshold.key] = i
        out.append(threshold)
    return out, problems


def tightened(
    spec: Iterable[Threshold],
    declared: Iterable[Threshold],
    at: KeyPath,
    lines: Mapping[KeyPath, int],
) -> tuple[tuple[Threshold, ...], list[Problem]]:
    """The thresholds a run is judged by: the spec's, each replaced by the declaration's where
    it bounds the same thing more tightly, plus the declaration's new ones. A declared bound
    looser than the spec's, or a hard one made comparative, is a problem."""
    merged = {t.key: t for t in spec}
    problems: list[Problem] = []
    for i, d in enumerate(declared):
        base = merged.get(d.key)
        if base is None:
            merged[d.key] = d
            continue
        where: KeyPath = (*at, i)
        looser = d.bound < base.bound if d.min is not None else d.bound > base.bound
        if looser or (base.kind == "hard" and d.kind == "comparative"):
            side = "min" if d.min is not None else "max"
            why = (
                f"{side} {d.bound:g} loosens the spec's {side} {base.bound:g}"
                if looser
                else "makes the spec's hard threshold comparative"
            )
            problems.append(
                Problem(
                    line_of(lines, where),
                    where,
                    f"{why} ({base.describe()}); a declaration may only tighten thresholds",
                )
            )
            continue
        side = "min" if d.min is not None else "max"
        merged[d.key] = Threshold(
            category=d.category,
            metric=d.metric,
            min=d.min,
            max=d.max,
            kind=d.kind,
            statistic=d.statistic,
            source="declaration",
            tightens={side: base.bound},
        )
    return tuple(merged.values()), problems


def case_policy_from(doc: Mapping[str, Any] | None) -> CasePolicy | None:
    """A schema-valid ``casePolicy`` (its ranges are the schema's)."""
    if doc is None:
        return None
    least = doc.get("minEligibleTrials")
    return CasePolicy(float(doc.get("passRate", 1.0)), None if least is None else int(least))


def tightened_policy(
    spec: CasePolicy | None, declared: CasePolicy | None, at: KeyPath, lines: Mapping[KeyPath, int]
) -> tuple[CasePolicy | None, list[Problem]]:
    """The case policy in force: the declaration's may ask more than the spec's, never less."""
    if declared is None or spec is None:
        return declared or spec, []
    problems = []
    if declared.pass_rate < spec.pass_rate:
        problems.append(f"passRate {declared.pass_rate:g} loosens the spec's {spec.pass_rate:g}")
    fewer = (declared.min_eligible_trials or 0) < (spec.min_eligible_trials or 0)
    if spec.min_eligible_trials is not None and fewer:
        problems.append(
            f"minEligibleTrials {declared.min_eligible_trials} loosens the spec's "
            f"{spec.min_eligible_trials}"
        )
    if problems:
        where = line_of(lines, at)
        return None, [Problem(where, at, p + "; a declaration may only tighten") for p in problems]
    return declared, []


def declaration_from(
    doc: Mapping[str, Any], at: KeyPath, lines: Mapping[KeyPath, int], *, source: str = ""
) -> tuple[Declaration | None, list[Problem]]:
    """A schema-valid ``SystemDeclaration`` as a ``Declaration``, and what is wrong with it."""
    thresholds, problems = thresholds_from(
        doc.get("thresholds", ()), (*at, "thresholds"), lines, source="declaration"
    )
    exclude: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, e in enumerate(doc.get("exclude", ())):
        if e["scenario"] in seen:
            where: KeyPath = (*at, "exclude", i)
            problems.append(
                Problem(line_of(lines, where), where, f"scenario {e['scenario']!r} listed twice")
            )
            continue
        seen.add(e["scenario"])
        exclude.append((str(e["scenario"]), str(e["reason"])))
    tools = doc.get("tools", ())
    names = [t["name"] for t in tools]
    for i, name in enumerate(names):
        if name in names[:i]:
            where = (*at, "tools", i)
            problems.append(Problem(line_of(lines, where), where, f"tool {name!r} listed twice"))
    if problems:
        return None, problems
    return (
        Declaration(
            system={k: str(v) for k, v in doc["system"].items()},
            tools=tuple({k: str(v) for k, v in t.items()} for t in tools),
            human_involvement=str(doc.get("humanInvolvement", "")),
            intended_use=tuple(doc.get("intendedUse", ())),
            out_of_scope_use=tuple(doc.get("outOfScopeUse", ())),
            thresholds=tuple(thresholds),
            exclude=tuple(exclude),
            case_policy=case_policy_from(doc.get("casePolicy")),
            source=source,
            document=dict(doc),
        ),
        [],
    )


def load_declaration(path: str | os.PathLike[str]) -> Declaration:
    """A ``SystemDeclaration`` file, or a ``SpecError`` naming its line, field and expectation.

    Example:
        >>> load_declaration("missing.yaml")
        Traceback (most recent call last):
        ...
        evalsi.core._errors.SpecError: missing.yaml: cannot read the declaration file (not found)
    """
    shown = str(path)
    text = read_spec_text(Path(path), shown, "declaration")
    doc, lines = parse_yaml(text, shown)
    check_plain(doc, (), shown, lines)
    problems = schema_problems("systemdeclaration", doc, lines)
    if not problems:
        declaration, problems = declaration_from(
            doc["spec"], ("spec",), lines, source=str(Path(path).resolve())
        )
        if declaration is not None:
            return declaration
    raise_problems(shown, lines, problems)
    raise AssertionError("unreachable")  # raise_problems always raises


__all__ = [
    "case_policy_from",
    "declaration_from",
    "load_declaration",
    "thresholds_from",
    "tightened",
    "tightened_policy",
]
