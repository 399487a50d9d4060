"""Bedrock's Converse API: the mapping both ways, and SigV4-signed requests against the stub
(``tests/support/sigv4.py`` recomputes each signature from what arrived)."""

from __future__ import annotations

import pytest

from evalsi.connectors import (
    Bedrock,
    InfraError,
    Resilience,
    RetryPolicy,
    Secret,
    TargetError,
    chat_model,
)
from evalsi.connectors._bedrock import converse_request, parse_converse
from evalsi.core import Message, ToolCall, UserError
from tests.support.aio import run
from tests.support.sigv4 import KEY_ID, SECRET_KEY, TOKEN, verify_sigv4
from tests.support.stub_llm import Fault, StubLLM

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
PATH = "/model/anthropic.claude-3-haiku-20240307-v1:0/converse"  # as the stub routes it
RAW_PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"  # as it is sent


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    """Credentials in the usual variables, and no profile files or instance metadata to find."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def _client(stub: StubLLM, **kwargs: object) -> Bedrock:
    resilience = Resilience(retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))
    kwargs.setdefault("region", "eu-west-3")
    return Bedrock(stub.url, MODEL, resilience=resilience, **kwargs)  # type: ignore[arg-type]


def test_request_maps_system_turns_tools_and_inference_config() -> None:
    conversation = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris?"),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=[ToolCall(name="weather", arguments='{"city": "Paris"}', id="tu1")],
        ),
        Message(role="tool", content='{"temp": 18}', tool_call_id="tu1"),
        Message(role="user", content="And Rome?"),
    ]
    tool = {
        "type": "function",
        "function": {"name": "weather", "parameters": {"type": "object"}},
    }
    params = {"temperature": 0, "max_tokens": 64, "top_k": 5, "tools": [tool]}
    assert converse_request(conversation, params) == {
        "inferenceConfig": {"temperature": 0, "maxTokens": 64},
        "additionalModelRequestFields": {"top_k": 5},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "weather",
                        "description": "weather",  # Converse refuses an empty description
                        "inputSchema": {"json": {"type": "object"}},
                    }
                }
            ]
        },
        "system": [{"text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"text": "Checking."},
                    {
                        "toolUse": {
                            "toolUseId": "tu1",
                            "name": "weather",
                            "input": {"city": "Paris"},
                        }
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "tu1", "content": [{"json": {"temp": 18}}]}},
                    {"text": "And Rome?"},
                ],
            },
        ],
    }


def test_reply_maps_text_tool_use_usage_and_stop_reason() -> None:
    reply = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"text": "Booking."},
                    {"toolUse": {"toolUseId": "tu9", "name": "book", "input": {"n": 2}}},
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 12, "outputTokens": 5, "totalTokens": 17},
    }
    c = parse_converse(reply, "u", model=MODEL)
    assert c.text == "Booking."
    assert c.tool_calls == [ToolCall(name="book", arguments={"n": 2}, id="tu9")]
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.total_tokens) == (12, 5, 17)
    assert (c.finish_reason, c.model) == ("tool_use", MODEL)
    with pytest.raises(InfraError) as e:
        parse_converse({"output": {}}, "u")
    assert e.value.kind == "malformed_response"


def test_signed_request_against_the_stub(stub_llm: StubLLM, aws_env: None) -> None:
    stub_llm.configure({"answers": {"2+2?": "4"}, "models": [MODEL]})
    client = _client(stub_llm, system="Digits only.", params={"temperature": 0})
    completion = run(client.invoke("2+2?"))

    assert completion.output.as_text() == "4"
    assert completion.finish_reason == "end_turn"
    (request,) = stub_llm.requests(PATH)
    assert request.raw_path == RAW_PATH
    assert request.body == {
        "inferenceConfig": {"temperature": 0},
        "messages": [{"role": "user", "content": [{"text": "2+2?"}]}],
        "system": [{"text": "Digits only."}],
    }
    assert request.headers["X-Amz-Security-Token"] == TOKEN
    verify_sigv4(request, stub_llm.url, "eu-west-3")
    assert client.describe()["region"] == "eu-west-3"
    assert client.describe()["secret_ref"] is None


def test_the_check_can_fail(stub_llm: StubLLM, aws_env: None) -> None:
    run(_client(stub_llm).complete("hi"))
    (request,) = stub_llm.requests(PATH)
    request.raw = request.raw.replace(b"hi", b"ho")
    with pytest.raises(AssertionError):
        verify_sigv4(request, stub_llm.url, "eu-west-3")


def test_each_retry_is_signed_afresh(stub_llm: StubLLM, aws_env: None) -> None:
    stub_llm.schedule(Fault(status=503), Fault(status=429, retry_after="0"))
    completion = run(_client(stub_llm).complete("again"))
    assert completion.attempts == 3
    requests = stub_llm.requests(PATH)
    assert len(requests) == 3
    for request in requests:
        verify_sigv4(request, stub_llm.url, "eu-west-3")


def test_tool_call_round_trip_against_the_stub(stub_llm: StubLLM, aws_env: None) -> None:
    stub_llm.configure({"tool_calls": {"Book": [{"name": "book", "arguments": {"n": 2}}]}})
    client = _client(stub_llm)
    first = run(client.complete("Book"))
    assert first.tool_calls == [ToolCall(name="book", arguments={"n": 2}, id="tooluse_0")]
    assert first.finish_reason == "tool_use"
    result = Message(role="tool", content="booked", tool_call_id="tooluse_0")
    second = run(client.complete([Message(role="user", content="Book"), *first.messages, result]))
    assert second.text == "booked"


def test_an_api_key_is_a_bearer_token_without_signing(stub_llm: StubLLM) -> None:
    stub_llm.configure({"require_key": "br-1"})
    client = _client(stub_llm, api_key=Secret("br-1", ref="env:AWS_BEARER_TOKEN_BEDROCK"))
    run(client.complete("hi"))
    (request,) = stub_llm.requests(PATH)
    assert request.headers["Authorization"] == "Bearer br-1"
    assert "X-Amz-Date" not in request.headers


def test_errors_map_as_the_other_connectors(stub_llm: StubLLM, aws_env: None) -> None:
    stub_llm.configure({"models": ["other"]})
    with pytest.raises(TargetError) as missing:
        run(_client(stub_llm).complete("hi"))
    assert missing.value.status == 404
    assert "model identifier is invalid" in missing.value.message


def test_default_endpoint_follows_the_region_and_its_partition(aws_env: None) -> None:
    assert chat_model("bedrock", "", MODEL, region="us-east-1")._url == (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        "anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    )
    assert chat_model("bedrock", "", MODEL, region="cn-north-1").base_url == (
        "https://bedrock-runtime.cn-north-1.amazonaws.com.cn"
    )


@pytest.mark.parametrize(
    ("region", "problem"), [("", "needs the AWS region"), ("us-middle-9", "unknown AWS region")]
)
def test_a_bad_region_names_the_spec_field(region: str, problem: str, aws_env: None) -> None:
    with pytest.raises(UserError) as e:
        chat_model("bedrock", "", MODEL, region=region, at="target.model")
    assert e.value.message.startswith("target.model.region: ")
    assert problem in e.value.message


def test_no_credentials_is_a_user_error(monkeypatch: pytest.MonkeyPatch, aws_env: None) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with pytest.raises(UserError) as e:
        chat_model("bedrock", "", MODEL, region="us-east-1")
    assert "no AWS credentials" in e.value.message
    assert "AWS_ACCESS_KEY_ID" in (e.value.hint or "")


def test_an_arn_is_one_encoded_path_segment_signed_as_sent(
    stub_llm: StubLLM, aws_env: None
) -> None:
    arn = "arn:aws:bedrock:eu-west-3:123456789012:inference-profile/eu.amazon.nova-lite-v1:0"
    resilience = Resilience(retry=RetryPolicy(max_attempts=1))
    run(Bedrock(stub_llm.url, arn, region="eu-west-3", resilience=resilience).complete("hi"))
    (request,) = stub_llm.requests()
    assert request.raw_path == (
        "/model/arn%3Aaws%3Abedrock%3Aeu-west-3%3A123456789012%3Ainference-profile%2F"
        "eu.amazon.nova-lite-v1%3A0/converse"
    )
    verify_sigv4(request, stub_llm.url, "eu-west-3")
