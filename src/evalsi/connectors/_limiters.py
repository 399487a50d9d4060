"""The rate limiters of a process or a run, by (provider, model, key): local token buckets
(``_ratelimit``), or limits held across a cluster run's workers (``_shared_rate``)."""

from __future__ import annotations

from typing import Protocol

from evalsi.connectors._clock import SYSTEM_CLOCK, Clock
from evalsi.connectors._ratelimit import RateLimiter, RateLimits
from evalsi.connectors._shared_rate import RateWindows, SharedRateLimiter

RateKey = tuple[str, str, str]
"""(provider, model, key id); the key id is a secret's reference, never its value."""


class Limiter(Protocol):
    """What a call passes before it goes (``RateLimiter``, or a ``SharedRateLimiter``)."""

    async def acquire(self, tokens: int = 0) -> None: ...

    def settle(self, estimated: int, actual: int | None) -> None: ...

    def pause(self, seconds: float) -> None: ...


class RateLimiterRegistry:
    """All limiters of a process (or a run), so every task on the same key shares them.

    With ``windows`` (a cluster run's workers) each limit is held across processes in those
    shared windows, under keys scoped by ``scope`` (the run), instead of in local buckets.
    """

    __slots__ = ("_clock", "_limiters", "scope", "windows")

    def __init__(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        windows: RateWindows | None = None,
        scope: str = "",
    ) -> None:
        self._clock = clock
        self._limiters: dict[RateKey, tuple[RateLimits, Limiter]] = {}
        self.windows = windows
        self.scope = scope

    def get(self, key: RateKey, limits: RateLimits | None) -> Limiter | None:
        """The limiter for ``key``; ``None`` when there are no limits. Limits given later for
        the same key replace earlier ones."""
        if limits is None or (
            limits.requests_per_minute is None and limits.tokens_per_minute is None
        ):
            return None
        found = self._limiters.get(key)
        if found is not None and found[0] == limits:
            return found[1]
        limiter: Limiter
        if self.windows is not None:
            shared_key = "|".join((self.scope, *key))  # the key id is a reference, never a secret
            limiter = SharedRateLimiter(limits, self.windows, shared_key, clock=self._clock)
        else:
            limiter = RateLimiter(limits, clock=self._clock)
        self._limiters[key] = (limits, limiter)
        return limiter


__all__ = ["Limiter", "RateKey", "RateLimiterRegistry"]
