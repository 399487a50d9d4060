"""The circuit breaker: opens after N consecutive infra failures, short-circuits, half-opens."""

from __future__ import annotations

import pytest

from evalsi.connectors import (
    BreakerPolicy,
    BreakerRegistry,
    CircuitBreaker,
    InfraError,
    OpenAICompatible,
    Resilience,
    RetryPolicy,
    TargetError,
)
from tests.support.aio import FakeClock, run
from tests.support.stub_llm import OPENAI_PATH, Fault, StubLLM


def _setup(
    stub: StubLLM, *, threshold: int = 3, cooldown: float = 30.0
) -> tuple[OpenAICompatible, FakeClock]:
    clock = FakeClock()
    resilience = Resilience(
        retry=RetryPolicy(max_attempts=1),
        clock=clock,
        breakers=BreakerRegistry(BreakerPolicy(threshold, cooldown), clock=clock),
    )
    return OpenAICompatible(stub.openai_url, "m", resilience=resilience), clock


def _kind(client: OpenAICompatible) -> str:
    try:
        run(client.complete("hi"))
    except InfraError as e:
        return e.kind
    return "ok"


def test_opens_after_n_failures_then_short_circuits_without_calling(stub_llm: StubLLM) -> None:
    client, _ = _setup(stub_llm, threshold=3)
    stub_llm.schedule(*[Fault(status=503)] * 3)

    assert [_kind(client) for _ in range(3)] == ["server_error"] * 3
    assert stub_llm.calls(OPENAI_PATH) == 3
    assert [_kind(client) for _ in range(5)] == ["circuit_open"] * 5
    assert stub_llm.calls(OPENAI_PATH) == 3  # no HTTP call while open


def test_half_opens_after_the_cooldown_and_a_good_probe_closes_it(stub_llm: StubLLM) -> None:
    client, clock = _setup(stub_llm, threshold=2, cooldown=30.0)
    stub_llm.schedule(Fault(status=500), Fault(status=500))
    assert [_kind(client) for _ in range(2)] == ["server_error"] * 2
    clock.now += 29.0
    assert _kind(client) == "circuit_open"

    clock.now += 1.0
    assert _kind(client) == "ok"  # the probe went through and succeeded
    assert _kind(client) == "ok"
    assert stub_llm.calls(OPENAI_PATH) == 4


def test_a_failed_probe_opens_it_for_another_cooldown(stub_llm: StubLLM) -> None:
    client, clock = _setup(stub_llm, threshold=2, cooldown=10.0)
    stub_llm.schedule(*[Fault(status=502)] * 3)
    assert [_kind(client) for _ in range(2)] == ["server_error"] * 2
    clock.now += 10.0
    assert _kind(client) == "server_error"  # the probe
    assert _kind(client) == "circuit_open"
    clock.now += 10.0
    assert _kind(client) == "ok"
    assert stub_llm.calls(OPENAI_PATH) == 4


def test_rate_limits_and_target_errors_do_not_open_it(stub_llm: StubLLM) -> None:
    client, _ = _setup(stub_llm, threshold=2)
    stub_llm.schedule(Fault(status=429), Fault(status=429), Fault(status=429))
    assert [_kind(client) for _ in range(3)] == ["rate_limited"] * 3

    stub_llm.schedule(Fault(status=500), Fault(status=400), Fault(status=500))
    assert _kind(client) == "server_error"
    with pytest.raises(TargetError):
        run(client.complete("hi"))  # the endpoint answered: the count starts again
    assert _kind(client) == "server_error"
    assert _kind(client) == "ok"


def _state(breaker: CircuitBreaker) -> str:
    return breaker.state


def test_only_one_probe_at_a_time() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(
        "http://x", BreakerPolicy(failure_threshold=1, cooldown=5), clock=clock
    )
    breaker.record_failure()
    assert _state(breaker) == "open"
    clock.now += 5
    assert _state(breaker) == "half_open"
    breaker.before_call()  # the probe
    with pytest.raises(InfraError, match="while a probe runs") as caught:
        breaker.before_call()
    assert caught.value.kind == "circuit_open"
    assert not caught.value.retryable
    breaker.record_neutral()  # the probe told us nothing: the next caller may probe
    breaker.before_call()
    breaker.record_success()
    assert _state(breaker) == "closed"
    assert breaker.consecutive_failures == 0


def test_breakers_are_per_endpoint() -> None:
    registry = BreakerRegistry(BreakerPolicy(failure_threshold=1))
    registry.get("http://a").record_failure()
    assert registry.get("http://a").state == "open"
    assert registry.get("http://b").state == "closed"
    assert registry.get("http://a") is registry.get("http://a")
