"""Gate results: a gate's verdict, the exit code of a set of verdicts, and their table rows.

``GateResult`` is what ``Gate.evaluate`` (in ``_gates``) returns; ``gates_exit_code`` and
``gate_rows`` read the stored JSON form of results (``GateResult.to_dict``), so they also serve
runs read back from the store.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from evalsi.runs.gates._syntax import _shorten

Verdict = Literal["passed", "failed", "inconclusive"]


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class GateResult:
    """A gate's verdict. ``value`` is the observed side of a simple comparison (the number the
    threshold was checked against), else the expression's result; null when inconclusive."""

    expr: str
    verdict: Verdict
    value: float | int | bool | None
    reason: str

    @property
    def passed(self) -> bool | None:
        return None if self.verdict == "inconclusive" else self.verdict == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "passed": self.passed,
            "verdict": self.verdict,
            "value": self.value,
            "reason": self.reason,
        }


# ---------------------------------------------------------------------------------------------
# Exit code and table rows


def gates_exit_code(results: Iterable[Mapping[str, Any]]) -> int:
    """0 every gate passed (or none given); 1 one failed; 2 none failed but one is undecided.

    A failure wins over an inconclusive gate: what was measured already breaks the bar.
    """
    verdicts = {r.get("verdict") for r in results}
    if "failed" in verdicts:
        return 1
    if verdicts - {"passed"}:
        return 2
    return 0


GATE_COLUMNS = ("verdict", "gate", "value", "reason")
_MARKS = {"passed": ("✔", "+"), "failed": ("✘", "x"), "inconclusive": ("?", "?")}


def gate_rows(
    results: Iterable[Mapping[str, Any]], *, ascii_only: bool | None = None
) -> list[tuple[str, str, str, str]]:
    """Table rows for stored gate results; marks fall back to ASCII when stdout cannot print ✔."""
    if ascii_only is None:
        ascii_only = not _can_print("✔✘")
    rows = []
    for r in results:
        verdict = str(r.get("verdict") or _verdict_of(r.get("passed")))
        marks = _MARKS.get(verdict, ("?", "?"))
        mark = marks[1] if ascii_only else marks[0]
        expr = _shorten(str(r.get("expr", "")), 70)
        if ascii_only:
            expr = expr.replace("…", "...")
        value = r.get("value")
        rows.append((f"{mark} {verdict}", expr, _fmt(value), str(r.get("reason") or "")))
    return rows


def _verdict_of(passed: Any) -> str:
    return "inconclusive" if passed is None else "passed" if passed else "failed"


def _can_print(text: str) -> bool:
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
