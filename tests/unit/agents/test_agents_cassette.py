"""The cassette: a tape records calls in the order they start, replays them by (channel,
request) with no live call, branches after N calls, and a call the cassette lacks is an error
that names it, never a live call."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalsi.agents import CassetteMiss, Tape, exchange, taping
from evalsi.core import Cassette, Exchange, request_key


class Live:
    """A live service that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def answer(self, request: Any) -> Any:
        async def call() -> Any:
            self.calls.append(request)
            return {"echo": request, "n": len(self.calls)}

        return call


async def _play(tape: Tape | None, live: Live, requests: list[Any]) -> list[Any]:
    with taping(tape):
        return [await exchange("svc", r, live.answer(r)) for r in requests]


def test_a_recording_keeps_every_call_and_a_replay_makes_none() -> None:
    live = Live()
    tape = Tape()
    first = asyncio.run(_play(tape, live, ["a", {"b": 1}, "a"]))
    assert len(live.calls) == 3
    cassette = tape.cassette()
    assert [e.channel for e in cassette] == ["svc"] * 3
    assert cassette.exchanges[1].request == request_key({"b": 1})

    again = Live()
    replay = Tape(cassette)
    assert asyncio.run(_play(replay, again, ["a", {"b": 1}, "a"])) == first
    assert again.calls == []  # not one live call
    assert replay.live_calls == 0
    assert replay.cassette() == cassette  # a replay records what it served


def test_repeated_requests_are_served_in_the_order_they_were_recorded() -> None:
    tape = Tape()
    recorded = asyncio.run(_play(tape, Live(), ["same", "same", "same"]))
    assert [r["n"] for r in recorded] == [1, 2, 3]
    replayed = asyncio.run(_play(Tape(tape.cassette()), Live(), ["same", "same", "same"]))
    assert replayed == recorded


def test_a_call_the_cassette_lacks_is_an_error_naming_it_never_a_live_call() -> None:
    tape = Tape()
    asyncio.run(_play(tape, Live(), ["a", "b"]))
    live = Live()
    with pytest.raises(CassetteMiss) as missed:
        asyncio.run(_play(Tape(tape.cassette()), live, ["a", "changed"]))
    assert live.calls == []
    message = str(missed.value)
    assert "call 2 (svc) is not in the cassette" in message
    assert "the recorded call 2 was svc with another request" in message
    assert "Nothing was called live" in message
    assert missed.value.kind == "cassette"
    assert not missed.value.retryable

    with pytest.raises(CassetteMiss, match="the recorded task made only 2 calls"):
        asyncio.run(_play(Tape(tape.cassette()), Live(), ["a", "b", "c"]))


def test_an_empty_cassette_replays_nothing() -> None:
    with pytest.raises(CassetteMiss, match="made only 0 calls"):
        asyncio.run(_play(Tape(Cassette()), Live(), ["a"]))
    assert asyncio.run(_play(Tape(Cassette()), Live(), [])) == []


@pytest.mark.parametrize("branch", [0, 1, 2, 3, 5])
def test_a_branch_replays_the_first_n_calls_and_makes_the_rest_live(branch: int) -> None:
    tape = Tape()
    recorded = asyncio.run(_play(tape, Live(), ["a", "b", "c"]))
    live = Live()
    branched = Tape(tape.cassette(), live_after=branch)
    out = asyncio.run(_play(branched, live, ["a", "b", "c"]))
    replayed = min(branch, 3)
    assert out[:replayed] == recorded[:replayed]
    assert live.calls == ["a", "b", "c"][replayed:]
    assert branched.live_calls == 3 - replayed
    assert len(branched.cassette()) == 3  # the new run's cassette holds both parts


def test_a_branch_past_a_changed_call_still_refuses_it_before_the_branch_point() -> None:
    tape = Tape()
    asyncio.run(_play(tape, Live(), ["a", "b"]))
    with pytest.raises(CassetteMiss):
        asyncio.run(_play(Tape(tape.cassette(), live_after=2), Live(), ["a", "other"]))


def test_a_negative_branch_point_is_refused() -> None:
    with pytest.raises(ValueError, match="live_after"):
        Tape(Cassette(), live_after=-1)


def test_parallel_calls_are_numbered_as_they_start_and_matched_however_they_finish() -> None:
    async def slow(delay: float, value: str) -> Any:
        await asyncio.sleep(delay)
        return value

    async def turn(tape: Tape, delays: dict[str, float]) -> list[Any]:
        with taping(tape):
            return list(
                await asyncio.gather(
                    *(exchange("tool", name, lambda n=name: slow(delays[n], n)) for name in "xyz")
                )
            )

    tape = Tape()
    assert asyncio.run(turn(tape, {"x": 0.03, "y": 0.0, "z": 0.01})) == ["x", "y", "z"]
    assert [e.value() for e in tape.cassette()] == ["x", "y", "z"]  # start order, not finish
    replay = Tape(tape.cassette())
    assert asyncio.run(turn(replay, {"x": 0.0, "y": 0.02, "z": 0.0})) == ["x", "y", "z"]


def test_without_a_tape_exchange_just_calls_live() -> None:
    live = Live()
    assert asyncio.run(_play(None, live, ["a"])) == [{"echo": "a", "n": 1}]
    assert live.calls == ["a"]


def test_a_stored_cassette_is_an_index_and_content_addressed_blobs() -> None:
    tape = Tape()
    asyncio.run(_play(tape, Live(), ["a", "a"]))
    same = Exchange("tool:t", request_key(1), b'"ok"')
    cassette = Cassette((*tape.cassette().exchanges, same, same))
    index = cassette.index()
    blobs = cassette.blobs()
    assert len(blobs) == 3  # the repeated response is kept once
    assert set(Cassette.keys_of(index)) == set(blobs)
    read = Cassette.from_index(index, blobs)
    assert read.exchanges == cassette.exchanges
    assert read.stored  # read from the store: its answers need not be written again
    with pytest.raises(ValueError, match="is not stored"):
        Cassette.from_index(index, {})
    with pytest.raises(ValueError, match="format"):
        Cassette.from_index(orjson.dumps({"v": 99, "x": []}), blobs)


@given(
    st.lists(
        st.recursive(
            st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=5),
            st.lists,
            max_leaves=5,
        )
    )
)
def test_any_recording_replays_to_the_same_answers(requests: list[Any]) -> None:
    tape = Tape()
    recorded = asyncio.run(_play(tape, Live(), requests))
    assert asyncio.run(_play(Tape(tape.cassette()), Live(), requests)) == recorded
