"""The HTTP agent connector's checks and readings that need no server: the template, paths and
method are checked before any task; a transcript of chat messages or steps becomes trajectory
steps (tool calls matched with their results); broken transcripts are the agent's error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalsi.agents import AgentTarget
from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._http_agent import HttpAgentHarness, transcript_steps
from evalsi.connectors import EgressPolicy, Resilience, TargetError
from evalsi.core import UserError
from evalsi.specs import AgentSpec, EnvironmentSpec, HttpAgentSpec

WHERE = "spec.target.agent.http.transcript"


def harness(egress: EgressPolicy | None = None, **section: Any) -> HttpAgentHarness:
    spec = HttpAgentSpec(**{"url": "http://127.0.0.1:9/agent", "output": "$.answer", **section})
    agent = AgentSpec(kind="http", http=spec)
    target = AgentTarget(None, agent, EnvironmentSpec(tools=()))
    context = ConnectorContext(
        agent, target.env_spec, target.environment, egress, "spec.target.agent.http"
    )
    return HttpAgentHarness(spec, context, Resilience())


@pytest.mark.parametrize(
    ("section", "field", "says"),
    [
        ({"body": '{"q": {{ input | tojson }'}, "body", "not a valid Jinja2 template"),
        ({"output": "answer"}, "output", "must start with '$'"),
        ({"transcript": "$.a[*]"}, "transcript", "cannot read"),
        ({"method": "GET"}, "method", "expected POST or PUT"),
        ({"output": ""}, "http", "set output"),
        ({"headers": {"X-Key": "env:NOT_SET_ANYWHERE_42"}}, "headers.X-Key", "is not set"),
    ],
)
def test_a_bad_section_is_refused_naming_the_field(
    section: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(UserError) as caught:
        harness(**section)
    assert f"spec.target.agent.http.{field}".removesuffix(".http") in caught.value.message
    assert says in caught.value.message


def test_the_egress_policy_refuses_the_url() -> None:
    with pytest.raises(UserError) as caught:
        harness(EgressPolicy.from_lists(listen_host="0.0.0.0"))
    assert "spec.target.agent.http.url" in caught.value.message
    assert "egress denied" in caught.value.message


def test_messages_become_steps_with_calls_matched_to_results() -> None:
    steps = transcript_steps(
        [
            {"role": "user", "content": "pay bob"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "balance", "arguments": '{"a": 1}'}},
                {"id": "c2", "name": "transfer", "arguments": {"amount": 5}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "120"},
            {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
            {"role": "assistant", "content": "done"},
        ],
        WHERE,
    )  # fmt: skip
    assert [(s.kind, s.name) for s in steps] == [
        ("tool_call", "balance"),
        ("tool_call", "transfer"),
        ("message", "tool"),
        ("message", "assistant"),
    ]
    assert steps[0].tool_call is not None
    assert (steps[0].tool_call.arguments, steps[0].output) == ({"a": 1}, 120)
    assert steps[1].output is None  # no result was reported
    assert steps[0].input == {"executed_by": "agent"}


def test_steps_in_either_form() -> None:
    steps = transcript_steps(
        [
            {"kind": "tool_call", "name": "f", "tool_call": {"name": "f", "arguments": {"x": 1}},
             "output": 2},
            {"type": "tool_call", "tool": "g", "arguments": {"y": 2}, "result": "ok"},
            {"type": "model_call", "name": "m"},
            {"type": "thinking", "text": "hm"},
        ],
        WHERE,
    )  # fmt: skip
    assert [(s.kind, s.name) for s in steps] == [
        ("tool_call", "f"), ("tool_call", "g"), ("llm_call", "m"), ("other", "thinking"),
    ]  # fmt: skip
    assert steps[1].tool_call is not None
    assert (steps[1].tool_call.arguments, steps[1].output) == ({"y": 2}, "ok")


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        ({"role": "assistant"}, "expected a list"),
        (["text"], "[0]: expected an object"),
        ([{"content": "no role"}], "[0]: expected a message (role) or a step"),
        ([{"kind": "nonsense"}], "[0]"),
        ([{"role": "assistant"}] * 10_001, "more than 10,000"),
    ],
)
def test_a_broken_transcript_is_the_agents_error(entries: Any, says: str) -> None:
    with pytest.raises(TargetError) as caught:
        transcript_steps(entries, WHERE)
    assert WHERE in caught.value.message
    assert says in caught.value.message


def test_a_template_that_renders_no_json_is_the_tasks_error() -> None:
    h = harness(body='{"q": {{ input }}}')
    from evalsi.agents import TaskSetup
    from evalsi.core import Content

    async def main() -> None:
        session = await h.setup(TaskSetup("r", "t", 0, None, Content.of_text('say "hi"')))
        await h.turn(session)

    with pytest.raises(TargetError) as caught:
        asyncio.run(main())
    assert "not JSON for this sample" in caught.value.message
    assert caught.value.hint is not None
    assert "tojson" in caught.value.hint
