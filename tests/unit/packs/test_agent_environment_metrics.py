"""policy-violations, approval-requests and fault-recovery read what the harness recorded."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.core import Outcome, Record, Step, ToolCall, Trajectory
from tests.support.registry import BUILTINS


def _grade(
    name: str, steps: list[Step], stop: str = "final_answer"
) -> tuple[Outcome, dict[str, Any], str]:
    from evalsi.runs import bind_all, runners_for

    [runner] = runners_for(bind_all([{"ref": name}], registry=BUILTINS))
    batch = runner.run([Record(id="r", trajectory=Trajectory(steps, stop))])  # type: ignore[union-attr]
    result = batch[0]
    return result.outcome, {s.name: s.value for s in result.scores}, result.reason


def call(name: str, error: str = "") -> Step:
    return Step("tool_call", name, tool_call=ToolCall(name, {}), error=error)


def test_blocks_and_denials_are_counted_as_violations() -> None:
    steps = [
        Step("llm_call", "m"),
        Step("policy_block", "transfer"),
        Step("sandbox_denial", "exec"),
        call("balance"),
    ]
    outcome, scores, _ = _grade("policy-violations", steps)
    assert outcome is Outcome.SCORED
    assert scores == {"policy-violations": 2, "policy-clean": False}
    assert _grade("policy-violations", [call("balance")])[1] == {
        "policy-clean": True,
        "policy-violations": 0,
    }


def test_approvals_count_requests_and_denials() -> None:
    steps = [
        Step("approval", "transfer", output={"decision": "denied", "by": "policy"}),
        Step("approval", "refund", output={"decision": "approved", "by": "policy"}),
        call("refund"),
    ]
    assert _grade("approval-requests", steps)[1] == {"approval-requests": 2, "approvals-denied": 1}
    assert _grade("approval-requests", [call("x")])[1] == {
        "approval-requests": 0,
        "approvals-denied": 0,
    }


@pytest.mark.parametrize(
    ("steps", "stop", "share"),
    [
        # error on search, then a good search: recovered
        (
            [
                Step("fault", "search", output={"kind": "error"}),
                call("search", "boom"),
                call("search"),
            ],
            "max_steps",
            1.0,
        ),
        # error, never a good call again, out of steps: not recovered
        (
            [Step("fault", "search", output={"kind": "timeout"}), call("search", "t/o")],
            "max_steps",
            0.0,
        ),
        # error, but the agent still answered
        (
            [Step("fault", "search", output={"kind": "malformed"}), call("search")],
            "final_answer",
            1.0,
        ),
        # two faults, one recovered
        (
            [
                Step("fault", "a", output={"kind": "error"}),
                call("a", "x"),
                Step("fault", "b", output={"kind": "error"}),
                call("b", "y"),
                call("a"),
            ],
            "max_tokens",
            0.5,
        ),
    ],
)
def test_fault_recovery_is_the_share_of_faults_got_past(
    steps: list[Step], stop: str, share: float
) -> None:
    outcome, scores, _ = _grade("fault-recovery", steps, stop)
    assert outcome is Outcome.SCORED
    assert scores["fault-recovery"] == pytest.approx(share)
    assert scores["recovered-all"] is (share == 1.0)


def test_no_fault_is_not_measured_and_injections_and_latency_are_not_faults() -> None:
    steps = [
        Step("fault", "search", output={"kind": "injection", "payload": "x"}),
        Step("fault", "search", output={"kind": "latency"}),
        call("search"),
    ]
    outcome, _, reason = _grade("fault-recovery", steps)
    assert outcome is Outcome.SKIPPED
    assert "no fault injected" in reason
