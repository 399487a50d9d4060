"""One attempt, guarded: circuit breaker, rate limiter, then the call; all under the retry loop."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from evalsi.connectors._breaker import BreakerRegistry
from evalsi.connectors._clock import SYSTEM_CLOCK, Clock
from evalsi.connectors._egress import EgressPolicy
from evalsi.connectors._errors import InfraError, TargetError
from evalsi.connectors._limiters import RateKey, RateLimiterRegistry
from evalsi.connectors._ratelimit import RateLimits
from evalsi.connectors._retry import RetryPolicy, retrying

T = TypeVar("T")


@dataclass(slots=True)
class Resilience:
    """Retry policy, breakers, rate limiters, the clock they run on, and the egress policy.

    Build one per run (or use the process default) and hand it to every connector, so every
    task on the same endpoint or key shares the same breaker and buckets. ``egress`` is the
    server's policy for the addresses its calls may reach (None: any, the embedded default);
    a server sets it where it builds a run's, an evaluation's or a policy's clients.
    """

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    clock: Clock = SYSTEM_CLOCK
    breakers: BreakerRegistry | None = None
    limiters: RateLimiterRegistry | None = None
    rng: random.Random = field(default_factory=random.Random)
    egress: EgressPolicy | None = None

    def __post_init__(self) -> None:
        if self.breakers is None:
            self.breakers = BreakerRegistry(clock=self.clock)
        if self.limiters is None:
            self.limiters = RateLimiterRegistry(clock=self.clock)


_DEFAULT: Resilience | None = None


def default_resilience() -> Resilience:
    """The process-wide default (real clock, default policies)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Resilience()
    return _DEFAULT


async def guarded_call(
    resilience: Resilience,
    call: Callable[[], Awaitable[tuple[T, int | None]]],
    *,
    endpoint: str,
    rate_key: RateKey,
    rate_limits: RateLimits | None,
    token_estimate: int = 0,
) -> tuple[T, int]:
    """Run ``call`` with retries; each attempt passes the breaker and the rate limiter first.

    ``call`` returns (result, tokens used or None). Returns (result, attempts).
    """
    assert resilience.breakers is not None
    assert resilience.limiters is not None
    breaker = resilience.breakers.get(endpoint)
    limiter = resilience.limiters.get(rate_key, rate_limits)

    async def attempt() -> T:
        breaker.before_call()
        outcome = "neutral"
        cause = ""
        try:
            if limiter is not None:
                await limiter.acquire(token_estimate)
            result, used = await call()
            outcome = "success"
        except InfraError as e:
            if e.kind == "rate_limited":
                if limiter is not None and e.retry_after:
                    limiter.pause(e.retry_after)
            elif e.kind != "egress_denied":  # refused before any request: says nothing of it
                outcome, cause = "failure", f"{e.kind}: {e.message}"
            raise
        except TargetError:
            outcome = "success"  # the endpoint answered; the request was wrong
            raise
        finally:
            if outcome == "success":
                breaker.record_success()
            elif outcome == "failure":
                breaker.record_failure(cause)
            else:
                breaker.record_neutral()
        if limiter is not None:
            limiter.settle(token_estimate, used)
        return result

    return await retrying(attempt, resilience.retry, clock=resilience.clock, rng=resilience.rng)
