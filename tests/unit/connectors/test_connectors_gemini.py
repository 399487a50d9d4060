"""Gemini's generateContent: the mapping both ways, and the wire against the stub."""

from __future__ import annotations

import pytest

from evalsi.connectors import (
    Gemini,
    InfraError,
    Resilience,
    RetryPolicy,
    Secret,
    TargetError,
    chat_model,
)
from evalsi.connectors._gemini import gemini_request, parse_gemini
from evalsi.core import Message, ToolCall
from tests.support.aio import run
from tests.support.stub_llm import Fault, StubLLM

PATH = "/v1beta/models/gemini-stub:generateContent"
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def _client(stub: StubLLM, **kwargs: object) -> Gemini:
    resilience = Resilience(retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))
    return Gemini(stub.url, "gemini-stub", resilience=resilience, **kwargs)  # type: ignore[arg-type]


def test_request_maps_system_turns_tools_and_generation_config() -> None:
    conversation = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris and Rome?"),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=[
                ToolCall(name="weather", arguments='{"city": "Paris"}', id="weather-0"),
                ToolCall(name="weather", arguments={"city": "Rome"}, id="g-id-7"),
            ],
        ),
        Message(role="tool", content="18C", tool_call_id="weather-0"),
        Message(role="tool", content='{"temp": 21}', tool_call_id="g-id-7"),
    ]
    params = {"temperature": 0, "max_tokens": 64, "stop": "END", "tools": [WEATHER]}
    body = gemini_request(conversation, params, seed=3)

    assert body == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "temperature": 0,
            "maxOutputTokens": 64,
            "stopSequences": ["END"],
            "seed": 3,
        },
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "weather",
                        "description": "Weather in a city",
                        "parametersJsonSchema": WEATHER["function"]["parameters"],  # type: ignore[index]
                    }
                ]
            }
        ],
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Checking."},
                    # an id this connector made up is not sent; Gemini's own is
                    {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                    {"functionCall": {"name": "weather", "args": {"city": "Rome"}, "id": "g-id-7"}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "weather", "response": {"result": "18C"}}},
                    {
                        "functionResponse": {
                            "name": "weather",
                            "response": {"temp": 21},
                            "id": "g-id-7",
                        }
                    },
                ],
            },
        ],
    }


def test_native_tools_pass_through() -> None:
    native = [{"functionDeclarations": [{"name": "f"}]}, {"googleSearch": {}}]
    body = gemini_request([Message(role="user", content="x")], {"tools": native})
    assert body["tools"] == native
    assert "generationConfig" not in body


def test_reply_maps_text_calls_usage_and_skips_thoughts() -> None:
    reply = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "thinking...", "thought": True},
                        {"text": "Sure. "},
                        {"functionCall": {"name": "book", "args": {"n": 2}}},
                        {"functionCall": {"name": "book", "args": {"n": 3}, "id": "own"}},
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 4,
            "thoughtsTokenCount": 6,
            "totalTokenCount": 20,
        },
        "modelVersion": "gemini-2.5-flash-001",
    }
    c = parse_gemini(reply, "u")
    assert c.text == "Sure. "
    assert c.tool_calls == [
        ToolCall(name="book", arguments={"n": 2}, id="book-0"),
        ToolCall(name="book", arguments={"n": 3}, id="own"),
    ]
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.total_tokens) == (10, 10, 20)
    assert (c.finish_reason, c.model) == ("STOP", "gemini-2.5-flash-001")


def test_a_blocked_prompt_is_an_answer_and_no_candidates_is_malformed() -> None:
    blocked = parse_gemini({"promptFeedback": {"blockReason": "SAFETY"}}, "u")
    assert (blocked.text, blocked.finish_reason) == ("", "SAFETY")
    with pytest.raises(InfraError) as e:
        parse_gemini({"usageMetadata": {}}, "u")
    assert e.value.kind == "malformed_response"


def test_wire_shape_against_the_stub(stub_llm: StubLLM) -> None:
    stub_llm.configure({"answers": {"2+2?": "4"}, "require_key": "g-1", "models": ["gemini-stub"]})
    client = _client(
        stub_llm,
        api_key=Secret("g-1", ref="env:GEMINI_API_KEY"),
        system="Answer in digits.",
        params={"temperature": 0},
    )
    completion = run(client.invoke("2+2?", seed=1))

    assert completion.output.as_text() == "4"
    assert completion.usage.input_tokens == 4  # "Answer in digits." + "2+2?"
    (request,) = stub_llm.requests(PATH)
    assert request.raw_path == PATH
    assert request.query == {}  # the key is never in the URL
    assert request.headers["x-goog-api-key"] == "g-1"
    assert "Authorization" not in request.headers
    assert request.body == {
        "generationConfig": {"temperature": 0, "seed": 1},
        "contents": [{"role": "user", "parts": [{"text": "2+2?"}]}],
        "systemInstruction": {"parts": [{"text": "Answer in digits."}]},
    }


def test_tool_call_round_trip_against_the_stub(stub_llm: StubLLM) -> None:
    stub_llm.configure({"tool_calls": {"Book": [{"name": "book", "arguments": {"n": 2}}]}})
    client = _client(stub_llm)
    first = run(client.complete("Book", tools=[WEATHER]))
    assert first.tool_calls == [ToolCall(name="book", arguments={"n": 2}, id="book-0")]
    result = Message(role="tool", content="booked", tool_call_id="book-0")
    second = run(client.complete([Message(role="user", content="Book"), *first.messages, result]))
    assert second.text == "booked"
    sent = stub_llm.requests(PATH)[1].body["contents"]
    assert sent[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "book", "response": {"result": "booked"}}}],
    }


def test_errors_map_as_the_other_connectors(stub_llm: StubLLM) -> None:
    stub_llm.configure({"require_key": "right"})
    with pytest.raises(TargetError) as bad_key:
        run(_client(stub_llm, api_key=Secret("wrong")).complete("hi"))
    assert bad_key.value.status == 400
    assert "API key not valid" in bad_key.value.message

    stub_llm.configure({"require_key": None})
    stub_llm.schedule(Fault(status=429, retry_after="0"), Fault(status=503))
    assert run(_client(stub_llm).complete("again")).attempts == 3


def test_default_base_url_and_version() -> None:
    client = chat_model("gemini", "", "models/gemini-2.5-flash", api_version="v1")
    assert client._url == (
        "https://generativelanguage.googleapis.com/v1/models/gemini-2.5-flash:generateContent"
    )


def test_an_oauth_token_goes_as_bearer(stub_llm: StubLLM) -> None:
    run(_client(stub_llm, api_key=Secret("ya29.token"), bearer=True).complete("hi"))
    (request,) = stub_llm.requests(PATH)
    assert request.headers["Authorization"] == "Bearer ya29.token"
    assert "x-goog-api-key" not in request.headers
