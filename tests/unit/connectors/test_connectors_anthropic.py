"""The Anthropic Messages API against the stub, over real HTTP."""

from __future__ import annotations

import pytest

from evalsi.connectors import Anthropic, Resilience, RetryPolicy, Secret, TargetError
from evalsi.connectors._anthropic import ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS
from evalsi.core import Content, Message, ToolCall
from tests.support.aio import run
from tests.support.stub_llm import ANTHROPIC_PATH, StubLLM


def _client(stub: StubLLM, **kwargs: object) -> Anthropic:
    resilience = Resilience(retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))
    return Anthropic(stub.url, "claude-stub", resilience=resilience, **kwargs)  # type: ignore[arg-type]


def test_text_answer_with_usage_and_headers(stub_llm: StubLLM) -> None:
    stub_llm.configure({"answers": {"2+2?": "4"}, "require_key": "ak-1"})
    completion = run(_client(stub_llm, api_key=Secret("ak-1", ref="env:AK")).complete("2+2?"))

    assert completion.text == "4"
    assert completion.finish_reason == "end_turn"
    assert completion.usage.input_tokens == 1
    assert completion.usage.output_tokens == 1
    assert completion.usage.total_tokens == 2
    assert completion.usage.latency_ms is not None
    request = stub_llm.requests(ANTHROPIC_PATH)[0]
    assert request.headers["x-api-key"] == "ak-1"
    assert request.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert "Authorization" not in request.headers
    assert request.body["max_tokens"] == DEFAULT_MAX_TOKENS


def test_system_prompt_is_separate_and_tools_become_blocks(stub_llm: StubLLM) -> None:
    conversation = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris?"),
        Message(
            role="assistant",
            content="Let me check.",
            tool_calls=[ToolCall(name="weather", arguments={"city": "Paris"}, id="t1")],
        ),
        Message(role="tool", content="18C", tool_call_id="t1"),
        Message(role="user", content="And tomorrow?"),
    ]
    completion = run(_client(stub_llm, params={"max_tokens": 64}).complete(conversation, seed=3))

    body = stub_llm.requests(ANTHROPIC_PATH)[0].body
    assert body["system"] == "Be brief."
    assert "seed" not in body  # the Messages API has no seed
    assert body["max_tokens"] == 64
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "18C"},
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
    ]
    assert completion.text == "And tomorrow?"


def test_tool_use_in_the_reply(stub_llm: StubLLM) -> None:
    stub_llm.configure({"tool_calls": {"Book": [{"name": "book", "arguments": {"n": 2}}]}})
    completion = run(_client(stub_llm).complete("Book"))

    assert completion.finish_reason == "tool_use"
    assert completion.tool_calls == [ToolCall(name="book", arguments={"n": 2}, id="toolu_0")]
    assert completion.output.kind == "messages"


def test_invoke_with_chat_messages_content(stub_llm: StubLLM) -> None:
    content = Content.from_value([{"role": "user", "content": "ping"}])
    out = run(_client(stub_llm, system="sys").invoke(content))
    assert out.output == Content.of_text("ping")
    assert stub_llm.requests()[0].body["system"] == "sys"


def test_bad_key_is_a_target_error_not_retried(stub_llm: StubLLM) -> None:
    stub_llm.configure({"require_key": "right"})
    with pytest.raises(TargetError, match="invalid API key") as caught:
        run(_client(stub_llm, api_key="wrong").complete("hi"))
    assert caught.value.status == 401
    assert stub_llm.calls(ANTHROPIC_PATH) == 1
