"""Why a Run's target calls failed, told where the user looks: the run's status and error,
its warnings, and the causes ``--format json`` and ``runs show`` list.

A run whose every call failed used to end ``done`` with n = 0 and exit 0, the cause visible
only task by task. Now the causes are grouped by kind (the infra error kind, or
``http_<status>`` for a target error) with one example message each, and a run that scored
nothing says so in its status.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from evalsi.core import INFRA_PREFIX, EvaluationResult, MetricSummary, Outcome

if TYPE_CHECKING:  # the store loads SQLAlchemy; results read elsewhere do not need it
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
    lost, failed = counts.get("infra_error", 0), counts.get("target_error", 0)
    if lost:
        what = "tasks were lost to infrastructure errors (never part of n; --resume retries them)"
        out.append(_warning("infra_errors", lost, total, what, causes.infra))
    if failed:
        what = "target calls failed (every evaluator's result is an error for them)"
        out.append(_warning("target_errors", failed, total, what, causes.target))
    return out


def _warning(
    kind: str, count: int, total: int, what: str, causes: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "kind": kind,
        "message": f"{count} of {total} {what}: {describe_causes(causes)}",
        "count": count,
        "examples": [c["example"] for c in causes[:5]],
    }


def judged_nothing(
    metrics: Iterable[MetricSummary], first_reason: Callable[[str, bool], str]
) -> list[dict[str, Any]]:
    """A warning per evaluator that tried records and scored none: every result an error.

    Its figures (n = 0) would otherwise read as a clean run. ``first_reason(evaluator, infra)``
    gives the reason of its first such error. Lost to infrastructure (an unreachable judge,
    no sandbox) is exit 3; any other error (a judge refusing its key, an evaluator that raises)
    means the run cannot judge it, exit 2 (``ScoreResult.exit_code``).
    """
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for m in metrics:
        if m.evaluator in seen or m.scored or not (m.errors or m.infra_errors):
            continue
        seen.add(m.evaluator)
        infra = bool(m.infra_errors)
        head, _, hint = first_reason(m.evaluator, infra).partition("\n  hint: ")
        why = _first_line(head) or "see its errors"
        if hint.strip():  # what to do about it, said once here rather than record by record
            why += f" (hint: {_first_line(hint)})"
        count = m.infra_errors if infra else m.errors
        message = (
            f"{m.evaluator} judged nothing: every record failed on infrastructure; first: {why}"
            if infra
            else f"{m.evaluator} judged nothing: all {count} result(s) are errors; first: {why}"
        )
        out.append(
            {
                "kind": "nothing_judged",
                "message": message,
                "count": count,
                "examples": [why],
                "evaluator": m.evaluator,
                "infra": infra,
            }
        )
    return out


def first_error_reason(results: Iterable[EvaluationResult], evaluator: str, infra: bool) -> str:
    """The reason of ``evaluator``'s first error among ``results`` (an infrastructure error
    with ``infra``, else any), "" when there is none."""
    for result in results:
        if (
            result.evaluator == evaluator
            and result.outcome is Outcome.ERROR
            and (not infra or result.reason.startswith(INFRA_PREFIX))
        ):
            return str(result.reason)
    return ""


def stored_reasons(db: SqlStore, run_id: str) -> Callable[[str, bool], str]:
    """``first_reason`` for ``judged_nothing`` over a run's stored results."""

    def first(evaluator: str, infra: bool) -> str:
        errors = (r for _, _, r in db.iter_results(run_id, outcome=Outcome.ERROR))
        return first_error_reason(errors, evaluator, infra)

    return first
