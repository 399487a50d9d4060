"""Recording and replaying a task's exchanges with the world (``core.Cassette``).

Every call an agent run makes out of evalsi's process — the built-in loop's model calls, the
environment's tool calls, a connector's requests to the agent it drives — goes through
``exchange(channel, request, live)``. With no tape bound it just calls ``live()``. Within a task
the target binds a ``Tape``:

- **record** (no source): ``live()`` runs and its answer is kept;
- **replay** (a source cassette): the answer is the recorded one for the same channel and
  request; a call the cassette lacks raises ``CassetteMiss`` — never a silent live call;
- **branch** (a source and ``live_after=N``): the first N calls are replayed (and must be in the
  cassette), every later one is live: counterfactual evaluation from step N.

Calls are numbered when they start, so parallel tool calls of one turn keep the order the agent
asked for them in; a replayed call is matched by (channel, request), so the order in which
parallel calls finish does not matter. The tape records what it served in every mode: a replay
run stores a cassette of its own.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson

from evalsi.connectors import InfraError
from evalsi.core import Cassette, Exchange, JsonValue, request_key

_current: contextvars.ContextVar[Tape | None] = contextvars.ContextVar(
    "evalsi_task_tape", default=None
)


class CassetteMiss(InfraError):
    """A replay needed a call its cassette does not hold."""

    def __init__(self, message: str) -> None:
        super().__init__("cassette", message)


class Tape:
    """One task's cassette being recorded, replayed, or replayed up to a branch point."""

    def __init__(self, source: Cassette | None = None, *, live_after: int | None = None) -> None:
        if live_after is not None and live_after < 0:
            raise ValueError("live_after must be >= 0")
        self.source = source
        self.live_after = live_after
        self.calls = 0  # calls started so far
        self.live_calls = 0
        self._slots: list[Exchange | None] = []
        self._recorded: dict[tuple[str, str], deque[Exchange]] = defaultdict(deque)
        for e in source or ():
            self._recorded[(e.channel, e.request)].append(e)

    @property
    def replaying(self) -> bool:
        """Whether the next call is served from the source cassette."""
        if self.source is None:
            return False
        return self.live_after is None or self.calls < self.live_after

    def cassette(self) -> Cassette:
        """What this task exchanged, in the order the calls started (finished calls only);
        ``stored`` when every answer came from a stored source (nothing new to write)."""
        exchanges = tuple(e for e in self._slots if e is not None)
        stored = self.source is not None and self.source.stored and self.live_calls == 0
        return Cassette(exchanges, stored=stored)

    async def exchange(
        self,
        channel: str,
        request: JsonValue,
        live: Callable[[], Awaitable[JsonValue]],
        key: str | None = None,
    ) -> JsonValue:
        key = key or request_key(request)
        replay = self.replaying
        self.calls += 1
        number = self.calls
        slot = len(self._slots)
        self._slots.append(None)
        if replay:
            found = self._recorded.get((channel, key))
            if not found:
                raise CassetteMiss(self._miss(number, channel))
            exchange = found.popleft()
            self._slots[slot] = exchange
            return exchange.value()
        self.live_calls += 1
        value = await live()
        body = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
        self._slots[slot] = Exchange(channel, key, body)
        return value

    def _miss(self, number: int, channel: str) -> str:
        assert self.source is not None
        recorded = self.source.exchanges
        if number > len(recorded):
            had = f"the recorded task made only {len(recorded)} calls"
        else:
            e = recorded[number - 1]
            had = (
                f"the recorded call {number} was {e.channel} with another request"
                if e.channel == channel
                else f"the recorded call {number} was {e.channel}"
            )
        return (
            f"replay: call {number} ({channel}) is not in the cassette ({had}); "
            "the agent, its model or its tools changed since the recording. "
            "Nothing was called live"
        )


@contextlib.contextmanager
def taping(tape: Tape | None) -> Iterator[None]:
    """Bind ``tape`` to the calls made inside (and the asyncio tasks they start)."""
    token = _current.set(tape)
    try:
        yield
    finally:
        _current.reset(token)


async def exchange(
    channel: str, request: JsonValue, live: Callable[[], Awaitable[Any]], *, key: str = ""
) -> Any:
    """``live()``'s answer, recorded on the current task's tape, or replayed from it.

    ``request`` is what identifies the call (JSON); ``live`` returns the answer as JSON. A
    connector routes each call it makes to its agent through here, so its runs can be replayed.
    ``key`` may stand for ``request``: a caller keeping a running hash of a growing request (a
    conversation) passes it rather than have the whole request hashed again every turn.
    """
    tape = _current.get()
    if tape is None:
        return await live()
    return await tape.exchange(channel, request, live, key or None)


def taped() -> bool:
    """Whether calls made here go through a tape (else ``exchange`` just calls live)."""
    return _current.get() is not None
