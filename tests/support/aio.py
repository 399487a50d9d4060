"""Helpers for async connector tests: run a coroutine on a fresh loop, and a fake clock."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Coroutine
from typing import Any, TypeVar

from evalsi.connectors import close_shared_session

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` that closes the loop's shared HTTP session before the loop ends."""

    async def main() -> T:
        try:
            return await coro
        finally:
            await close_shared_session()

    return asyncio.run(main())


class FakeClock:
    """Virtual time for rate limits, backoff and breakers.

    With ``auto=True`` every ``sleep`` moves time forward at once (right for one task at a
    time). With ``auto=False`` sleepers wait until ``advance`` moves time past their wake-up
    time, so concurrent tasks see one consistent timeline.
    """

    def __init__(self, start: float = 1000.0, *, auto: bool = True) -> None:
        self.now = start
        self.auto = auto
        self.sleeps: list[float] = []
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.auto or seconds <= 0:
            self.now += max(0.0, seconds)
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking sleepers in order (each runs before time moves on)."""
        target = self.now + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            when, _, future = heapq.heappop(self._sleepers)
            self.now = max(self.now, when)
            if not future.done():
                future.set_result(None)
            for _ in range(5):  # let the woken task (and what it starts) run
                await asyncio.sleep(0)
        self.now = target

    @property
    def pending(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())
