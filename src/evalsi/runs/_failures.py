"""Why a Run's target calls failed, told where the user looks: the run's status and error,
its warnings, and the causes ``--format json`` and ``runs show`` list.

A run whose every call failed used to end ``done`` with n = 0 and exit 0, the cause visible
only task by task. Now the causes are grouped by kind (the infra error kind, or
``http_<status>`` for a target error) with one example message each, and a run that scored
nothing says so in its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from evalsi.store import SqlStore

_EXAMPLE_CHARS: Final = 300


@dataclass(frozen=True, slots=True)
class Causes:
    """The failed tasks of a run, by status: ``[{"kind", "count", "example"}]`` each."""

    infra: list[dict[str, Any]]
    target: list[dict[str, Any]]


def failure_causes(db: SqlStore, run_id: str) -> Causes:
    infra: list[dict[str, Any]] = []
    target: list[dict[str, Any]] = []
    for status, kind, count, example in db.task_failures(run_id):
        cause = {"kind": kind, "count": count, "example": _first_line(example)}
        (infra if status == "infra_error" else target).append(cause)
    return Causes(infra, target)


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= _EXAMPLE_CHARS else line[: _EXAMPLE_CHARS - 3] + "..."


def describe_causes(causes: list[dict[str, Any]]) -> str:
    """``http_403 (20): HTTP 403 from URL: ...; connection (2): ...`` — the example of the
    most frequent kind first, the other kinds by name and count."""
    if not causes:
        return ""
    head = causes[0]
    text = f"{head['kind']} ({head['count']}): {head['example']}"
    others = ", ".join(f"{c['kind']} ({c['count']})" for c in causes[1:4])
    if others:
        text += f"; also {others}" + (" ..." if len(causes) > 4 else "")
    return text


def nothing_scored(counts: Mapping[str, int], causes: Causes) -> str | None:
    """Why a run scored no task although it had some, or None when some task was scored (or
    the run had none). Skipped samples (that could not become a request) count as unscored."""
    total = sum(counts.values())
    if not total or counts.get("ok", 0):
        return None
    failed = counts.get("target_error", 0) + counts.get("infra_error", 0)
    if failed:
        why = describe_causes(sorted(causes.infra + causes.target, key=lambda c: -c["count"]))
        return f"no task was scored: all {failed} target calls failed: {why}"
    skipped = counts.get("skipped", 0)
    if skipped:
        return f"no task was scored: all {skipped} samples were skipped (none could be sent)"
    return None


def failure_warnings(counts: Mapping[str, int], causes: Causes) -> list[dict[str, Any]]:
    """Warnings for a run that scored some tasks and lost others to failed calls."""
    total = sum(counts.values())
    out: list[dict[str, Any]] = []
    lost = counts.get("infra_error", 0)
    if lost:
        out.append(
            {
                "kind": "infra_errors",
                "message": f"{lost} of {total} tasks were lost to infrastructure errors (never "
                f"part of n; --resume retries them): {describe_causes(causes.infra)}",
                "count": lost,
                "examples": [c["example"] for c in causes.infra[:5]],
            }
        )
    failed = counts.get("target_error", 0)
    if failed:
        out.append(
            {
                "kind": "target_errors",
                "message": f"{failed} of {total} target calls failed (every evaluator's result "
                f"is an error for them): {describe_causes(causes.target)}",
                "count": failed,
                "examples": [c["example"] for c in causes.target[:5]],
            }
        )
    return out
