"""The package's surface, its import cost, and the shared session per event loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import evalsi.connectors
from evalsi.connectors import (
    INFRA_KINDS,
    InfraError,
    TargetError,
    close_shared_session,
    shared_session,
)
from evalsi.core import RunError, UserError
from tests.support.aio import run
from tests.support.stub_llm import StubLLM


def test_public_surface_is_pinned() -> None:
    assert sorted(evalsi.connectors.__all__) == [
        "Anthropic",
        "AzureOpenAI",
        "BASE_URL_OPTIONAL",
        "BEARER_CONNECTORS",
        "Bedrock",
        "BreakerPolicy",
        "BreakerRegistry",
        "BreakerState",
        "CircuitBreaker",
        "Clock",
        "Completion",
        "DEFAULT_BASE_URLS",
        "DEFAULT_CONNECTION_LIMIT",
        "EgressDenied",
        "EgressPolicy",
        "EgressRule",
        "Gemini",
        "HttpTarget",
        "INFRA_KINDS",
        "InfraError",
        "InfraKind",
        "InputLike",
        "JsonPath",
        "JsonPathMiss",
        "MODEL_CONNECTORS",
        "OpenAICompatible",
        "PythonTarget",
        "RateLimiter",
        "RateLimiterRegistry",
        "RateLimits",
        "RateWindows",
        "Resilience",
        "RetryPolicy",
        "SYSTEM_CLOCK",
        "Secret",
        "SharedRateLimiter",
        "SystemClock",
        "Target",
        "TargetError",
        "TargetOutput",
        "TaskInfo",
        "TokenBucket",
        "azure_endpoint_problem",
        "bedrock_region_problem",
        "chat_model",
        "close_shared_session",
        "default_resilience",
        "egress_connector",
        "input_messages",
        "literal_address",
        "load_callable",
        "parse_retry_after",
        "plain_input",
        "render",
        "resolve_secret",
        "retrying",
        "shared_session",
        "trusted_rule",
    ]
    for name in evalsi.connectors.__all__:
        assert hasattr(evalsi.connectors, name), name


def test_error_taxonomy() -> None:
    assert INFRA_KINDS == (
        "rate_limited",
        "server_error",
        "timeout",
        "connection",
        "malformed_response",
        "circuit_open",
        "egress_denied",
        "sandbox",
        "harness",
        "checker",
        "cassette",
        "plugin",
    )
    assert issubclass(InfraError, RunError)
    assert issubclass(TargetError, UserError)
    assert InfraError("timeout", "x").retryable
    assert not InfraError("circuit_open", "x").retryable
    assert not InfraError("egress_denied", "x").retryable  # the policy answers the same again
    assert not InfraError("cassette", "x").retryable  # a replay misses the same call again


def test_importing_the_connectors_does_not_import_aiohttp() -> None:
    code = "import sys, evalsi.connectors; print('aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_one_session_per_event_loop(stub_llm: StubLLM) -> None:
    async def twice() -> tuple[object, object, bool]:
        first = await shared_session()
        second = await shared_session()
        await close_shared_session()
        return first, second, first.closed

    first, second, closed = run(twice())
    assert first is second
    assert closed
    other, _, _ = run(twice())
    assert other is not first

    async def limit() -> int:
        session = await shared_session(limit=7)
        return session.connector.limit if session.connector is not None else -1

    assert run(limit()) == 7


def test_sessions_do_not_leak_across_loops() -> None:
    async def open_one() -> object:
        return await shared_session()

    async def main() -> None:
        session = await open_one()
        await close_shared_session()
        assert getattr(session, "closed", False)

    asyncio.run(main())
