"""Central rate limits: token buckets for requests/min and tokens/min per (provider, model, key).

Buckets work by reservation: a caller takes what it needs at once (the balance may go negative)
and sleeps until the balance it left behind is paid back. Callers are served in arrival order,
nothing holds a lock across an ``await``, and nothing is bound to one event loop.

Tokens are not known before a call returns, so a call reserves an estimate and settles the
difference afterwards (``RateLimiter.settle``); over-use makes the next callers wait. A 429 with
``Retry-After`` pauses the whole limiter so every task on that key backs off together.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalsi.connectors._clock import SYSTEM_CLOCK, Clock


class TokenBucket:
    """``capacity`` tokens, refilled at ``rate`` tokens per second.

    Example:
        >>> bucket = TokenBucket(capacity=2, rate=1.0)
        >>> bucket.reserve(1, now=0.0), bucket.reserve(1, now=0.0), bucket.reserve(1, now=0.0)
        (0.0, 0.0, 1.0)
    """

    __slots__ = ("_last", "_tokens", "capacity", "rate")

    def __init__(self, capacity: float, rate: float) -> None:
        if capacity <= 0 or rate <= 0:
            raise ValueError("a token bucket needs a positive capacity and rate")
        self.capacity = float(capacity)
        self.rate = float(rate)
        self._tokens = float(capacity)
        self._last: float | None = None

    def _refill(self, now: float) -> None:
        if self._last is not None and now > self._last:
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
        if self._last is None or now > self._last:
            self._last = now

    def reserve(self, amount: float, *, now: float) -> float:
        """Take ``amount`` now; return the seconds to wait before using it."""
        self._refill(now)
        self._tokens -= amount
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def give_back(self, amount: float, *, now: float) -> None:
        """Return ``amount`` (a cancelled reservation or an over-estimate); may be negative."""
        self._refill(now)
        self._tokens = min(self.capacity, self._tokens + amount)

    def available(self, *, now: float) -> float:
        self._refill(now)
        return self._tokens


@dataclass(frozen=True, slots=True)
class RateLimits:
    """Per-minute limits; ``None`` means unlimited. ``burst`` caps requests in one instant
    (default: the per-minute figure / 60, at least 1, so a cold start does not spike)."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst: float | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute", "burst"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive")


class RateLimiter:
    """The buckets of one (provider, model, key) triple."""

    __slots__ = ("_clock", "_paused_until", "requests", "tokens")

    def __init__(self, limits: RateLimits, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._paused_until = 0.0
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        if limits.requests_per_minute is not None:
            rate = limits.requests_per_minute / 60.0
            burst = limits.burst if limits.burst is not None else max(1.0, rate)
            self.requests = TokenBucket(burst, rate)
        if limits.tokens_per_minute is not None:
            # A minute's worth of tokens may go at once: token budgets are per minute.
            self.tokens = TokenBucket(limits.tokens_per_minute, limits.tokens_per_minute / 60.0)

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request (and ``tokens`` estimated tokens) may go."""
        now = self._clock.monotonic()
        wait = max(0.0, self._paused_until - now)
        if self.requests is not None:
            wait = max(wait, self.requests.reserve(1, now=now))
        if self.tokens is not None and tokens:
            wait = max(wait, self.tokens.reserve(tokens, now=now))
        if wait <= 0:
            return
        try:
            await self._clock.sleep(wait)
        except BaseException:
            # Cancelled while waiting: the slot was never used, so the next caller may have it.
            later = self._clock.monotonic()
            if self.requests is not None:
                self.requests.give_back(1, now=later)
            if self.tokens is not None and tokens:
                self.tokens.give_back(tokens, now=later)
            raise

    def settle(self, estimated: int, actual: int | None) -> None:
        """Correct a token reservation once the real usage is known."""
        if self.tokens is None or actual is None or actual == estimated:
            return
        self.tokens.give_back(estimated - actual, now=self._clock.monotonic())

    def pause(self, seconds: float) -> None:
        """Hold every new request for ``seconds`` (a server said so)."""
        self._paused_until = max(self._paused_until, self._clock.monotonic() + seconds)
