"""What ``execute_run`` returns: a ``ScoreResult`` plus what only a Run has (tasks, trials,
infra errors, the reason it stopped early, spend) or, for a dry run, the plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalsi.runs._result import ScoreResult
from evalsi.runs._summaries import metric_dicts

if TYPE_CHECKING:
    from evalsi.evaluators import BoundEvaluator
    from evalsi.runs._categories import CategoryMetrics

EXIT_CANNOT_JUDGE = 2
EXIT_INFRA = 3


@dataclass
class RunResult(ScoreResult):
    """A Run's outcome. ``status`` is ``done``, ``stopped`` (a budget was hit; resumable with
    ``resume=run_id``), ``incomplete`` (every task lost to infrastructure), ``failed`` (no task
    scored: every call failed on the target's side; ``stopped_reason`` names the cause) or
    ``planned`` (dry run: nothing called, nothing stored).

    ``tasks`` counts (sample, trial) tasks by final status (``ok``, ``target_error``,
    ``skipped``, ``infra_error``, ``cancelled``); ``infra_errors`` is the tasks lost to
    infrastructure, never part of any metric's n.
    """

    trials: int = 1
    tasks: dict[str, int] = field(default_factory=dict)
    infra_errors: int = 0
    stopped_reason: str | None = None
    spend: dict[str, Any] = field(default_factory=dict)
    pass_k_samples: dict[str, dict[str, int]] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    infra_error_causes: list[dict[str, Any]] = field(default_factory=list)
    """The infra errors by kind, most frequent first: ``{"kind", "count", "example"}``."""
    target_error_causes: list[dict[str, Any]] = field(default_factory=list)
    """The target errors by kind (``http_<status>``, else ``target_error``), likewise."""
    graded_by: tuple[BoundEvaluator, ...] = field(default=(), repr=False, compare=False)
    """The evaluators the run was graded with (what ``categories`` summarises)."""
    exports: list[dict[str, Any]] = field(default_factory=list)
    """What ``spec.sinks`` did at the run's end: per sink its receipt, or its error."""

    def categories(self, key: str = "category") -> list[CategoryMetrics]:
        """The metrics per category of sample (``metadata[key]``), each computed as the run's
        own (intervals, pass@k / pass^k) from the stored scores; empty when no sample has
        ``key``, or when the result is not attached to its store (a dry run).

        Example:
            >>> for c in evalsi.run("run.yaml").categories():  # doctest: +SKIP
            ...     print(c.value, c.metrics[0].mean)
        """
        if self.plan is not None or self.store is None or not self.run_id:
            return []
        from evalsi.runs._categories import run_categories

        return run_categories(self.store, self.run_id, key, bound=self.graded_by or None)

    @property
    def exit_code(self) -> int:
        """0 every gate passed, 1 a gate failed, 2 undecided or nothing scored (``failed``:
        every call failed on the target's side), 3 the run could not finish."""
        if self.status == "planned":
            return 0
        if self.status == "failed":
            return EXIT_CANNOT_JUDGE
        if self.status != "done":
            return EXIT_INFRA
        return super().exit_code

    def to_dict(self) -> dict[str, Any]:
        if self.plan is not None:
            return {"run_id": self.run_id, "status": self.status, "plan": self.plan}
        out = super().to_dict()
        out["infra_errors"] = self.infra_errors
        out["trials"] = self.trials
        out["tasks"] = dict(self.tasks)
        out["stopped_reason"] = self.stopped_reason
        out["spend"] = dict(self.spend)
        out["infra_error_causes"] = [dict(c) for c in self.infra_error_causes]
        out["target_error_causes"] = [dict(c) for c in self.target_error_causes]
        out["metrics"] = metric_dicts(self.metrics, self.pass_k_samples)
        if self.exports:
            out["exports"] = [dict(e) for e in self.exports]
        return out

    def table(self) -> str:
        if self.plan is not None:
            return render_plan(self.plan)
        text = super().table()
        head = f"run {self.run_id}: {self.status}"
        if self.stopped_reason and self.status == "failed":
            head += f" ({self.stopped_reason})"
        elif self.stopped_reason:
            head += f" ({self.stopped_reason}; resume with --resume {self.run_id})"
        head += f" · tasks {sum(self.tasks.values())}, infra errors {self.infra_errors}"
        extra = [
            f"  {m.evaluator}/{m.metric}: pass@k "
            + ", ".join(f"{k}={v:.3f}" for k, v in m.pass_at_k.items())
            + " · pass^k "
            + ", ".join(f"{k}={v:.3f}" for k, v in m.pass_hat_k.items())
            for m in self.metrics
            if m.pass_at_k
        ]
        sent = [
            f"  {e['sink']}: "
            + (f"{e['receipt']['rows']} rows" if e["ok"] else f"NOT SENT ({e['error']})")
            for e in self.exports
        ]
        return "\n".join(
            [
                head,
                text,
                *(["", "trials", *extra] if extra else []),
                *(["", "sinks", *sent] if sent else []),
            ]
        )


def render_plan(plan: dict[str, Any]) -> str:
    """The dry-run plan as plain text."""
    projected = plan["projected"]
    usd = projected["usd"]
    lines = [
        f"plan for {plan['name'] or 'run'} (dry run: nothing called, nothing stored)",
        f"  target      {plan['target'].get('connector')} "
        + str(
            plan["target"].get("model") or plan["target"].get("ref") or plan["target"].get("url")
        ),
        f"  tasks       {plan['tasks']} ({plan['samples']} samples x {plan['trials']} trials), "
        f"maxConcurrency {plan['max_concurrency']}",
        "  evaluators  " + ", ".join(e["name"] for e in plan["evaluators"]),
        f"  tokens      ~{projected['tokens']} (input ~{projected['input_tokens']}, "
        f"output <= {projected['output_tokens']})",
        "  cost        "
        + (f"~${usd:.4f}" if usd is not None else f"unknown ({projected['note']})"),
    ]
    for name, judge in (projected.get("judges") or {}).items():
        cost = f"~${judge['usd']:.4f}" if judge["usd"] is not None else "cost unknown"
        lines.append(
            f"  judge       {name}: ~{judge['calls']} calls, ~{judge['tokens']} tokens, {cost} "
            "(before cache hits; included above)"
        )
    lines += [f"  budget      {k} {c['limit']}: {c['verdict']}" for k, c in plan["budget"].items()]
    lines += [f"  unpinned    {item}" for item in plan["unpinned"]]
    return "\n".join(lines)
