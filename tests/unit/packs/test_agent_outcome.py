"""``task-success`` (the environment's checks) and ``agent-efficiency`` (an agent run's steps,
tokens, cost and wall time against its budgets)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Check, Outcome, ParamError, Record, Step, Trajectory, Usage
from evalsi.packs.agent._efficiency import agent_efficiency, step_efficiency
from evalsi.packs.agent._outcome import task_success
from tests.unit.packs.agent_support import llm, outcome, run, tool

MS = 1_000_000


def checked(*checks: Check, steps: list[Step] | None = None) -> Record:
    return Record(id="r", trajectory=Trajectory(steps or [llm()], "final_answer", list(checks)))


def values(record: Record, **params: Any) -> dict[str, Any]:
    return {k: s.value for k, s in run(agent_efficiency, record, **params).items()}


# -- task-success ------------------------------------------------------------------------------


def test_every_check_passed() -> None:
    got = run(task_success, checked(Check("balance", True), Check("email_sent", True)))
    assert (got["task-success"].value, got["checks-passed"].value) == (True, 1.0)
    assert got["task-success"].explanation == "all 2 check(s) passed: balance, email_sent"


def test_failing_checks_are_listed_with_their_details() -> None:
    record = checked(
        Check("balance", False, "expected 100, got 90"),
        Check("email_sent", True),
        Check("no_refund", False),
    )
    got = run(task_success, record)
    assert got["task-success"].value is False
    assert got["checks-passed"].value == pytest.approx(1 / 3)
    assert got["task-success"].explanation == (
        "2 of 3 check(s) failed: balance (expected 100, got 90), no_refund"
    )


def test_without_checks_it_is_not_measured() -> None:
    assert outcome(task_success, checked()) == (Outcome.SKIPPED, "no environment check recorded")
    assert outcome(task_success, Record(id="r")) == (
        Outcome.SKIPPED,
        "no environment check recorded",
    )
    # checks with no step recorded still count: the harness judged the end state
    bare = Record(id="r", trajectory=Trajectory([], "max_steps", [Check("done", False)]))
    assert run(task_success, bare)["task-success"].value is False


@settings(max_examples=100, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=8))
def test_success_iff_every_check_passed(results: list[bool]) -> None:
    got = run(task_success, checked(*(Check(f"c{i}", ok) for i, ok in enumerate(results))))
    assert got["task-success"].value is all(results)
    assert got["checks-passed"].value == pytest.approx(sum(results) / len(results))


# -- agent-efficiency --------------------------------------------------------------------------


def priced(cost: float | None, tokens: int = 100) -> Step:
    return llm(usage=Usage(total_tokens=tokens, cost_usd=cost))


def test_record_usage_and_every_budget() -> None:
    record = Record(
        id="r",
        trajectory=Trajectory([llm(), tool("a"), llm(), tool("b")]),
        usage=Usage(total_tokens=1200, cost_usd=0.004, latency_ms=2500.0),
    )
    got = values(record, max_steps=8, max_tokens=1000, max_usd=0.01, max_seconds=5)
    assert got == {
        "agent-efficiency": False,  # tokens over
        "task-steps": 4.0,
        "task-tokens": 1200.0,
        "task-cost-usd": 0.004,
        "task-latency-ms": 2500.0,
        "steps-budget-share": 0.5,
        "tokens-budget-share": 1.2,
        "usd-budget-share": pytest.approx(0.4),
        "seconds-budget-share": 0.5,
    }
    main = run(agent_efficiency, record, max_steps=8, max_tokens=1000)["agent-efficiency"]
    assert main.explanation == "over budget: tokens 1200 of 1000; within: steps 4 of 8"


def test_falls_back_to_the_steps() -> None:
    steps = [priced(0.001), tool("a"), priced(0.002, 50), llm()]
    steps[0].start_time_unix_nano, steps[0].end_time_unix_nano = 1000 * MS, 1400 * MS
    steps[3].start_time_unix_nano, steps[3].end_time_unix_nano = 2000 * MS, 3000 * MS
    got = values(Record(id="r", trajectory=Trajectory(steps)), max_usd=0.003, max_seconds=4)
    assert got == {
        "agent-efficiency": True,  # at the budget is within it
        "task-steps": 4.0,
        "task-tokens": 150.0,
        "task-cost-usd": pytest.approx(0.003),
        "task-latency-ms": 2000.0,
        "usd-budget-share": pytest.approx(1.0),
        "seconds-budget-share": 0.5,
    }


def test_without_budgets_only_what_is_known() -> None:
    assert values(Record(id="r", trajectory=Trajectory([llm(), tool("a")]))) == {"task-steps": 2.0}


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"max_tokens": 10}, "record has no token usage (max_tokens is set)"),
        ({"max_usd": 1.0}, "record has no cost: no usage.cost_usd on it or its llm_call steps "
                           "(max_usd is set)"),
        ({"max_seconds": 1.0}, "record has no latency: no usage.latency_ms and no step times "
                               "(max_seconds is set)"),
    ],
)  # fmt: skip
def test_a_budgeted_quantity_that_is_unknown_skips(params: dict[str, Any], reason: str) -> None:
    record = Record(id="r", trajectory=Trajectory([llm(), tool("a")]))
    assert outcome(agent_efficiency, record, **params) == (Outcome.SKIPPED, reason)


@pytest.mark.parametrize("param", ["max_steps", "max_tokens", "max_usd", "max_seconds"])
def test_budgets_must_be_positive(param: str) -> None:
    with pytest.raises(ParamError, match=f"agent-efficiency: param '{param}' must be > 0"):
        agent_efficiency.bind({param: 0})


def test_the_metric_names_do_not_clash_with_step_efficiency() -> None:
    ours = {o.name for o in agent_efficiency.manifest.outputs}
    theirs = {o.name for o in step_efficiency.manifest.outputs}
    assert not ours & theirs


def test_tokens_and_latency_agree_with_step_efficiency() -> None:
    steps = [priced(None, 70), tool("a"), priced(None, 30)]
    steps[0].start_time_unix_nano, steps[2].end_time_unix_nano = 1000 * MS, 1800 * MS
    record = Record(id="r", trajectory=Trajectory(steps))
    mine = values(record)
    theirs = {k: s.value for k, s in run(step_efficiency, record).items()}
    assert (mine["task-tokens"], mine["task-latency-ms"]) == (
        theirs["agent-tokens"],
        theirs["agent-latency-ms"],
    )
