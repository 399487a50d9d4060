"""The stub server itself: JSON configuration, per-request faults, counters."""

from __future__ import annotations

import aiohttp
import pytest

from tests.support.aio import run
from tests.support.stub_llm import OPENAI_PATH, Fault, StubLLM


async def _post(
    url: str, body: object, headers: dict[str, str] | None = None
) -> tuple[int, object]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body, headers=headers) as response,
    ):
        return response.status, await response.json(content_type=None)


def test_json_config_and_stats_over_http(stub_llm: StubLLM) -> None:
    config = {
        "answers": {"hi": "hello"},
        "latency_ms": 1,
        "faults": [{"status": 503}, None],
    }
    assert run(_post(stub_llm.url + "/stub/config", config)) == (200, {"ok": True})
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    status, _ = run(_post(stub_llm.openai_url + "/chat/completions", chat))
    assert status == 503
    status, body = run(_post(stub_llm.openai_url + "/chat/completions", chat))
    assert status == 200
    assert isinstance(body, dict)
    assert body["choices"][0]["message"]["content"] == "hello"

    async def stats() -> object:
        async with (
            aiohttp.ClientSession() as session,
            session.get(stub_llm.url + "/stub/stats") as response,
        ):
            return await response.json()

    assert run(stats()) == {"calls": {OPENAI_PATH: 2}}


def test_a_fault_per_request_by_header(stub_llm: StubLLM) -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    headers = {"X-Stub-Fault": '{"status": 429, "retry_after": "2"}'}
    status, _ = run(_post(stub_llm.openai_url + "/chat/completions", chat, headers))
    assert status == 429
    request = stub_llm.requests()[0]
    assert request.fault == Fault(status=429, retry_after="2")
    assert request.status == 429
    assert request.finished is not None
    assert request.finished >= request.started


def test_schedules_can_target_one_path(stub_llm: StubLLM) -> None:
    stub_llm.schedule(Fault(status=500), path="/v1/messages")
    chat = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert run(_post(stub_llm.openai_url + "/chat/completions", chat))[0] == 200
    stub_llm.reset()
    assert stub_llm.calls() == 0


def test_unknown_config_is_refused(stub_llm: StubLLM) -> None:
    with pytest.raises(ValueError, match="unknown stub config"):
        stub_llm.configure({"anwsers": {}})
    with pytest.raises(ValueError, match="unknown fault field"):
        Fault.from_dict({"status": 500, "sleep": 1})
