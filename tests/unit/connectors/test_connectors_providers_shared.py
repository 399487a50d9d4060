"""The new providers go through the machinery every connector shares: the egress policy of
the run's session (refused without a request, with a control that reaches the stub), and the
rate limiter keyed by connector, model and key."""

from __future__ import annotations

import time
from typing import Any

import pytest

from evalsi.connectors import (
    EgressPolicy,
    InfraError,
    RateLimits,
    Resilience,
    RetryPolicy,
    chat_model,
    close_shared_session,
)
from tests.support.aio import run
from tests.support.sigv4 import KEY_ID, SECRET_KEY, TOKEN
from tests.support.stub_llm import StubLLM

EXPOSED = EgressPolicy(listen_host="192.0.2.2")  # a server listening off loopback
LOCAL = EgressPolicy(listen_host="127.0.0.1")
CONNECTORS = {
    "azure-openai": {"api_version": "2024-10-21"},
    "gemini": {},
    "bedrock": {"region": "us-east-1"},
}


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")


def _model(connector: str, url: str, resilience: Resilience, **kw: Any) -> Any:
    return chat_model(connector, url, "m", resilience=resilience, **CONNECTORS[connector], **kw)


@pytest.mark.parametrize("connector", sorted(CONNECTORS))
def test_the_egress_policy_refuses_before_any_request(connector: str, stub_llm: StubLLM) -> None:
    async def call(policy: EgressPolicy) -> str:
        resilience = Resilience(retry=RetryPolicy(max_attempts=1), egress=policy)
        try:
            return (await _model(connector, stub_llm.url, resilience).complete("hi")).text
        finally:
            await close_shared_session()

    with pytest.raises(InfraError) as refused:
        run(call(EXPOSED))
    assert refused.value.kind == "egress_denied"
    assert stub_llm.calls() == 0
    assert run(call(LOCAL)) == "hi"  # the control: allowed, it reaches the stub
    assert stub_llm.calls() == 1


@pytest.mark.parametrize("connector", sorted(CONNECTORS))
def test_the_rate_limiter_paces_the_calls(connector: str, stub_llm: StubLLM) -> None:
    resilience = Resilience(retry=RetryPolicy(max_attempts=1))
    model = _model(
        connector, stub_llm.url, resilience, rate_limits=RateLimits(requests_per_minute=120)
    )

    async def three() -> None:
        for _ in range(3):
            await model.complete("hi")

    started = time.monotonic()
    run(three())
    times = stub_llm.arrival_times()
    assert len(times) == 3
    assert times[-1] - times[0] >= 0.4  # 120/min: a burst of 2, then one each 0.5 s
    assert time.monotonic() - started < 5
