"""What a trajectory cost against budgets: ``step-efficiency`` (steps, tokens, latency, for any
trajectory) and ``agent-efficiency`` (an agent run's steps, tokens, dollars and wall time, the
budgets the built-in loop enforces). Both read the quantities the same way (``tokens_of``,
``cost_usd_of``, ``latency_ms_of``) and judge budgets the same way (``over_budget``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from evalsi.core import ParamError, Record, Score, Step, Trajectory
from evalsi.evaluators import Skip
from evalsi.packs._declare import builtin, lower, passed
from evalsi.packs.agent._calls import check_kinds

_TOKEN_KINDS = ("llm_call", "embedding")

Budget = tuple[str, float, float | None]
"""(label, value, budget): ``steps`` 7 of 6; no budget is None."""


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
        check_budgets(
            "step-efficiency",
            (
                ("max_steps", max_steps),
                ("max_tokens", max_tokens),
                ("max_latency_ms", max_latency_ms),
            ),
        )
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
        tokens = tokens_of(record, trajectory)
        latency = latency_ms_of(record, trajectory)
        if self.max_tokens is not None and tokens is None:
            raise Skip("record has no token usage (max_tokens is set)")
        if self.max_latency_ms is not None and latency is None:
            raise Skip(
                "record has no latency: no usage.latency_ms and no step times "
                "(max_latency_ms is set)"
            )
        return budget_scores(
            {"agent-steps": len(steps), "agent-tokens": tokens, "agent-latency-ms": latency},
            [
                ("steps", len(steps), self.max_steps),
                ("tokens", tokens, self.max_tokens),
                ("latency", latency, self.max_latency_ms),
            ],
            "{}-budget-used",
        )


class AgentEfficiency:
    """What an agent run cost, against the budgets of the run.

    - steps: every step of the trajectory;
    - tokens: as ``step-efficiency`` counts them (the record's usage, else its ``llm_call`` and
      ``embedding`` steps);
    - cost: the record's ``usage.cost_usd``, else the sum over its ``llm_call`` steps';
    - latency: the record's ``usage.latency_ms``, else the first step start to the last end.

    Emits ``task-steps``, ``task-tokens``, ``task-cost-usd`` and ``task-latency-ms`` (those
    known), for each budget given the share of it used (``steps-budget-share``,
    ``tokens-budget-share``, ``usd-budget-share``, ``seconds-budget-share``: 1.0 is all of it),
    and ``agent-efficiency``: passed when within every budget given. A record lacking a
    quantity whose budget is given is SKIPPED, never scored as zero.

    Args:
        max_steps: the step budget.
        max_tokens: the token budget.
        max_usd: the cost budget in US dollars.
        max_seconds: the wall-time budget in seconds.
    """

    def __init__(
        self,
        *,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        max_usd: float | None = None,
        max_seconds: float | None = None,
    ) -> None:
        check_budgets(
            "agent-efficiency",
            (
                ("max_steps", max_steps),
                ("max_tokens", max_tokens),
                ("max_usd", max_usd),
                ("max_seconds", max_seconds),
            ),
        )
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self.max_seconds = max_seconds

    def __call__(self, record: Record) -> list[Score]:
        trajectory = record.trajectory
        assert trajectory is not None
        tokens = tokens_of(record, trajectory)
        cost = cost_usd_of(record, trajectory)
        latency = latency_ms_of(record, trajectory)
        lacking = [
            f"record has no {what} ({param} is set)"
            for budget, value, what, param in (
                (self.max_tokens, tokens, "token usage", "max_tokens"),
                (
                    self.max_usd,
                    cost,
                    "cost: no usage.cost_usd on it or its llm_call steps",
                    "max_usd",
                ),
                (
                    self.max_seconds,
                    latency,
                    "latency: no usage.latency_ms and no step times",
                    "max_seconds",
                ),
            )
            if budget is not None and value is None
        ]
        if lacking:
            raise Skip(lacking[0])
        steps = len(trajectory.steps)
        return budget_scores(
            {
                "task-steps": steps,
                "task-tokens": tokens,
                "task-cost-usd": cost,
                "task-latency-ms": latency,
            },
            [
                ("steps", steps, self.max_steps),
                ("tokens", tokens, self.max_tokens),
                ("usd", cost, self.max_usd),
                ("seconds", None if latency is None else latency / 1000, self.max_seconds),
            ],
            "{}-budget-share",
        )


def check_budgets(evaluator: str, budgets: Iterable[tuple[str, float | None]]) -> None:
    """Every budget given is > 0, else a ParamError naming it."""
    for name, value in budgets:
        if value is not None and value <= 0:
            raise ParamError(f"{evaluator}: param {name!r} must be > 0, got {value}")


def over_budget(measured: Sequence[Budget]) -> tuple[bool, str]:
    """Whether every quantity is within its budget (at the budget counts as within), and the
    explanation: ``over budget: steps 7 of 6; within: tokens 800 of 2000``."""
    over: list[str] = []
    within: list[str] = []
    for label, value, budget in measured:
        if budget is None:
            continue
        (over if value > budget else within).append(f"{label} {value:g} of {budget:g}")
    explanation = ("over budget: " + ", ".join(over)) if over else "within budget"
    if within and over:
        explanation += "; within: " + ", ".join(within)
    elif within:
        explanation += ": " + ", ".join(within)
    return not over, explanation


def budget_scores(
    counts: dict[str, float | None],
    measured: Sequence[tuple[str, float | None, float | None]],
    share: str,
) -> list[Score]:
    """The verdict (the evaluator's own metric) when a budget is given, the counts known, and
    the share of each budget given (``share`` formats the label into the metric's name)."""
    scores = [Score(name=name, number=float(v)) for name, v in counts.items() if v is not None]
    budgeted = [(label, v, b) for label, v, b in measured if v is not None and b is not None]
    if not budgeted:
        return scores
    ok, explanation = over_budget(budgeted)
    ratios = [Score(name=share.format(label), number=v / b) for label, v, b in budgeted]
    return [Score(passed=ok, explanation=explanation), *scores, *ratios]


def step_tokens(steps: Iterable[Step]) -> int | None:
    """Tokens summed over ``llm_call`` and ``embedding`` steps; None when none is known."""
    counts = [s.usage.tokens() for s in steps if s.kind in _TOKEN_KINDS and s.usage is not None]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def tokens_of(record: Record, trajectory: Trajectory) -> int | None:
    """The record's token usage, else its steps'."""
    if record.usage is not None and record.usage.tokens() is not None:
        return record.usage.tokens()
    return step_tokens(trajectory.steps)


def cost_usd_of(record: Record, trajectory: Trajectory) -> float | None:
    """The record's ``usage.cost_usd``, else the sum over its ``llm_call`` steps'."""
    if record.usage is not None and record.usage.cost_usd is not None:
        return record.usage.cost_usd
    costs = [
        s.usage.cost_usd
        for s in trajectory.steps
        if s.kind == "llm_call" and s.usage is not None and s.usage.cost_usd is not None
    ]
    return sum(costs) if costs else None


def latency_ms_of(record: Record, trajectory: Trajectory) -> float | None:
    """The record's ``usage.latency_ms``, else the earliest step start to the latest end."""
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

agent_efficiency = builtin(
    "agent",
    "agent-efficiency",
    passed("agent-efficiency", "within every budget given"),
    lower("task-steps", "steps of the agent run"),
    lower("task-tokens", "tokens the agent run used"),
    lower("task-cost-usd", "what the agent run cost, USD"),
    lower("task-latency-ms", "wall time of the agent run, ms"),
    lower("steps-budget-share", "steps / max_steps"),
    lower("tokens-budget-share", "tokens / max_tokens"),
    lower("usd-budget-share", "cost / max_usd"),
    lower("seconds-budget-share", "wall time / max_seconds"),
    requires=("trajectory",),
    example="evalsi eval --data examples/agent/predicates.jsonl --evaluators agent-efficiency "
    "--param agent-efficiency.max_steps=8 --param agent-efficiency.max_usd=0.01",
)(AgentEfficiency)
