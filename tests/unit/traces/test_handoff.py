"""The Watch path in one pass: completed traces handed to the policies as values through a
bounded ``TraceHandoff``, built from the span rows assembly held when they fit its bounds and
read back from the store otherwise, graded the same either way.

Kill/restart is covered in ``test_ingest.py``
(``test_traces_a_crash_left_open_are_assembled_at_start``: a trace a stopped server left open
is assembled again and graded); here, such a trace is read back whole even when its other
spans arrive live."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalsi.core import EvaluationResult, Feedback, HandedTrace, Span, TraceHandoff
from evalsi.policies import PolicyEngine
from evalsi.store import SqlStore, TraceStore, row_bytes
from evalsi.traces import Batch, Ingest, Redactor, normalize, prepare
from evalsi.traces._records import trace_to_record
from tests.support.registry import BUILTINS

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT, CHILD, TOOL = "00f067aa0ba902b7", "00f067aa0ba902b8", "00f067aa0ba902b9"
POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: p, labels: {evals.si/project: default}}
spec:
  cascade:
    - {ref: loop-detection}
    - {ref: step-efficiency}
    - {ref: tokens}
    - {ref: latency}
    - {ref: contains, params: {values: [refund]}}
"""


def _spans(trace_id: str = TID) -> list[Span]:
    resource = {"service.name": "support-agent"}
    return [
        Span(
            trace_id,
            CHILD,
            ROOT,
            name="chat gpt-4o",
            start_time_unix_nano=2_000_000,
            end_time_unix_nano=3_000_000,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 3,
                "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text",'
                '"content":"where is my refund?"}]}]',
                "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text",'
                '"content":"your refund is on its way"}]}]',
                "blob": b"\x00\x01raw",  # bytes round-trip through the row codec
            },
            resource=resource,
        ),
        Span(
            trace_id,
            TOOL,
            ROOT,
            name="execute_tool lookup",
            start_time_unix_nano=3_100_000,
            end_time_unix_nano=3_500_000,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
            resource=resource,
        ),
        Span(
            trace_id,
            ROOT,
            name="invoke_agent support",
            start_time_unix_nano=1_000_000,
            end_time_unix_nano=4_000_000,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
            resource=resource,
        ),
    ]


@pytest.fixture
def traces(tmp_path: Path) -> Any:
    store = SqlStore.open(str(tmp_path / "evalsi.db"))
    yield TraceStore(store, views=normalize)
    store.close()


def run(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


async def _handed(traces: TraceStore, **options: Any) -> tuple[HandedTrace, Ingest]:
    """One trace through ingest (feedback sent while it is open), as handed over."""
    handoff = TraceHandoff()
    ingest = Ingest(traces, grace_s=3600, handoff=handoff, **options)
    await ingest.start()
    try:
        await ingest.recovered()
        await ingest.accept("default", _spans())
        await ingest.feedback("default", Feedback(trace_id=TID, value=-1.0, time_unix_nano=5))
    finally:
        await ingest.stop()  # completes the open trace and hands it over
    assert handoff.qsize() == 1
    return await handoff.get(), ingest


def _results(calls: list[Sequence[EvaluationResult]]) -> list[list[Any]]:
    return [
        [(r.evaluator, r.outcome, [(s.name, s.value) for s in r.scores]) for r in results]
        for results in calls
    ]


async def _scores(item: HandedTrace) -> list[Any]:
    """What the policy engine scores for this hand-over."""
    calls: list[Sequence[EvaluationResult]] = []
    engine = PolicyEngine(on_scores=lambda **kw: calls.append(kw["results"]), registry=BUILTINS)
    await engine.apply(engine.load(yaml.safe_load(POLICY)))
    await engine.on_trace(item.trace, item.record)
    await engine.close()
    (results,) = _results(calls)
    return results


@run
async def test_a_trace_graded_from_memory_scores_as_one_read_back(traces: TraceStore) -> None:
    item, ingest = await _handed(traces)
    assert item.from_memory
    assert (ingest.stats.from_memory, ingest.stats.read_back) == (1, 0)
    assert ingest.held.bytes == 0
    assert ingest.held.traces == 0
    stored = traces.get_trace("default", TID)
    assert stored is not None
    assert item.trace == stored  # spans, views, feedback: what the store reads back
    assert [f.value for f in item.trace.feedback] == [-1.0]
    assert item.record == trace_to_record(stored)
    from_memory = await _scores(item)
    assert from_memory == await _scores(HandedTrace(stored, trace_to_record(stored)))
    assert all(outcome.name == "SCORED" for _, outcome, _ in from_memory)


@run
async def test_a_trace_over_the_memory_bound_is_read_back_and_graded_the_same(
    traces: TraceStore, tmp_path: Path
) -> None:
    item, ingest = await _handed(traces, max_held_bytes=1_000)  # under one span's row
    assert not item.from_memory
    assert (ingest.stats.from_memory, ingest.stats.read_back) == (0, 1)
    assert ingest.held.spilled == 1
    assert ingest.held.bytes == 0
    store = SqlStore.open(str(tmp_path / "other.db"))
    try:
        in_memory, _ = await _handed(TraceStore(store, views=normalize))
    finally:
        store.close()
    assert in_memory.from_memory
    assert item.trace == in_memory.trace
    assert await _scores(item) == await _scores(in_memory)


def test_held_rows_are_bounded_per_trace_and_in_all() -> None:
    from evalsi.traces._held import HeldSpans

    rows = prepare("p", _spans("a" * 32) + _spans("b" * 32), Redactor(())).rows
    assert rows is not None
    trace = sum(row_bytes(r) for r in rows[:3])
    held = HeldSpans(max_bytes=trace + 10, max_trace_bytes=trace)
    held.hold("p", rows[:3], ["a" * 32])  # one trace's three rows fit
    assert (held.traces, held.bytes) == (1, trace)
    held.hold("p", rows[:1], ["a" * 32])  # re-sent: replaces, not added
    assert held.take("p", "a" * 32) is not None
    assert held.bytes == 0
    held.hold("p", rows, ["a" * 32, "b" * 32])  # both traces: past the total, "b" spills
    assert held.spilled == 1
    assert held.take("p", "b" * 32) is None  # read back
    assert held.take("p", "a" * 32) is not None
    held.hold("p", rows, [])  # rows of traces not being assembled (late ones): not held
    assert (held.traces, held.bytes) == (0, 0)


@run
async def test_the_hand_over_is_bounded_and_counts_what_it_drops(traces: TraceStore) -> None:
    """Nobody consuming: the queue takes ``maxsize`` traces, the rest are dropped and
    counted; their spans and rows are stored all the same."""
    handoff = TraceHandoff(maxsize=2)
    ingest = Ingest(traces, grace_s=3600, handoff=handoff)
    await ingest.start()
    try:
        for n in range(5):
            await ingest.accept("default", _spans(f"{n:032x}"))
    finally:
        await ingest.stop()
    assert (handoff.qsize(), handoff.offered, handoff.dropped) == (2, 5, 3)
    assert len(traces.list_traces("default")[0]) == 5
    assert ingest.held.bytes == 0  # dropped traces do not keep their rows
    with pytest.raises(ValueError, match="at least one"):
        TraceHandoff(maxsize=0)


@run
async def test_the_engine_consumer_waits_for_room_so_the_inbox_overflows() -> None:
    """The engine takes from its inbox only while fewer than ``max_pending`` traces are
    being graded: beyond that the inbox fills, and its offers fail (counted in ``dropped``)."""
    engine = PolicyEngine(max_pending=1, inbox_size=1, registry=BUILTINS)
    release = asyncio.Event()
    graded: list[str] = []

    async def on_trace(trace: Any, record: Any) -> None:
        graded.append(trace.trace_id)
        await release.wait()

    engine.on_trace = on_trace  # type: ignore[method-assign]
    engine.start()
    items = [HandedTrace(_trace(n), trace_to_record(_trace(n))) for n in range(4)]
    assert engine.inbox.offer(items[0])
    async with asyncio.timeout(10):
        while not graded:  # taken and being graded
            await asyncio.sleep(0.01)
    assert engine.inbox.offer(items[1])  # taken, waiting for room
    await asyncio.sleep(0.05)
    assert engine.inbox.offer(items[2])  # waits in the inbox
    assert not engine.inbox.offer(items[3])  # the inbox is full
    assert engine.dropped == 1
    release.set()
    await engine.close()
    assert graded == [items[n].trace.trace_id for n in range(3)]


def _trace(n: int) -> Any:
    from evalsi.core import Trace

    return Trace(f"{n:032x}", project="default", spans=_spans(f"{n:032x}"))


@run
async def test_a_worker_sends_rows_back_only_for_projects_the_policies_want(
    traces: TraceStore,
) -> None:
    handoff = TraceHandoff(wants=lambda project: project == "default")
    ingest = Ingest(traces, grace_s=3600, handoff=handoff)
    assert ingest.keeps_rows("default")
    assert not ingest.keeps_rows("other")
    assert not Ingest(traces).keeps_rows("default")  # no hand-over: nothing kept

    async def worker() -> Batch:  # what ``_ingest_pool._work`` does with ``keep_rows``
        batch = prepare("default", _spans(), Redactor(()))
        assert batch.rows is not None
        traces.write_rows(batch.rows)
        batch.kept, batch.rows = batch.rows, None
        return batch

    await ingest.start()
    try:
        await ingest.accept_stored("default", worker)
    finally:
        await ingest.stop()
    item = await handoff.get()
    assert item.from_memory
    assert item.trace == traces.get_trace("default", TID)


@run
async def test_a_recovered_trace_is_read_back_whole_when_its_other_spans_arrive_live(
    traces: TraceStore,
) -> None:
    """A stopped server stored the root (no trace row); the rest comes to the new server. The
    rows it holds are not the whole trace: it is read back, all three spans."""
    root = [s for s in _spans() if s.span_id == ROOT]
    traces.write_spans("default", root)
    handoff = TraceHandoff()
    ingest = Ingest(traces, grace_s=3600, handoff=handoff)
    await ingest.start()
    try:
        assert await ingest.recovered() == 1
        await ingest.accept("default", [s for s in _spans() if s.span_id != ROOT])
    finally:
        await ingest.stop()
    item = await handoff.get()
    assert not item.from_memory
    assert ingest.stats.read_back == 1
    assert {s.span_id for s in item.trace.spans} == {ROOT, CHILD, TOOL}


@run
async def test_span_events_sent_apart_make_the_trace_read_back(traces: TraceStore) -> None:
    from evalsi.core import SpanEvent
    from evalsi.traces import LoggedEvent

    handoff = TraceHandoff()
    ingest = Ingest(traces, grace_s=3600, handoff=handoff)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())
        event = SpanEvent("gen_ai.choice", 3_000_000, {"index": 0})
        await ingest.accept_events("default", [LoggedEvent(TID, CHILD, event)])
    finally:
        await ingest.stop()
    item = await handoff.get()
    assert not item.from_memory  # the rows held never saw the event
    (child,) = [s for s in item.trace.spans if s.span_id == CHILD]
    assert [e.name for e in child.events] == ["gen_ai.choice"]


@run
async def test_a_live_trace_recovery_finds_stored_is_still_graded_from_memory(
    traces: TraceStore,
) -> None:
    """Recovery at start runs beside live ingest: a trace whose every stored span this
    server holds (it received them) keeps its rows."""
    handoff = TraceHandoff()
    ingest = Ingest(traces, grace_s=3600, handoff=handoff)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())
        await ingest.recovered()
    finally:
        await ingest.stop()
    assert (await handoff.get()).from_memory
