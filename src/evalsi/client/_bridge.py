"""Blocking code driving coroutines and async iterators on a private event loop.

The loop runs in a daemon thread of its own, started on first use, so a blocking caller works
whether or not its thread already runs a loop (a script, or a Jupyter cell).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An asyncio loop in a daemon thread: ``run`` a coroutine, ``iterate`` an async iterator."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._nested: LoopThread | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result, or its exception unchanged. An exception raised while
        waiting (Ctrl-C's ``KeyboardInterrupt``) cancels the coroutine before propagating."""
        if threading.current_thread() is self._thread:
            # Called from the loop itself (a progress callback, a streamed input iterator):
            # blocking it would deadlock, so the call gets a loop of its own.
            return self._nested_loop().run(coro)
        future = asyncio.run_coroutine_threadsafe(coro, self._started())
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def iterate(self, items: AsyncIterator[T]) -> Generator[T, None, None]:
        """``items`` as a blocking iterator, one item per step; closing it closes ``items``."""
        try:
            while step := self.run(_next(items)):
                yield step[0]
        except GeneratorExit:
            # Stopped early while ``items`` waits at a yield. (After an error, or Ctrl-C
            # cancelling the step, ``items`` has already ended on its own.)
            if self._loop is not None:
                self.run(_aclose(items))
            raise

    def stop(self) -> None:
        """Cancel what still runs, close the loop and end its thread (``run`` starts anew)."""
        with self._lock:
            loop, thread, nested = self._loop, self._thread, self._nested
            self._loop = self._thread = self._nested = None
        if nested is not None:
            nested.stop()
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=_serve, args=(self._loop,), name=self._name, daemon=True
                )
                self._thread.start()
            return self._loop

    def _nested_loop(self) -> LoopThread:
        with self._lock:
            if self._nested is None:
                self._nested = LoopThread(f"{self._name}-nested")
            return self._nested


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        # Calls still in flight when the loop stops (another thread's) end cancelled, not hung.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def _next(items: AsyncIterator[T]) -> tuple[T] | None:
    """The next item in a 1-tuple (an item may be falsy or None), None at the end."""
    async for item in items:
        return (item,)
    return None


async def _aclose(items: AsyncIterator[Any]) -> None:
    aclose = getattr(items, "aclose", None)
    if aclose is not None:
        await aclose()
