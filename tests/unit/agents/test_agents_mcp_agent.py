"""How the MCP-agent connector reads a recorded answer: the tool result (text, structured,
isError), a prompt's messages, notifications, and malformed or huge answers."""

from __future__ import annotations

import pytest

from evalsi.agents._harness import Final
from evalsi.agents._mcp_agent import MAX_OUTPUT, MAX_TEXT, _note_step, _prompt_events, _tool_events
from evalsi.connectors import InfraError


def test_a_tool_result_is_a_tool_call_step_and_the_answer() -> None:
    result = {
        "content": [{"type": "text", "text": "a"}, {"type": "image", "mimeType": "image/png"}]
    }
    step, final = _tool_events("ask", {"input": "q"}, result)
    assert isinstance(final, Final)
    assert (final.output.as_text(), final.stop_reason) == ("a\n[image image/png]", "final_answer")
    assert step.tool_call is not None
    assert (step.kind, step.tool_call.arguments, step.error) == ("tool_call", {"input": "q"}, "")


def test_structured_content_answers_when_there_is_no_text() -> None:
    _, final = _tool_events("ask", {}, {"content": [], "structuredContent": {"b": 1, "a": 2}})
    assert isinstance(final, Final)
    assert final.output.as_text() == '{"a":2,"b":1}'


def test_is_error_is_the_agents_failure() -> None:
    step, final = _tool_events(
        "ask", {}, {"content": [{"type": "text", "text": "no"}], "isError": True}
    )
    assert isinstance(final, Final)
    assert (final.stop_reason, step.error) == ("error", "no")


def test_a_huge_result_is_cut_in_the_step_and_bounded_in_the_answer() -> None:
    text = "z" * (MAX_OUTPUT + 5)
    step, final = _tool_events("ask", {}, {"content": [{"type": "text", "text": text}]})
    assert isinstance(final, Final)
    assert len(final.output.as_text()) == MAX_OUTPUT
    assert len(str(step.output)) < MAX_TEXT + 100


def test_a_prompt_answer_is_its_last_assistant_message() -> None:
    messages = [
        {"role": "user", "content": {"type": "text", "text": "q"}},
        {"role": "assistant", "content": {"type": "text", "text": "one"}},
        {"role": "assistant", "content": {"type": "text", "text": "two"}},
        "junk",
    ]
    *steps, final = _prompt_events({"messages": messages})
    assert [s.name for s in steps] == ["user", "assistant", "assistant"]
    assert isinstance(final, Final)
    assert final.output.as_text() == "two"
    *_, final = _prompt_events({"messages": [messages[0]]})  # no assistant: all of it
    assert isinstance(final, Final)
    assert final.output.as_text() == "q"


@pytest.mark.parametrize("bad", [None, "x", 3])
def test_malformed_answers_are_infrastructure(bad: object) -> None:
    with pytest.raises(InfraError):
        _tool_events("ask", {}, bad)
    with pytest.raises(InfraError):
        _prompt_events(bad)
    with pytest.raises(InfraError):
        _note_step(bad)


def test_notifications_become_progress_and_log_steps() -> None:
    progress = _note_step({"progress": 1, "total": 2, "message": "m"})
    log = _note_step({"log": "info", "data": {"k": "v"}})
    assert (progress.name, progress.output) == (
        "progress",
        {"progress": 1, "total": 2, "message": "m"},
    )
    assert (log.name, log.output) == ("log", {"level": "info", "data": {"k": "v"}})
