"""A trajectory's JSON form (what a Run stores with a target's output, and what a dataset's
``trajectory`` field holds) reads back as the same trajectory, every step kind and the stop
reason included; malformed forms are refused with the field named."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalsi.core import Step, StepKind, ToolCall, Trajectory, Usage
from evalsi.datasets import read_trajectory

json_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
json_value = st.recursive(
    json_scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
counts = st.none() | st.integers(0, 10**6)
usages = st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    total_tokens=counts,
    cost_usd=st.none() | st.floats(0, 100, allow_nan=False),
    latency_ms=st.none() | st.floats(0, 10**5, allow_nan=False),
)
steps = st.builds(
    Step,
    kind=st.sampled_from(get_args(StepKind)),
    name=st.text(max_size=8),
    input=json_value,
    output=json_value,
    tool_call=st.none()
    | st.builds(
        ToolCall, name=st.text(min_size=1, max_size=8), arguments=json_value, id=st.text(max_size=4)
    ),
    usage=st.none() | usages,
    error=st.text(max_size=8),
    start_time_unix_nano=st.integers(0, 2**63 - 1),
    end_time_unix_nano=st.integers(0, 2**63 - 1),
    span_id=st.text(max_size=16),
)


@given(st.builds(Trajectory, st.lists(steps, max_size=4), st.text(max_size=12)))
def test_the_json_form_reads_back_as_the_same_trajectory(trajectory: Trajectory) -> None:
    assert read_trajectory(trajectory.to_value()) == trajectory


def test_the_agent_run_step_kinds_exist() -> None:
    assert {"approval", "fault", "policy_block", "sandbox_denial"} <= set(get_args(StepKind))


def test_a_plain_list_of_steps_is_still_a_trajectory() -> None:
    assert read_trajectory([{"kind": "fault", "name": "search"}]) == Trajectory(
        [Step("fault", "search")]
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"steps": [], "stop_reason": 3}, "trajectory.stop_reason"),
        ({"steps": [], "why": "x"}, "a list of steps"),
        ({"steps": [{"kind": "teleport"}]}, "trajectory.steps[0].kind"),
        ("steps", "a list of steps"),
    ],
)
def test_a_malformed_trajectory_names_the_field(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_trajectory(value)
