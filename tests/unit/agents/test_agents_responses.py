"""The Responses connector's reading and writing of the API's shapes: input items from a task's
input, a reply's items as trajectory steps (reasoning kept, server-side tools as tool calls,
unknown kinds kept), usage, failed/incomplete replies, and the replies that break the shape."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.agents._responses import REASONING, input_items, read_reply
from evalsi.connectors import InfraError
from evalsi.core import Content, Message, ToolCall

URL = "http://127.0.0.1:9/v1/responses"


def reply(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "resp_1", "model": "m", "status": "completed", "output": list(items), **extra}


def test_text_input_is_one_user_message() -> None:
    assert input_items(Content.of_text("hi")) == [{"role": "user", "content": "hi"}]


def test_chat_messages_map_to_items_with_calls_and_their_results() -> None:
    messages = [
        Message("system", "be brief"),
        Message("user", "pay bob"),
        Message("assistant", None, [ToolCall("pay", {"to": "bob"}, id="c1")]),
        Message("tool", "paid", tool_call_id="c1"),
    ]
    assert input_items(Content.of_messages(messages)) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "pay bob"},
        {"type": "function_call", "call_id": "c1", "name": "pay", "arguments": '{"to":"bob"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "paid"},
    ]


def test_a_reply_becomes_steps_in_order() -> None:
    turn = read_reply(
        reply(
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "think"}],
                "content": [{"type": "reasoning_text", "text": "deeper"}],
                "encrypted_content": "x",
            },
            {
                "type": "web_search_call",
                "id": "ws1",
                "status": "completed",
                "action": {"type": "search", "query": "weather"},
            },
            {
                "type": "mcp_call",
                "id": "m1",
                "name": "lookup",
                "arguments": '{"q": 1}',
                "output": "found",
                "server_label": "s",
            },
            {"type": "function_call", "call_id": "c1", "name": "balance", "arguments": "{}"},
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "a"},
                    {"type": "output_text", "text": "b"},
                ],
            },
            {"type": "mcp_list_tools", "id": "l1", "tools": []},
        ),
        URL,
    )
    kinds = [(s.kind, s.name) for s in turn.steps]
    assert kinds == [
        (REASONING, "reasoning"),
        ("tool_call", "web_search"),
        ("tool_call", "lookup"),
        ("message", "assistant"),
        ("other", "mcp_list_tools"),
    ]
    reasoning, search, mcp = turn.steps[:3]
    assert reasoning.output == {"summary": ["think"], "content": ["deeper"], "encrypted": True}
    assert search.tool_call is not None
    assert search.tool_call.arguments == {"type": "search", "query": "weather"}
    assert mcp.tool_call is not None
    assert mcp.tool_call.arguments == {"q": 1}
    assert mcp.output == "found"
    assert [c["name"] for c in turn.calls] == ["balance"]  # for evalsi to run, not a step yet
    assert turn.text == "ab"
    assert len(turn.items) == 6  # all sent back when the server keeps no state


def test_usage_and_status() -> None:
    turn = read_reply(
        reply(usage={"input_tokens": 7, "output_tokens": 3}, status="incomplete",
              incomplete_details={"reason": "max_output_tokens"}),
        URL,
    )  # fmt: skip
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (7, 3)
    assert (turn.stop_reason, turn.reason) == ("incomplete", "max_output_tokens")
    failed = read_reply(
        reply(status="failed", error={"code": "server_error", "message": "boom"}), URL
    )
    assert (failed.stop_reason, failed.reason) == ("failed", "server_error: boom")
    assert read_reply(reply(usage={"input_tokens": True}), URL).usage.input_tokens is None


def test_store_false_in_the_reply_is_read() -> None:
    assert read_reply(reply(store=False), URL).stored is False
    assert read_reply(reply(), URL).stored is True


@pytest.mark.parametrize(
    ("body", "what"),
    [
        ([], "a response object"),
        ({"id": "r"}, "an output list"),
        ({"output": "text"}, "an output list"),
        ({"output": [1]}, "a typed item at output[0]"),
        ({"output": [{"content": "no type"}]}, "a typed item at output[0]"),
        ({"output": [{"type": "function_call", "name": "f"}]}, "a name and a call_id"),
    ],
)
def test_a_reply_that_breaks_the_shape_is_malformed(body: Any, what: str) -> None:
    with pytest.raises(InfraError) as caught:
        read_reply(body, URL)
    assert caught.value.kind == "malformed_response"
    assert what in caught.value.message


def test_huge_items_are_bounded_in_the_steps() -> None:
    text = "x" * 2_000_000
    turn = read_reply(
        reply({"type": "message", "content": [{"type": "output_text", "text": text}]}), URL
    )
    shown = turn.steps[0].output
    assert isinstance(shown, str)
    assert len(shown) < 300_000
    assert "cut by the harness" in shown
    assert turn.text == text  # the answer is cut by the harness when it ends the task
