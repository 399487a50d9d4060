"""The projection of a trajectory into spans, and the Watch side reading it back: every step
kind (the harness's included), the trajectory's order where starts tie, untimed steps, and the
task span as the trajectory rather than a step."""

from __future__ import annotations

import itertools

from evalsi.core import Content, Step, ToolCall, Trace, Trajectory, Usage
from evalsi.runs._telemetry import task_spans
from evalsi.specs import work_document
from evalsi.traces._records import trace_to_record


def _ids() -> itertools.count[int]:
    return itertools.count(1)


def _spans(trajectory: Trajectory) -> list:  # type: ignore[type-arg]
    counter = _ids()
    return task_spans(
        trajectory,
        run_id="run-1",
        trial=1,
        task_id="s1",
        agent="bank",
        started_ns=100,
        ended_ns=900,
        input=Content.of_text("pay bob"),
        output=Content.of_text("no"),
        new_id=lambda n: f"{next(counter):0{2 * n}x}",
    )


TRAJECTORY = Trajectory(
    [
        Step(
            "llm_call",
            "m",
            output={"text": "", "tool_calls": ["a", "b"], "finish_reason": "tool_calls"},
            usage=Usage(input_tokens=5, output_tokens=2),
            start_time_unix_nano=110,
            end_time_unix_nano=200,
        ),
        # two parallel calls starting in the same nanosecond: the index keeps their order
        Step(
            "tool_call",
            "b",
            tool_call=ToolCall("b", {"x": 1}, "c2"),
            output="ok",
            start_time_unix_nano=300,
            end_time_unix_nano=320,
        ),
        Step(
            "tool_call",
            "a",
            tool_call=ToolCall("a", {}, "c1"),
            error="a failed",
            start_time_unix_nano=300,
            end_time_unix_nano=310,
        ),
        Step("sandbox_denial", "exec", input={"argv": ["rm"]}, output={"rule": "network"}),
        Step(
            "approval",
            "pay",
            input={"n": 1},
            output={"decision": "denied", "by": "policy"},
            start_time_unix_nano=400,
            end_time_unix_nano=401,
        ),
    ],
    stop_reason="max_steps",
)


def test_every_step_is_a_child_of_the_task_tagged_with_the_run() -> None:
    spans = _spans(TRAJECTORY)
    root, *steps = spans
    assert root.name == "invoke_agent bank"
    assert not root.parent_span_id
    assert [s.name for s in steps] == [
        "chat m",
        "execute_tool b",
        "execute_tool a",
        "sandbox_denial exec",
        "approval pay",
    ]
    for s in spans:
        assert (s.attributes["evalsi.run_id"], s.attributes["evalsi.trial"]) == ("run-1", 1)
        assert s.attributes["evalsi.task_id"] == "s1"
    assert {s.parent_span_id for s in steps} == {root.span_id}
    assert [s.attributes["evalsi.step.index"] for s in steps] == [0, 1, 2, 3, 4]
    # the untimed step sits, zero-length, where the previous one ended
    assert (steps[3].start_time_unix_nano, steps[3].end_time_unix_nano) == (310, 310)
    assert (root.start_time_unix_nano, root.end_time_unix_nano) == (100, 900)
    assert steps[2].status_code == 2
    assert steps[2].status_message == "a failed"
    assert steps[0].attributes["gen_ai.usage.input_tokens"] == 5
    assert root.attributes["evalsi.stop_reason"] == "max_steps"


def test_the_watch_side_reads_the_same_trajectory_back() -> None:
    spans = _spans(TRAJECTORY)
    record = trace_to_record(Trace(spans[0].trace_id, spans=list(reversed(spans))))
    got = record.trajectory
    assert got is not None
    assert got.stop_reason == "max_steps"
    assert [(s.kind, s.name) for s in got.steps] == [(s.kind, s.name) for s in TRAJECTORY.steps]
    assert [s.tool_call for s in got.steps] == [s.tool_call for s in TRAJECTORY.steps]
    assert got.steps[2].error == "a failed"
    assert got.steps[1].output == "ok"
    assert got.steps[3].input == {"argv": ["rm"]}
    assert got.steps[3].output == {"rule": "network"}
    assert got.steps[4].output == {"decision": "denied", "by": "policy"}
    assert got.steps[0].usage == Usage(input_tokens=5, output_tokens=2)
    assert record.input is not None
    assert record.input.kind == "messages"
    assert record.usage is not None
    assert record.usage.input_tokens == 5


def test_an_instrumented_trace_keeps_its_start_order_and_its_agent_step() -> None:
    spans = _spans(TRAJECTORY)
    for s in spans:  # the same spans without evalsi's attributes: an ordinary GenAI trace
        s.attributes = {k: v for k, v in s.attributes.items() if not k.startswith("evalsi.")}
    got = trace_to_record(Trace(spans[0].trace_id, spans=spans)).trajectory
    assert got is not None
    assert got.stop_reason == ""
    assert got.steps[0].kind == "agent"  # the invoke_agent span is a step there
    assert [s.name for s in got.steps[1:4]] == ["m", "a", "b"]  # start order, ties by end


def test_where_spans_go_is_not_part_of_the_work() -> None:
    doc = {"spec": {"trials": 2}}
    routed = {"spec": {"trials": 2, "telemetry": {"otlp": {"endpoint": "http://c:4318"}}}}
    assert work_document(routed) == work_document(doc) == doc
