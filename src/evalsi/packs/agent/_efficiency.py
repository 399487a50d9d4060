"""``step-efficiency``: steps, tokens and latency of a trajectory against budgets."""

from __future__ import annotations

from evalsi.core import ParamError, Record, Score, Trajectory
from evalsi.evaluators import Skip
from evalsi.packs._declare import builtin, lower, passed
from evalsi.packs.agent._calls import check_kinds

_TOKEN_KINDS = ("llm_call", "embedding")


class StepEfficiency:
    """Report the steps, tokens and latency of a trajectory and how much of each budget it used.

    - steps: the trajectory's steps (of ``step_kinds``, when given);
    - tokens: ``usage`` of the record (total, else input + output), else the sum over its
      ``llm_call`` and ``embedding`` steps (the only ones summed: a wrapping agent span may
      repeat its children's usage);
    - latency: ``usage.latency_ms`` of the record, else from the earliest step start to the
      latest step end.

    Emits ``agent-steps``, ``agent-tokens`` and ``agent-latency-ms`` (those known), for each
    budget set the share of it used (``steps-budget-used``...: 0.5 is half the budget, above
    1 is over it), and ``step-efficiency``: passed when within every budget set. Without a
    budget, only the counts are emitted. A record lacking a quantity whose budget is set is
    SKIPPED (it cannot be judged within budget), never scored as zero.

    Args:
        max_steps: the step budget.
        max_tokens: the token budget.
        max_latency_ms: the latency budget in milliseconds.
        step_kinds: count only the steps of these kinds (default: every step).
    """

    def __init__(
        self,
        *,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        max_latency_ms: float | None = None,
        step_kinds: list[str] | None = None,
    ) -> None:
        for name, value in (
            ("max_steps", max_steps),
            ("max_tokens", max_tokens),
            ("max_latency_ms", max_latency_ms),
        ):
            if value is not None and value <= 0:
                raise ParamError(f"step-efficiency: param {name!r} must be > 0, got {value}")
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.max_latency_ms = max_latency_ms
        self.step_kinds = None if step_kinds is None else check_kinds("step-efficiency", step_kinds)

    def __call__(self, record: Record) -> list[Score]:
        trajectory = record.trajectory
        assert trajectory is not None
        steps = [
            s for s in trajectory.steps if self.step_kinds is None or s.kind in self.step_kinds
        ]
        tokens = _tokens(record, trajectory)
        latency = _latency_ms(record, trajectory)
        if self.max_tokens is not None and tokens is None:
            raise Skip("record has no token usage (max_tokens is set)")
        if self.max_latency_ms is not None and latency is None:
            raise Skip(
                "record has no latency: no usage.latency_ms and no step times "
                "(max_latency_ms is set)"
            )
        measured: list[tuple[str, float | None, float | None, str]] = [
            ("steps", float(len(steps)), self.max_steps, "agent-steps"),
            ("tokens", None if tokens is None else float(tokens), self.max_tokens, "agent-tokens"),
            ("latency", latency, self.max_latency_ms, "agent-latency-ms"),
        ]
        scores: list[Score] = []
        ratios: list[Score] = []
        over: list[str] = []
        within: list[str] = []
        for label, value, budget, metric in measured:
            if value is None:
                continue
            scores.append(Score(name=metric, number=value))
            if budget is None:
                continue
            ratios.append(Score(name=f"{label}-budget-used", number=value / budget))
            text = f"{label} {value:g} of {budget:g}"
            (over if value > budget else within).append(text)
        if ratios:
            explanation = ("over budget: " + ", ".join(over)) if over else "within budget"
            if within and over:
                explanation += "; within: " + ", ".join(within)
            elif within:
                explanation += ": " + ", ".join(within)
            scores.insert(0, Score(passed=not over, explanation=explanation))
        return scores + ratios


def _tokens(record: Record, trajectory: Trajectory) -> int | None:
    if record.usage is not None and record.usage.tokens() is not None:
        return record.usage.tokens()
    counts = [
        s.usage.tokens() for s in trajectory.steps if s.kind in _TOKEN_KINDS and s.usage is not None
    ]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _latency_ms(record: Record, trajectory: Trajectory) -> float | None:
    if record.usage is not None and record.usage.latency_ms is not None:
        return record.usage.latency_ms
    starts = [s.start_time_unix_nano for s in trajectory.steps if s.start_time_unix_nano > 0]
    ends = [s.end_time_unix_nano for s in trajectory.steps if s.end_time_unix_nano > 0]
    if not starts or not ends or max(ends) < min(starts):
        return None
    return (max(ends) - min(starts)) / 1e6


step_efficiency = builtin(
    "agent",
    "step-efficiency",
    passed("step-efficiency", "within every budget set"),
    lower("agent-steps", "steps in the trajectory"),
    lower("agent-tokens", "tokens the trajectory used"),
    lower("agent-latency-ms", "wall time of the trajectory, ms"),
    lower("steps-budget-used", "steps / max_steps"),
    lower("tokens-budget-used", "tokens / max_tokens"),
    lower("latency-budget-used", "latency / max_latency_ms"),
    requires=("trajectory",),
    example="evalsi eval --data examples/agent/trips.jsonl --evaluators step-efficiency "
    "--param step-efficiency.max_steps=6 --param step-efficiency.max_tokens=2000",
)(StepEfficiency)
