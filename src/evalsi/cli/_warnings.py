"""Warnings a run collected (bad rows skipped, repeated ids, failed target calls), on stderr."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalsi.cli._output import note


def print_warnings(warnings: Iterable[Mapping[str, Any]]) -> None:
    """``warning_lines`` on stderr."""
    for line in warning_lines(warnings):
        note(line)


def warning_lines(warnings: Iterable[Mapping[str, Any]]) -> list[str]:
    """One ``warning:`` line per warning (``error:`` for what decides the exit code: an
    evaluator that judged nothing), its examples indented under it (the first names the first
    case already)."""
    lines = []
    for w in warnings:
        label = "error" if w.get("kind") == "nothing_judged" else "warning"
        lines.append(f"{label}: {w.get('message', '')}")
        lines.extend(f"  also: {e}" for e in list(w.get("examples") or [])[1:])
    return lines


def result_warnings(result: Any) -> list[Mapping[str, Any]]:
    """A result's warnings; a bad-record count that came without them (a result from a server,
    whose data was read here) still becomes one, and so does an evaluator that judged nothing."""
    warnings: list[Mapping[str, Any]] = list(getattr(result, "warnings", None) or [])
    told = {w.get("evaluator") for w in warnings if w.get("kind") == "nothing_judged"}
    judged_nothing = getattr(result, "judged_nothing", None)  # a server's Evaluate leaves it out
    if judged_nothing is not None:
        warnings.extend(w for w in judged_nothing() if w["evaluator"] not in told)
    bad = getattr(result, "bad_records", 0)
    if bad and not any(w.get("kind") == "bad_records" for w in warnings):
        examples = [f"line {line}: {msg}" for line, msg in result.bad_examples[:5]]
        first = f" (first: {examples[0]})" if examples else ""
        warnings.insert(
            0,
            {
                "kind": "bad_records",
                "message": f"skipped {bad} bad record(s){first}",
                "count": bad,
                "examples": examples,
            },
        )
    return warnings
