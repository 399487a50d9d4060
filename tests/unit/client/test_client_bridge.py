"""``LoopThread``, the bridge ``evalsi.Client`` runs ``AsyncClient`` through: results and
errors unchanged, one item per step, Ctrl-C cancels, and no deadlock from a running loop or from
code the loop itself calls back."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from evalsi.client._bridge import LoopThread
from evalsi.core import NotFoundError


@pytest.fixture
def bridge() -> Iterator[LoopThread]:
    loop = LoopThread("test-bridge")
    yield loop
    loop.stop()


def _bridge_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("test-bridge")]


def test_results_and_errors_come_back_unchanged(bridge: LoopThread) -> None:
    async def answer() -> list[int]:
        return [1, 2]

    error = NotFoundError("run 'x' not found", hint="list them")

    async def fail() -> None:
        raise error

    assert bridge.run(answer()) == [1, 2]
    with pytest.raises(NotFoundError) as caught:
        bridge.run(fail())
    assert caught.value is error
    assert caught.value.hint == "list them"


def test_the_thread_starts_on_first_use_and_stop_ends_it(bridge: LoopThread) -> None:
    assert _bridge_threads() == []

    async def name() -> str:
        return threading.current_thread().name

    assert bridge.run(name()) == "test-bridge"
    assert len(_bridge_threads()) == 1
    bridge.stop()
    assert _bridge_threads() == []
    assert bridge.run(name()) == "test-bridge"  # used again after stop: a new loop


def test_iterate_pulls_one_item_per_step_and_closing_closes_the_source(
    bridge: LoopThread,
) -> None:
    made: list[int] = []
    closed = threading.Event()

    async def numbers() -> AsyncIterator[int | None]:
        try:
            for i in range(100):
                made.append(i)
                yield None if i == 1 else i  # a None item is an item, not the end
        finally:
            closed.set()

    source = numbers()  # held here, so only an explicit aclose (not GC) can close it
    items = bridge.iterate(source)
    assert next(items) == 0
    assert made == [0]
    assert next(items) is None
    assert next(items) == 2
    assert made == [0, 1, 2]
    items.close()  # a caller that stops early
    assert closed.wait(5)
    assert list(bridge.iterate(numbers())) == [0, None, *range(2, 100)]


def test_an_error_mid_iteration_propagates_unchanged(bridge: LoopThread) -> None:
    error = ValueError("page 2 is bad")

    async def pages() -> AsyncIterator[int]:
        yield 1
        raise error

    items = bridge.iterate(pages())
    assert next(items) == 1
    with pytest.raises(ValueError, match="page 2 is bad") as caught:
        next(items)
    assert caught.value is error


def _interrupt_main_when(started: threading.Event) -> None:
    """Ctrl-C, delivered to the main thread (this test's) once ``started`` is set."""
    main = threading.main_thread().ident
    assert main == threading.get_ident()
    assert main is not None

    def interrupt() -> None:
        started.wait(5)
        time.sleep(0.05)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()


def test_keyboard_interrupt_cancels_the_running_call(bridge: LoopThread) -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    _interrupt_main_when(started)
    with pytest.raises(KeyboardInterrupt):
        bridge.run(forever())
    assert cancelled.wait(5), "the coroutine was left running after Ctrl-C"


def test_keyboard_interrupt_mid_iteration_cancels_the_source(bridge: LoopThread) -> None:
    started, cleaned = threading.Event(), threading.Event()

    async def watch() -> AsyncIterator[int]:
        try:
            yield 1
            started.set()
            await asyncio.sleep(3600)
            yield 2
        finally:
            await asyncio.sleep(0)  # cleanup that awaits, as closing a stream does
            cleaned.set()

    items = bridge.iterate(watch())
    assert next(items) == 1
    _interrupt_main_when(started)
    with pytest.raises(KeyboardInterrupt):
        next(items)
    assert cleaned.wait(5)
    items.close()


def test_works_from_a_thread_that_runs_a_loop(bridge: LoopThread) -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    async def notebook_cell() -> list[int]:
        # Blocking calls made from inside a running loop, as in Jupyter.
        return [bridge.run(double(3)), *bridge.iterate(_count(3))]

    assert asyncio.run(notebook_cell()) == [6, 0, 1, 2]


def test_a_call_from_the_loop_itself_does_not_deadlock(bridge: LoopThread) -> None:
    async def inner() -> str:
        return "inner"

    async def outer() -> list[str]:
        # What a progress callback or a streamed input iterator does when it uses the client.
        return [bridge.run(inner()), *map(str, bridge.iterate(_count(2)))]

    assert bridge.run(outer()) == ["inner", "0", "1"]
    bridge.stop()
    assert _bridge_threads() == []  # the nested loop stopped too


def test_stop_ends_calls_in_flight_in_other_threads(bridge: LoopThread) -> None:
    outcome: list[Exception] = []
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.sleep(3600)

    def call() -> None:
        try:
            bridge.run(forever())
        except concurrent.futures.CancelledError as e:
            outcome.append(e)

    worker = threading.Thread(target=call)
    worker.start()
    assert started.wait(5)
    bridge.stop()
    worker.join(5)
    assert not worker.is_alive()
    assert len(outcome) == 1  # the waiting caller was told, not left hanging


async def _count(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i
