"""``step-efficiency``: counts, budget ratios, the fallbacks to step usage and step times, and
records that lack a budgeted quantity."""

from __future__ import annotations

import pytest

from evalsi.core import Outcome, ParamError, Step, Usage
from evalsi.packs.agent._efficiency import step_efficiency
from tests.unit.packs.agent_support import agent_record, llm, outcome, run, tool

MS = 1_000_000


def numbers(record: object, **params: object) -> dict[str, object]:
    got = run(step_efficiency, record, **params)  # type: ignore[arg-type]
    return {k: s.value for k, s in got.items()}


def timed(kind_step: Step, start_ms: int, end_ms: int) -> Step:
    kind_step.start_time_unix_nano = 1_000_000 * MS + start_ms * MS
    kind_step.end_time_unix_nano = 1_000_000 * MS + end_ms * MS
    return kind_step


def test_record_usage_and_budgets() -> None:
    record = agent_record(
        llm(), tool("a"), llm(), usage=Usage(total_tokens=1500, latency_ms=3000.0)
    )
    got = numbers(record, max_steps=4, max_tokens=1000, max_latency_ms=6000)
    assert got == {
        "step-efficiency": False,  # tokens over budget
        "agent-steps": 3.0,
        "agent-tokens": 1500.0,
        "agent-latency-ms": 3000.0,
        "steps-budget-used": 0.75,
        "tokens-budget-used": 1.5,
        "latency-budget-used": 0.5,
    }
    main = run(step_efficiency, record, max_steps=4, max_tokens=1000, max_latency_ms=6000)
    assert main["step-efficiency"].explanation == (
        "over budget: tokens 1500 of 1000; within: steps 3 of 4, latency 3000 of 6000"
    )


def test_exactly_at_the_budget_is_within_it() -> None:
    got = numbers(agent_record(llm(), llm()), max_steps=2)
    assert (got["step-efficiency"], got["steps-budget-used"]) == (True, 1.0)


def test_without_budgets_only_the_counts() -> None:
    got = numbers(agent_record(llm(), tool("a"), usage=Usage(input_tokens=10, output_tokens=5)))
    assert got == {"agent-steps": 2.0, "agent-tokens": 15.0}


def test_fallbacks_to_the_steps() -> None:
    record = agent_record(
        timed(llm(usage=Usage(input_tokens=100, output_tokens=20)), 0, 400),
        timed(tool("a"), 400, 1000),
        # a wrapping agent step repeats its children's usage: not summed
        timed(Step(kind="agent", name="outer", usage=Usage(total_tokens=999)), 0, 1500),
        timed(llm(usage=Usage(total_tokens=80)), 1000, 1250),
    )
    got = numbers(record)
    assert got == {"agent-steps": 4.0, "agent-tokens": 200.0, "agent-latency-ms": 1500.0}


def test_step_kinds() -> None:
    record = agent_record(llm(), tool("a"), llm(), tool("b"))
    assert numbers(record, step_kinds=["tool_call"], max_steps=4)["steps-budget-used"] == 0.5


def test_a_missing_budgeted_quantity_skips_the_record() -> None:
    record = agent_record(llm(), tool("a"))
    assert outcome(step_efficiency, record, max_tokens=100) == (
        Outcome.SKIPPED,
        "record has no token usage (max_tokens is set)",
    )
    state, reason = outcome(step_efficiency, record, max_latency_ms=100)
    assert state is Outcome.SKIPPED
    assert reason.startswith("record has no latency")
    assert outcome(step_efficiency, agent_record(), max_steps=3) == (
        Outcome.SKIPPED,
        "record has no trajectory",
    )


@pytest.mark.parametrize(
    "params", [{"max_steps": 0}, {"max_tokens": -1}, {"max_latency_ms": 0.0}, {"step_kinds": []}]
)
def test_bad_params(params: dict[str, object]) -> None:
    with pytest.raises(ParamError):
        step_efficiency.bind(params)
