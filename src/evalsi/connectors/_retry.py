"""Retries: exponential backoff with full jitter, ``Retry-After`` honoured, bounded twice.

Bounded by a number of attempts and by an overall deadline: a retry that could not start before
the deadline is not attempted, and the last error is raised with the attempt count on it.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from evalsi.connectors._clock import SYSTEM_CLOCK, Clock
from evalsi.connectors._errors import InfraError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry infrastructure errors.

    Attributes:
        max_attempts: attempts in all, the first included (1 means never retry).
        base_delay: seconds; attempt ``n`` (from 1) waits up to ``base_delay * 2**(n-1)``.
        max_delay: cap on one backoff wait (a server's ``Retry-After`` may ask for more).
        deadline: seconds from the first attempt after which no new attempt starts; ``None``
            for no deadline.
    """

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    deadline: float | None = 300.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must not be negative")
        if self.deadline is not None and self.deadline <= 0:
            raise ValueError("deadline must be positive")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in ``[0, min(max_delay, base_delay * 2**(attempt-1))]``."""
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** max(0, attempt - 1))
        return rng.uniform(0.0, ceiling)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date.

    Returns ``None`` when the header is absent or unreadable; a date in the past gives 0.

    Example:
        >>> parse_retry_after("2")
        2.0
        >>> parse_retry_after("Wed, 21 Oct 2015 07:28:05 GMT",
        ...                   now=datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC))
        5.0
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN is unreadable
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    clock: Clock = SYSTEM_CLOCK,
    rng: random.Random | None = None,
) -> tuple[T, int]:
    """Run ``attempt`` until it succeeds or the policy gives up; return (result, attempts).

    Only ``InfraError`` is retried (and not ``circuit_open``); anything else propagates at once.
    The wait before attempt ``n + 1`` is the larger of the jittered backoff and the server's
    ``Retry-After``.
    """
    rand = rng or random.Random()
    start = clock.monotonic()
    number = 0
    while True:
        number += 1
        try:
            return await attempt(), number
        except InfraError as e:
            e.attempts = number
            if not e.retryable or number >= policy.max_attempts:
                raise
            delay = policy.backoff(number, rand)
            if e.retry_after is not None:
                delay = max(delay, e.retry_after)
            if policy.deadline is not None and clock.monotonic() + delay - start >= policy.deadline:
                raise
            await clock.sleep(delay)
