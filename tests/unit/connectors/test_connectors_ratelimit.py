"""Token buckets for requests/min and tokens/min: on fake time, and against the stub."""

from __future__ import annotations

import asyncio
import time

import pytest

from evalsi.connectors import (
    InfraError,
    OpenAICompatible,
    RateLimiter,
    RateLimiterRegistry,
    RateLimits,
    Resilience,
    RetryPolicy,
    TokenBucket,
)
from tests.support.aio import FakeClock, run
from tests.support.stub_llm import OPENAI_PATH, Fault, StubLLM


def test_bucket_grants_a_burst_then_one_per_refill() -> None:
    bucket = TokenBucket(capacity=3, rate=2.0)
    waits = [bucket.reserve(1, now=0.0) for _ in range(6)]
    assert waits == [0.0, 0.0, 0.0, 0.5, 1.0, 1.5]
    assert bucket.available(now=10.0) == 3.0  # never above capacity


def test_concurrent_acquires_are_spaced_at_the_rate_on_fake_time() -> None:
    clock = FakeClock(start=0.0, auto=False)
    limiter = RateLimiter(RateLimits(requests_per_minute=60, burst=2), clock=clock)
    granted: list[float] = []

    async def one() -> None:
        await limiter.acquire()
        granted.append(clock.monotonic())

    async def main() -> None:
        tasks = [asyncio.create_task(one()) for _ in range(6)]
        await asyncio.sleep(0)
        await clock.advance(10.0)
        await asyncio.gather(*tasks)

    run(main())
    assert granted == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0]


def test_tokens_per_minute_reserve_an_estimate_and_settle_the_truth() -> None:
    clock = FakeClock(start=0.0)
    limiter = RateLimiter(RateLimits(tokens_per_minute=600), clock=clock)  # 10 tokens/s
    run(limiter.acquire(tokens=500))
    limiter.settle(estimated=500, actual=700)  # used 200 more than reserved
    assert limiter.tokens is not None
    assert limiter.tokens.available(now=0.0) == pytest.approx(-100.0)
    run(limiter.acquire(tokens=50))
    assert clock.sleeps == [pytest.approx(15.0)]  # 150 tokens short at 10/s


def test_a_pause_holds_every_new_request() -> None:
    clock = FakeClock(start=0.0)
    limiter = RateLimiter(RateLimits(requests_per_minute=6000), clock=clock)
    limiter.pause(4.0)
    run(limiter.acquire())
    assert clock.sleeps == [4.0]


def test_a_cancelled_wait_gives_its_slot_back() -> None:
    clock = FakeClock(start=0.0, auto=False)
    limiter = RateLimiter(RateLimits(requests_per_minute=60, burst=1), clock=clock)

    async def main() -> None:
        await limiter.acquire()  # the burst
        waiting = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    run(main())
    assert limiter.requests is not None
    assert limiter.requests.available(now=0.0) == 0.0  # not -1: the slot came back


def test_registry_keys_by_provider_model_and_key() -> None:
    registry = RateLimiterRegistry()
    limits = RateLimits(requests_per_minute=10)
    a = registry.get(("openai-compatible", "m", "env:A"), limits)
    assert a is registry.get(("openai-compatible", "m", "env:A"), limits)
    assert a is not registry.get(("openai-compatible", "m", "env:B"), limits)
    assert a is not registry.get(("openai-compatible", "other", "env:A"), limits)
    assert registry.get(("x", "y", "z"), None) is None
    assert registry.get(("x", "y", "z"), RateLimits()) is None
    with pytest.raises(ValueError, match="positive"):
        RateLimits(requests_per_minute=0)


def test_requests_per_minute_limit_the_rate_the_server_sees(stub_llm: StubLLM) -> None:
    limits = RateLimits(requests_per_minute=1200, burst=2)  # 20/s after a burst of 2
    client = OpenAICompatible(stub_llm.openai_url, "m", rate_limits=limits, resilience=Resilience())
    started: list[float] = []

    async def main() -> None:
        started.append(time.monotonic())  # the stub stamps arrivals on the same clock
        await asyncio.gather(*(client.complete(f"q{i}") for i in range(10)))

    run(main())
    times = stub_llm.arrival_times(OPENAI_PATH)
    assert len(times) == 10
    # A stall can only delay a call, never bring it forward: in the first w seconds the
    # server can have seen at most burst + w * rate calls.
    for window in (0.05, 0.1, 0.2, 0.3):
        seen = sum(1 for t in times if t < started[0] + window)
        assert seen <= 2 + window * 20, (window, seen)
    assert max(times) >= started[0] + 0.4  # 8 calls beyond the burst at 20/s


def test_a_429_pauses_every_task_on_the_same_key(stub_llm: StubLLM) -> None:
    resilience = Resilience(retry=RetryPolicy(max_attempts=1))
    limits = RateLimits(requests_per_minute=60000)
    first = OpenAICompatible(stub_llm.openai_url, "m", rate_limits=limits, resilience=resilience)
    other = OpenAICompatible(stub_llm.openai_url, "m", rate_limits=limits, resilience=resilience)
    stub_llm.schedule(Fault(status=429, retry_after="1"))
    with pytest.raises(InfraError) as caught:
        run(first.complete("first"))  # no retry: the task ends as rate_limited
    assert caught.value.kind == "rate_limited"

    run(other.complete("second"))  # another task on the same key waits out the pause
    t_first, t_second = stub_llm.arrival_times(OPENAI_PATH)
    assert t_second - t_first >= 1.0
