"""``task-success``: whether the agent left the environment in the state the task asked for,
as the environment's checks judged it (``Trajectory.checks``, written by the harness when the
agent stopped). The checks are evidence the harness gathered, not the agent's account, so this
is the outcome metric of an agent run; a trajectory without checks is not measured."""

from __future__ import annotations

from evalsi.core import Record, Score
from evalsi.evaluators import Skip
from evalsi.packs._declare import builtin, few, number, passed


@builtin(
    "agent",
    "task-success",
    passed("task-success", "every environment check passed"),
    number("checks-passed", "share of the environment's checks that passed"),
    requires=(),
    example="evalsi eval --data examples/agent/predicates.jsonl --evaluators task-success",
)
def task_success(record: Record) -> list[Score]:
    """Pass when the environment recorded checks of the end state and every one passed; the
    explanation lists the failing checks with their details. SKIPPED when no check was
    recorded (a trajectory from a trace or a dataset without checks)."""
    checks = record.trajectory.checks if record.trajectory is not None else []
    if not checks:
        raise Skip("no environment check recorded")
    failed = [c for c in checks if not c.passed]
    if failed:
        shown = [f"{c.name} ({c.detail})" if c.detail else c.name for c in failed]
        explanation = f"{len(failed)} of {len(checks)} check(s) failed: {few(shown, 5)}"
    else:
        explanation = f"all {len(checks)} check(s) passed: {few([c.name for c in checks], 5)}"
    return [
        Score(passed=not failed, explanation=explanation),
        Score(name="checks-passed", number=1 - len(failed) / len(checks)),
    ]
