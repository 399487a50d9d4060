"""The system under test as its owner declares it, and the thresholds a run is judged by.

An EvalRun carries them in ``spec.declaration`` and ``spec.thresholds``; ``evalsi eval
--declaration FILE`` reads a ``SystemDeclaration`` file. The schema (generated from
``proto/evalsi/v1alpha1/evidence.proto``) says which fields exist; this module checks what it
says poorly: a threshold bounds a category or a metric with exactly one of min/max, nothing is
listed twice, and a declared threshold only ever tightens the spec's (an owner may promise more
than the pack asks, never less).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evalsi.specs._checks import Problem, raise_problems, read_spec_text, schema_problems
from evalsi.specs._yaml import KeyPath, check_plain, line_of, parse_yaml

ThresholdKind = Literal["hard", "comparative"]
Statistic = Literal["pass_hat_k", "pass_rate", "mean"]


@dataclass(frozen=True, slots=True)
class Threshold:
    """A bound on a category's task pass rate or on a metric's mean.

    ``source`` says who set it (``spec`` or ``declaration``); ``tightens`` holds the spec's
    bound a declared threshold replaced.
    """

    category: str = ""
    metric: str = ""
    min: float | None = None
    max: float | None = None
    kind: ThresholdKind = "hard"
    statistic: Statistic = "pass_hat_k"
    source: str = "spec"
    tightens: Mapping[str, float] | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What it bounds and from which side: two thresholds with one key are one promise."""
        return (
            self.category,
            self.metric,
            self.statistic,
            "min" if self.min is not None else "max",
        )

    @property
    def bound(self) -> float:
        value = self.min if self.min is not None else self.max
        assert value is not None
        return value

    def passes(self, value: float) -> bool:
        """Whether ``value`` meets the bound (equality passes)."""
        return value >= self.bound if self.min is not None else value <= self.bound

    def describe(self) -> str:
        """One line: ``category task-execution pass^k >= 0.9 (hard, spec)``."""
        what = " ".join(
            p
            for p in (
                f"category {self.category}" if self.category else "",
                f"metric {self.metric}" if self.metric else "",
            )
            if p
        )
        stat = {"pass_hat_k": "pass^k", "pass_rate": "pass rate", "mean": "mean"}[self.statistic]
        op = ">=" if self.min is not None else "<="
        return f"{what} {stat} {op} {self.bound:g} ({self.kind}, {self.source})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "category": self.category or None,
            "metric": self.metric or None,
            "statistic": self.statistic,
            "kind": self.kind,
            "source": self.source,
        }
        out["min" if self.min is not None else "max"] = self.bound
        if self.tightens:
            out["tightens"] = dict(self.tightens)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Threshold:
        """A threshold as a test plan records it (``to_dict``)."""
        tightens = data.get("tightens")
        return cls(
            category=str(data.get("category") or ""),
            metric=str(data.get("metric") or ""),
            min=None if data.get("min") is None else float(data["min"]),
            max=None if data.get("max") is None else float(data["max"]),
            kind="comparative" if data.get("kind") == "comparative" else "hard",
            statistic=_statistic(str(data.get("statistic") or ""), str(data.get("metric") or "")),
            source=str(data.get("source") or "spec"),
            tightens=dict(tightens) if isinstance(tightens, Mapping) else None,
        )


@dataclass(frozen=True, slots=True)
class Declaration:
    """What the owner says the system is, may do and is for; fixed before the first task."""

    system: Mapping[str, str]
    tools: tuple[Mapping[str, str], ...] = ()
    human_involvement: str = ""
    intended_use: tuple[str, ...] = ()
    out_of_scope_use: tuple[str, ...] = ()
    thresholds: tuple[Threshold, ...] = ()
    exclude: tuple[tuple[str, str], ...] = ()
    """(scenario id, reason): samples left out of the test; they are not run."""
    source: str = ""
    document: Mapping[str, Any] = field(default_factory=dict)
    """The declaration as written (camelCase keys), for the plan and the spec hash."""

    @property
    def excluded(self) -> dict[str, str]:
        return dict(self.exclude)

    def to_dict(self) -> dict[str, Any]:
        """As a test plan records it."""
        return {
            "system": dict(self.system),
            "tools": [dict(t) for t in self.tools],
            "human_involvement": self.human_involvement or None,
            "intended_use": list(self.intended_use),
            "out_of_scope_use": list(self.out_of_scope_use),
            "exclude": [{"scenario": s, "reason": r} for s, r in self.exclude],
            "source": self.source or None,
        }


def _statistic(value: str, metric: str) -> Statistic:
    if metric:
        return "mean"
    return "pass_rate" if value == "pass_rate" else "pass_hat_k"


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
    "Declaration",
    "Statistic",
    "Threshold",
    "ThresholdKind",
    "declaration_from",
    "load_declaration",
    "thresholds_from",
    "tightened",
]
