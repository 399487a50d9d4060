"""OpenAI-compatible chat completions against the stub, over real HTTP."""

from __future__ import annotations

import pytest

from evalsi.connectors import (
    Completion,
    OpenAICompatible,
    Resilience,
    RetryPolicy,
    TargetError,
)
from evalsi.core import Content, Message, ToolCall
from tests.support.aio import run
from tests.support.stub_llm import OPENAI_PATH, StubLLM


def _fast() -> Resilience:
    return Resilience(retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))


def _client(stub: StubLLM, **kwargs: object) -> OpenAICompatible:
    return OpenAICompatible(stub.openai_url, "stub-model", resilience=_fast(), **kwargs)  # type: ignore[arg-type]


def test_text_answer_with_usage_and_latency(stub_llm: StubLLM) -> None:
    stub_llm.configure({"answers": {"Capital of France?": "Paris"}})
    completion = run(_client(stub_llm).complete("Capital of France?"))

    assert isinstance(completion, Completion)
    assert completion.text == "Paris"
    assert completion.finish_reason == "stop"
    assert completion.model == "stub-model"
    assert completion.messages == [Message(role="assistant", content="Paris")]
    assert completion.usage.input_tokens == 3
    assert completion.usage.output_tokens == 1
    assert completion.usage.total_tokens == 4
    assert completion.usage.latency_ms is not None
    assert completion.usage.latency_ms > 0
    assert completion.attempts == 1
    assert completion.raw["object"] == "chat.completion"
    assert completion.output == Content.of_text("Paris")
    assert stub_llm.calls(OPENAI_PATH) == 1


def test_messages_are_mapped_to_the_wire_format(stub_llm: StubLLM) -> None:
    conversation = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris?"),
        Message(
            role="assistant",
            content=None,
            tool_calls=[ToolCall(name="weather", arguments={"city": "Paris"}, id="c1")],
        ),
        Message(role="tool", content="18C, sunny", tool_call_id="c1", name="weather"),
    ]
    client = _client(stub_llm, params={"temperature": 0, "max_tokens": 50})
    completion = run(client.complete(conversation, seed=7, temperature=0.5))

    sent = stub_llm.requests(OPENAI_PATH)[0].body
    assert sent["model"] == "stub-model"
    assert sent["seed"] == 7
    assert sent["temperature"] == 0.5  # the call's params override the constructor's
    assert sent["max_tokens"] == 50
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",  # not null: llama-cpp-python answers 500 to it
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": "18C, sunny", "tool_call_id": "c1", "name": "weather"},
    ]
    assert completion.text == "18C, sunny"  # the stub echoes the last tool result


def test_tool_calls_in_the_reply(stub_llm: StubLLM) -> None:
    stub_llm.configure(
        {"tool_calls": {"Book a table": [{"name": "book", "arguments": {"people": 2}}]}}
    )
    completion = run(_client(stub_llm).complete("Book a table"))

    assert completion.finish_reason == "tool_calls"
    assert completion.text == ""
    assert completion.tool_calls == [ToolCall(name="book", arguments={"people": 2}, id="call_0")]
    output = completion.output
    assert output.kind == "messages"
    assert output.messages is not None
    assert output.messages[0].tool_calls[0].name == "book"


def test_invoke_turns_text_into_one_user_message_with_the_system_prompt(
    stub_llm: StubLLM,
) -> None:
    client = _client(stub_llm, system="You are terse.")
    out = run(client.invoke(Content.of_text("hello")))

    assert out.output == Content.of_text("hello")
    assert out.usage.total_tokens is not None
    assert stub_llm.requests()[0].body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello"},
    ]


def test_api_key_is_sent_as_a_bearer_token(stub_llm: StubLLM) -> None:
    stub_llm.configure({"require_key": "sk-good"})
    assert run(_client(stub_llm, api_key="sk-good").complete("hi")).text == "hi"
    assert stub_llm.requests()[0].headers["Authorization"] == "Bearer sk-good"


@pytest.mark.parametrize(
    ("config", "status"),
    [({"require_key": "sk-good"}, 401), ({"models": ["other-model"]}, 404)],
)
def test_client_errors_are_target_errors_and_not_retried(
    stub_llm: StubLLM, config: dict[str, object], status: int
) -> None:
    stub_llm.configure(config)
    with pytest.raises(TargetError) as caught:
        run(_client(stub_llm, api_key="sk-bad").complete("hi"))

    assert caught.value.status == status
    assert caught.value.hint
    assert stub_llm.calls(OPENAI_PATH) == 1


def test_400_is_a_target_error_with_the_server_message(stub_llm: StubLLM) -> None:
    client = _client(stub_llm, headers={"X-Stub-Fault": '{"status": 400}'})
    with pytest.raises(TargetError, match="injected HTTP 400") as caught:
        run(client.complete("hi"))
    assert caught.value.status == 400
    assert stub_llm.calls() == 1


def test_describe_is_the_manifest_identity() -> None:
    client = OpenAICompatible("http://h/v1/", "m", {"temperature": 0})
    assert client.describe() == {
        "connector": "openai-compatible",
        "base_url": "http://h/v1",
        "model": "m",
        "params": {"temperature": 0},
        "secret_ref": None,
    }


def test_invoke_passes_the_trial_seed(stub_llm: StubLLM) -> None:
    client = _client(stub_llm)
    assert client.supports_seed
    run(client.invoke("hi", seed=42))
    assert stub_llm.requests()[0].body["seed"] == 42
