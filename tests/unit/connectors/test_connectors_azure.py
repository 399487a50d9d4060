"""Azure OpenAI against the stub, over real HTTP: Azure's address, key header and version."""

from __future__ import annotations

import pytest

from evalsi.connectors import (
    AzureOpenAI,
    InfraError,
    Resilience,
    RetryPolicy,
    Secret,
    TargetError,
    chat_model,
)
from evalsi.core import Message, ToolCall, UserError
from tests.support.aio import run
from tests.support.stub_llm import Fault, StubLLM

PATH = "/openai/deployments/gpt4o-prod/chat/completions"


def _client(stub: StubLLM, **kwargs: object) -> AzureOpenAI:
    resilience = Resilience(retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))
    kwargs.setdefault("api_version", "2024-10-21")
    return AzureOpenAI(stub.url, "gpt4o-prod", resilience=resilience, **kwargs)  # type: ignore[arg-type]


def test_request_shape_path_query_key_header(stub_llm: StubLLM) -> None:
    stub_llm.configure({"answers": {"2+2?": "4"}, "require_key": "az-1", "models": ["gpt4o-prod"]})
    client = _client(stub_llm, api_key=Secret("az-1", ref="env:AZURE_OPENAI_API_KEY"))
    completion = run(client.complete("2+2?", seed=7))

    assert completion.text == "4"
    assert completion.usage.total_tokens == 2
    (request,) = stub_llm.requests(PATH)
    assert request.raw_path == PATH + "?api-version=2024-10-21"
    assert request.query == {"api-version": "2024-10-21"}
    assert request.headers["api-key"] == "az-1"
    assert "Authorization" not in request.headers
    assert request.body == {
        "model": "gpt4o-prod",
        "messages": [{"role": "user", "content": "2+2?"}],
        "seed": 7,
    }
    assert client.describe() == {
        "connector": "azure-openai",
        "base_url": stub_llm.url,
        "model": "gpt4o-prod",
        "params": {},
        "api_version": "2024-10-21",
        "secret_ref": "env:AZURE_OPENAI_API_KEY",
    }


def test_entra_id_token_goes_as_bearer(stub_llm: StubLLM) -> None:
    stub_llm.configure({"require_key": "eyJ-token"})
    run(_client(stub_llm, api_key=Secret("eyJ-token"), bearer=True).complete("hi"))

    (request,) = stub_llm.requests(PATH)
    assert request.headers["Authorization"] == "Bearer eyJ-token"
    assert "api-key" not in request.headers


def test_tool_calls_round_trip_as_openai(stub_llm: StubLLM) -> None:
    stub_llm.configure({"tool_calls": {"Book": [{"name": "book", "arguments": {"n": 2}}]}})
    completion = run(_client(stub_llm).complete("Book"))
    assert completion.tool_calls == [ToolCall(name="book", arguments={"n": 2}, id="call_0")]

    follow = [
        Message(role="user", content="Book"),
        *completion.messages,
        Message(role="tool", content="booked", tool_call_id="call_0"),
    ]
    assert run(_client(stub_llm).complete(follow)).text == "booked"
    body = stub_llm.requests(PATH)[1].body
    assert body["messages"][1]["tool_calls"][0]["function"] == {
        "name": "book",
        "arguments": '{"n":2}',
    }
    assert body["messages"][2] == {"role": "tool", "content": "booked", "tool_call_id": "call_0"}


def test_errors_map_as_the_other_connectors(stub_llm: StubLLM) -> None:
    stub_llm.configure({"require_key": "right"})
    with pytest.raises(TargetError) as bad_key:
        run(_client(stub_llm, api_key=Secret("wrong")).complete("hi"))
    assert bad_key.value.status == 401
    assert "wrong" not in str(bad_key.value)

    stub_llm.configure({"require_key": None})
    stub_llm.schedule(Fault(status=429, retry_after="0"), Fault(status=503))
    completion = run(_client(stub_llm).complete("again"))
    assert completion.attempts == 3

    stub_llm.schedule(*[Fault(status=500)] * 3)
    with pytest.raises(InfraError) as down:
        run(_client(stub_llm).complete("down"))
    assert down.value.kind == "server_error"
    assert "api-version" not in str(down.value)  # no query string in messages


@pytest.mark.parametrize(
    ("base_url", "api_version", "field"),
    [
        ("https://res.openai.azure.com", "", "apiVersion"),
        ("https://res.openai.azure.com/openai/deployments/x", "2024-10-21", "baseUrl"),
        ("res.openai.azure.com", "2024-10-21", "baseUrl"),
        ("https://res.openai.azure.com?api-version=1", "2024-10-21", "baseUrl"),
    ],
)
def test_bad_settings_name_the_spec_field(base_url: str, api_version: str, field: str) -> None:
    with pytest.raises(UserError) as e:
        chat_model(
            "azure-openai", base_url, "dep", api_version=api_version, at="spec.judges.default"
        )
    assert e.value.message.startswith(f"spec.judges.default.{field}: ")
