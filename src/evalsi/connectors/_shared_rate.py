"""Rate limits held across processes: the workers of a cluster run share one limit per key.

A process-local token bucket (``_ratelimit``) cannot see the other workers' calls. Here the
limit is a series of fixed windows kept in a shared store (``RateWindows``; the cluster's is
PostgreSQL): a call takes one request (and its token estimate) from the current window with an
atomic conditional upsert, or waits for the next window. A window lasts long enough to hold
about ten requests (one minute at most), so a per-minute limit is met with little rounding and
never more than one window's worth goes at once. Fixed windows allow up to twice a window's
cap across a boundary: within the per-minute figure over any whole minute of windows.

Tokens are known after the call: the difference from the estimate is settled on the current
window (over-use makes later callers wait). A 429's ``Retry-After`` pauses this process only.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from evalsi.connectors._clock import SYSTEM_CLOCK, Clock
from evalsi.connectors._ratelimit import RateLimits

WINDOW_REQUESTS = 10
"""Requests a window holds when the limit allows it (a window lasts 1-60 s)."""
PRUNE_EVERY = 64
"""Windows a limiter moves through before deleting the old ones of its key."""


class RateWindows(Protocol):
    """A store of windows the processes share (blocking calls: the limiter runs them in a
    thread)."""

    def take(
        self,
        key: str,
        slot: int,
        *,
        requests: float,
        tokens: float,
        request_cap: float | None,
        token_cap: float | None,
    ) -> bool:
        """Add to window ``slot`` of ``key`` if it stays within the caps (its first taker
        always fits); whether it did."""
        ...

    def settle(self, key: str, slot: int, tokens: float) -> None: ...

    def prune(self, key: str, before_slot: int) -> None: ...


class SharedRateLimiter:
    """One key's limit over shared windows (the interface of ``RateLimiter``)."""

    def __init__(
        self, limits: RateLimits, windows: RateWindows, key: str, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        self.window_s = _window_s(rpm)
        self.request_cap = rpm * self.window_s / 60.0 if rpm is not None else None
        self.token_cap = tpm * self.window_s / 60.0 if tpm is not None else None
        self.windows = windows
        self.key = key
        self._clock = clock
        self._paused_until = 0.0
        self._pruned = 0
        self._settling: set[asyncio.Future[None]] = set()

    def _slot(self) -> int:
        return int(time.time() // self.window_s)

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request (and ``tokens`` estimated tokens) fits a window."""
        requests = 1.0 if self.request_cap is not None else 0.0
        estimate = float(tokens) if self.token_cap is not None else 0.0
        while True:
            paused = self._paused_until - self._clock.monotonic()
            if paused > 0:
                await self._clock.sleep(paused)
            slot = self._slot()
            taken = await asyncio.to_thread(
                self.windows.take,
                self.key,
                slot,
                requests=requests,
                tokens=estimate,
                request_cap=self.request_cap,
                token_cap=self.token_cap,
            )
            if taken:
                await self._prune(slot)
                return
            # this window is full: the next one (the shared clock is wall time)
            await self._clock.sleep(max(0.001, (slot + 1) * self.window_s - time.time()))

    async def _prune(self, slot: int) -> None:
        if slot - self._pruned >= PRUNE_EVERY:
            self._pruned = slot
            await asyncio.to_thread(self.windows.prune, self.key, slot - PRUNE_EVERY)

    def settle(self, estimated: int, actual: int | None) -> None:
        """Correct the token estimate once the real usage is known (in the background)."""
        if self.token_cap is None or actual is None or actual == estimated:
            return
        slot, delta = self._slot(), float(actual - estimated)
        done = asyncio.get_running_loop().run_in_executor(
            None, self.windows.settle, self.key, slot, delta
        )
        self._settling.add(done)
        done.add_done_callback(self._settled)

    def _settled(self, done: asyncio.Future[None]) -> None:
        self._settling.discard(done)
        if not done.cancelled():
            done.exception()  # a lost correction only makes the limit looser for a window

    def pause(self, seconds: float) -> None:
        """Hold this process's new requests for ``seconds`` (a server said so)."""
        self._paused_until = max(self._paused_until, self._clock.monotonic() + seconds)


def _window_s(requests_per_minute: float | None) -> float:
    """Seconds a window lasts: long enough for ``WINDOW_REQUESTS`` (1 s without a request
    limit, 60 s at most)."""
    if requests_per_minute is None:
        return 1.0
    return min(60.0, max(1.0, WINDOW_REQUESTS * 60.0 / requests_per_minute))


__all__ = ["RateWindows", "SharedRateLimiter"]
