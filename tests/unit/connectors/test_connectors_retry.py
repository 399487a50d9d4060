"""Retries and fault classification, against injected faults over real HTTP."""

from __future__ import annotations

import random
import socket
from datetime import UTC, datetime

import pytest

from evalsi.connectors import (
    Anthropic,
    InfraError,
    OpenAICompatible,
    Resilience,
    RetryPolicy,
    parse_retry_after,
    retrying,
)
from tests.support.aio import FakeClock, run
from tests.support.stub_llm import ANTHROPIC_PATH, OPENAI_PATH, Fault, StubLLM

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)


def _client(stub: StubLLM, policy: RetryPolicy = FAST, timeout: float = 5.0) -> OpenAICompatible:
    return OpenAICompatible(
        stub.openai_url, "m", resilience=Resilience(retry=policy), timeout=timeout
    )


def test_429_waits_at_least_retry_after(stub_llm: StubLLM) -> None:
    stub_llm.schedule(Fault(status=429, retry_after="1"))
    completion = run(_client(stub_llm).complete("hi"))

    assert completion.text == "hi"
    assert completion.attempts == 2
    first, second = stub_llm.arrival_times(OPENAI_PATH)
    assert second - first >= 1.0


def test_5xx_is_retried_then_succeeds(stub_llm: StubLLM) -> None:
    stub_llm.schedule(Fault(status=500), Fault(status=503))
    completion = run(_client(stub_llm).complete("hi"))

    assert completion.text == "hi"
    assert completion.attempts == 3
    assert stub_llm.calls(OPENAI_PATH) == 3


@pytest.mark.parametrize("attempts", [1, 3])
def test_exhausted_retries_end_as_server_error_after_exactly_n_attempts(
    stub_llm: StubLLM, attempts: int
) -> None:
    stub_llm.schedule(*[Fault(status=503)] * 10)
    policy = RetryPolicy(max_attempts=attempts, base_delay=0.01, max_delay=0.02)
    with pytest.raises(InfraError) as caught:
        run(_client(stub_llm, policy).complete("hi"))

    assert caught.value.kind == "server_error"
    assert caught.value.status == 503
    assert caught.value.attempts == attempts
    assert stub_llm.calls(OPENAI_PATH) == attempts


def test_anthropic_overloaded_529_is_a_retried_server_error(stub_llm: StubLLM) -> None:
    stub_llm.schedule(Fault(status=529))
    client = Anthropic(stub_llm.url, "m", resilience=Resilience(retry=FAST))
    assert run(client.complete("hi")).attempts == 2
    assert stub_llm.calls(ANTHROPIC_PATH) == 2


@pytest.mark.parametrize("fault", [Fault(malformed=True), Fault(truncated=True)])
def test_unreadable_body_is_malformed_response(stub_llm: StubLLM, fault: Fault) -> None:
    stub_llm.schedule(fault)
    with pytest.raises(InfraError) as caught:
        run(_client(stub_llm, RetryPolicy(max_attempts=1)).complete("hi"))
    assert caught.value.kind == "malformed_response"
    assert stub_llm.calls() == 1


def test_malformed_body_is_retried_like_any_infra_error(stub_llm: StubLLM) -> None:
    stub_llm.schedule(Fault(malformed=True), Fault(truncated=True))
    assert run(_client(stub_llm).complete("hi")).attempts == 3


def test_hang_ends_as_timeout(stub_llm: StubLLM) -> None:
    stub_llm.schedule(Fault(hang=True), Fault(hang=True))
    policy = RetryPolicy(max_attempts=2, base_delay=0.01)
    with pytest.raises(InfraError) as caught:
        run(_client(stub_llm, policy, timeout=0.2).complete("hi"))
    assert caught.value.kind == "timeout"
    assert caught.value.attempts == 2
    assert stub_llm.calls() == 2


def test_408_is_a_timeout_and_retried(stub_llm: StubLLM) -> None:
    stub_llm.schedule(Fault(status=408))
    assert run(_client(stub_llm).complete("hi")).attempts == 2


def test_connection_refused_is_a_connection_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAICompatible(
        f"http://127.0.0.1:{port}/v1",
        "m",
        resilience=Resilience(retry=RetryPolicy(max_attempts=2, base_delay=0.01)),
    )
    with pytest.raises(InfraError) as caught:
        run(client.complete("hi"))
    assert caught.value.kind == "connection"
    assert caught.value.attempts == 2


def test_deadline_stops_retries_the_server_asks_us_to_wait_beyond(stub_llm: StubLLM) -> None:
    stub_llm.schedule(Fault(status=429, retry_after="30"))
    policy = RetryPolicy(max_attempts=5, base_delay=0.01, deadline=5.0)
    with pytest.raises(InfraError) as caught:
        run(_client(stub_llm, policy).complete("hi"))
    assert caught.value.kind == "rate_limited"
    assert caught.value.retry_after == 30.0
    assert stub_llm.calls() == 1


# -- the retry loop itself, on fake time ------------------------------------------------------


def test_retrying_sleeps_full_jitter_backoff_and_honours_retry_after() -> None:
    clock = FakeClock()
    failures = [
        InfraError("server_error", "boom"),
        InfraError("rate_limited", "slow down", retry_after=7.0),
        InfraError("timeout", "late"),
    ]

    async def attempt() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=3.0)
    result, attempts = run(retrying(attempt, policy, clock=clock, rng=random.Random(1)))

    assert (result, attempts) == ("ok", 4)
    first, second, third = clock.sleeps
    assert 0.0 <= first <= 1.0
    assert second >= 7.0  # Retry-After wins over a smaller backoff
    assert 0.0 <= third <= 3.0  # capped at max_delay (4.0 uncapped)


def test_retrying_does_not_retry_circuit_open_or_other_errors() -> None:
    calls = 0

    async def open_circuit() -> None:
        nonlocal calls
        calls += 1
        raise InfraError("circuit_open", "open")

    with pytest.raises(InfraError):
        run(retrying(open_circuit, RetryPolicy(), clock=FakeClock()))
    assert calls == 1

    async def bug() -> None:
        raise KeyError("ours")

    with pytest.raises(KeyError):
        run(retrying(bug, RetryPolicy(), clock=FakeClock()))


def test_retrying_gives_up_when_the_next_wait_would_cross_the_deadline() -> None:
    clock = FakeClock()

    async def always() -> None:
        raise InfraError("server_error", "down")

    policy = RetryPolicy(max_attempts=100, base_delay=1.0, max_delay=1.0, deadline=10.0)
    with pytest.raises(InfraError) as caught:
        run(retrying(always, policy, clock=clock, rng=random.Random(0)))
    assert sum(clock.sleeps) < 10.0
    assert caught.value.attempts == len(clock.sleeps) + 1


def test_backoff_is_bounded_by_the_exponential_ceiling() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0)
    rng = random.Random(3)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)]:
        draws = [policy.backoff(attempt, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert max(draws) > ceiling * 0.8  # full jitter spans the range


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("3", 3.0),
        (" 0.5 ", 0.5),
        ("-4", 0.0),
        ("Wed, 21 Oct 2015 07:28:05 GMT", 5.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
        ("nan", None),
    ],
)
def test_parse_retry_after(header: str | None, expected: float | None) -> None:
    now = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)
    assert parse_retry_after(header, now=now) == expected


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"base_delay": -1.0}, {"deadline": 0.0}],
)
def test_bad_retry_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
