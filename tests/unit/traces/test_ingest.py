"""The ingest pipeline over a real SQLite store: spans stored before accept returns, traces
completed after root + grace with a record handed to the policy hook, late spans joined,
feedback (API and span events) joined, back-pressure, and a failing store refused whole."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import Feedback, Record, Span, SpanEvent, Trace, UserError
from evalsi.store import SqlStore, TraceStore
from evalsi.traces import Batch, Ingest, Overloaded, Redactor, normalize, parse_rules, prepare
from evalsi.traces._refs import SpanRef

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT, CHILD, LATE = "00f067aa0ba902b7", "00f067aa0ba902b8", "00f067aa0ba902b9"


def _spans() -> list[Span]:
    resource = {"service.name": "support-agent"}
    return [
        Span(
            TID,
            CHILD,
            ROOT,
            name="chat gpt-4o",
            start_time_unix_nano=2_000,
            end_time_unix_nano=3_000,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 3,
                "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text",'
                '"content":"mail bob@example.com"}]}]',
            },
            resource=resource,
        ),
        Span(
            TID,
            ROOT,
            name="invoke_agent support",
            start_time_unix_nano=1_000,
            end_time_unix_nano=4_000,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
            resource=resource,
        ),
    ]


@pytest.fixture
def traces(tmp_path: Path) -> Any:
    store = SqlStore.open(str(tmp_path / "e.db"))
    yield TraceStore(store, views=normalize)  # as the server builds it
    store.close()


def run(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """A test body run on its own event loop (fixtures pass through)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


class Hook:
    def __init__(self) -> None:
        self.traces: list[tuple[Trace, Record]] = []
        self.feedback: list[tuple[Trace, Feedback]] = []
        self.event = asyncio.Event()

    async def on_trace(self, trace: Trace, record: Record) -> None:
        self.traces.append((trace, record))
        self.event.set()

    async def on_feedback(self, trace: Trace, record: Record, fb: Feedback) -> None:
        self.feedback.append((trace, fb))
        self.event.set()


async def _wait(hook: Hook, n: int) -> None:
    async with asyncio.timeout(10):
        while len(hook.traces) < n:
            hook.event.clear()
            await hook.event.wait()


@run
async def test_spans_are_stored_redacted_and_the_trace_completes(traces: TraceStore) -> None:
    hook = Hook()
    rules = parse_rules([{"pattern": r"[\w.]+@[\w.]+", "replacement": "[EMAIL]"}])
    ingest = Ingest(traces, redactor=Redactor(rules), grace_s=0.05, on_trace=hook.on_trace)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())
        # stored before accept returned, redacted, mapped
        stored = traces.get_trace("default", TID)
        assert stored is not None
        assert len(stored.spans) == 2
        (llm,) = [s for s in stored.spans if s.span_id == CHILD]
        assert "bob@example.com" not in str(llm.attributes)
        assert llm.view is not None
        assert llm.view.type == "llm"
        assert llm.view.model == "gpt-4o"
        await _wait(hook, 1)
    finally:
        await ingest.stop()
    _trace, record = hook.traces[0]
    assert record.id == TID
    assert record.provenance is not None
    assert record.usage is not None
    assert (record.usage.input_tokens, record.usage.output_tokens) == (
        12,
        3,
    )
    assert [s.kind for s in record.trajectory.steps] == ["agent", "llm_call"]  # type: ignore[union-attr]
    (summary,), _ = traces.list_traces("default")
    assert (summary.trace_id, summary.service, summary.span_count) == (TID, "support-agent", 2)
    assert ingest.stats.spans == 2
    assert ingest.stats.traces == 1


@run
async def test_late_spans_join_the_stored_trace(traces: TraceStore) -> None:
    hook = Hook()
    ingest = Ingest(traces, grace_s=0.01, on_trace=hook.on_trace)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())
        await _wait(hook, 1)
        await ingest.accept("default", [Span(TID, LATE, ROOT, name="tool", end_time_unix_nano=5)])
    finally:
        await ingest.stop()
    assert ingest.stats.late_spans == 1
    assert len(hook.traces) == 1
    (summary,), _ = traces.list_traces("default")
    assert summary.span_count == 3


@run
async def test_feedback_joins_open_and_completed_traces(traces: TraceStore) -> None:
    hook = Hook()
    ingest = Ingest(traces, grace_s=0.2, on_trace=hook.on_trace, on_feedback=hook.on_feedback)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())
        # while open: attached to the trace that will be graded
        await ingest.feedback("default", Feedback(trace_id=TID, value=-1.0))
        await _wait(hook, 1)
        assert hook.traces[0][1].metadata["feedback_negative"] is True
        # once completed: handed to the policy hook with the stored trace
        event = SpanEvent("evalsi.feedback", 9, {"feedback.value": "up"})
        await ingest.accept("default", [Span(TID, LATE, ROOT, name="thumbs", events=[event])])
        # an exporter's retry sends the span again: its feedback is the same signal
        await ingest.accept("default", [Span(TID, LATE, ROOT, name="thumbs", events=[event])])
    finally:
        await ingest.stop()
    assert [(t.trace_id, f.value, f.source) for t, f in hook.feedback] == [(TID, 1.0, "span_event")]
    assert sorted(f.value for f in traces.feedback_for("default", trace_id=TID)) == [-1.0, 1.0]
    assert ingest.stats.feedback == 2


@run
async def test_over_the_pending_limit_a_request_is_refused_whole(
    traces: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real_write = traces.write_rows

    def slow_write(*args: Any, **kwargs: Any) -> None:
        release.wait(10)  # the store is busy with the first request
        real_write(*args, **kwargs)

    monkeypatch.setattr(traces, "write_rows", slow_write)
    ingest = Ingest(traces, max_pending_spans=1)
    await ingest.start()
    try:
        # alone, a request larger than the limit is let through (it waits for the store)
        first = asyncio.create_task(ingest.accept("default", _spans()))
        await asyncio.sleep(0.05)
        other = [Span("ab" * 16, "cd" * 8, name="x")]
        with pytest.raises(Overloaded):  # beside it, another is refused, whole
            await ingest.accept("default", other)
        release.set()
        await first
    finally:
        release.set()
        await ingest.stop()
    assert traces.get_trace("default", TID) is not None
    assert traces.get_trace("default", "ab" * 16) is None


@run
async def test_one_bad_request_does_not_fail_the_requests_grouped_with_it(
    traces: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit writes queued requests together; rows the store refuses fail only their
    own request (a 400: retrying cannot help), the others commit."""
    release = threading.Event()
    real_write = traces.write_rows

    def write(rows: Any, traces_of: Any = None) -> None:
        release.wait(10)
        if any("poison" in row for row in rows):  # the span's name is a column
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        real_write(rows, traces_of)

    monkeypatch.setattr(traces, "write_rows", write)
    ingest = Ingest(traces)
    await ingest.start()
    try:
        good = asyncio.create_task(ingest.accept("default", _spans()))
        bad = asyncio.create_task(
            ingest.accept("other", [Span("ef" * 16, "cd" * 8, name="poison")])
        )
        await asyncio.sleep(0.05)
        release.set()
        await good
        with pytest.raises(UserError, match="refused"):
            await bad
    finally:
        release.set()
        await ingest.stop()
    assert traces.get_trace("default", TID) is not None


@run
async def test_a_retried_request_is_assembled_once(traces: TraceStore) -> None:
    hook = Hook()
    ingest = Ingest(traces, grace_s=0.05, on_trace=hook.on_trace)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())
        await ingest.accept("default", _spans())  # the exporter resends after a timeout
        await _wait(hook, 1)
    finally:
        await ingest.stop()
    trace, record = hook.traces[0]
    assert len(trace.spans) == 2
    assert record.usage is not None
    assert record.usage.input_tokens == 12


@run
async def test_after_stop_requests_are_refused_not_left_hanging(traces: TraceStore) -> None:
    ingest = Ingest(traces)
    await ingest.start()
    await ingest.stop()
    with pytest.raises(Overloaded):
        await asyncio.wait_for(ingest.accept("default", _spans()), 5)


@run
async def test_a_failing_store_refuses_the_request_with_a_retryable_error(
    traces: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(spans: Any, summaries: Any = None) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(traces, "write_rows", broken)  # the writer thread's one entry point
    ingest = Ingest(traces)
    await ingest.start()
    try:
        with pytest.raises(Overloaded, match="could not take the spans"):
            await ingest.accept("default", _spans())
    finally:
        await ingest.stop()
    assert ingest.assembler.open_traces == 0  # nothing half-accepted


@run
async def test_stop_completes_open_traces(traces: TraceStore) -> None:
    hook = Hook()
    ingest = Ingest(traces, grace_s=3600, on_trace=hook.on_trace)
    await ingest.start()
    await ingest.accept("default", _spans())
    await ingest.stop()
    assert [t.trace_id for t, _ in hook.traces] == [TID]


@run
async def test_open_traces_hold_refs_and_policies_get_the_stored_trace_whole(
    traces: TraceStore,
) -> None:
    """After the spans are stored, an open trace holds compact refs only (no raw attributes,
    no content); the trace handed to the policies is read back from the store, whole."""
    hook = Hook()
    ingest = Ingest(traces, grace_s=3600, on_trace=hook.on_trace)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())
        held = ingest.assembler.get("default", TID)
        assert held is not None
        by_id = {s.span_id: s for s in held.spans}
        assert isinstance(by_id[CHILD], SpanRef)
        assert not hasattr(by_id[CHILD], "attributes")
        assert by_id[CHILD].type == "llm"
    finally:
        await ingest.stop()
    ((trace, record),) = hook.traces
    (root,) = [s for s in trace.spans if s.span_id == ROOT]
    assert root.attributes["gen_ai.agent.name"] == "support"
    (child,) = [s for s in trace.spans if s.span_id == CHILD]
    assert child.attributes["gen_ai.request.model"] == "gpt-4o"
    assert record.usage is not None
    assert record.usage.input_tokens == 12


@run
async def test_without_policies_completed_traces_are_not_read_back(traces: TraceStore) -> None:
    hook = Hook()
    asked: list[str] = []

    def wants(project: str) -> bool:
        asked.append(project)
        return False

    ingest = Ingest(traces, grace_s=0, on_trace=hook.on_trace, wants_traces=wants)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())
    finally:
        await ingest.stop()
    assert asked == ["default"]
    assert hook.traces == []
    (summary,), _ = traces.list_traces("default")
    assert summary.trace_id == TID
    assert summary.span_count == 2


@run
async def test_more_spans_than_the_bound_complete_the_oldest_trace_early(
    traces: TraceStore,
) -> None:
    hook = Hook()
    ingest = Ingest(traces, grace_s=3600, max_open_spans=3, on_trace=hook.on_trace)
    await ingest.start()
    try:
        await ingest.accept("default", _spans())  # 2 spans held
        other = "5" * 32
        await ingest.accept("default", [Span(other, "1" * 16), Span(other, "2" * 16, "1" * 16)])
        await _wait(hook, 1)  # 4 > 3: the oldest trace completes without waiting for grace
        assert [t.trace_id for t, _ in hook.traces] == [TID]
        assert ingest.assembler.held_spans == 2
    finally:
        await ingest.stop()
    summaries, _ = traces.list_traces("default")
    assert {s.trace_id for s in summaries} == {TID, other}


def _worker_like(traces: TraceStore, release: asyncio.Event) -> Callable[[], Any]:
    """What an ingest worker does for a request (prepare, store, hand back the refs), held
    until ``release`` is set."""

    async def store() -> Batch:
        await release.wait()
        batch = prepare("default", _spans(), Redactor(()))
        assert batch.rows is not None
        traces.write_rows(batch.rows)
        batch.rows = None
        return batch

    return store


@run
async def test_a_request_in_a_worker_is_assembled_even_when_ingest_stops_meanwhile(
    traces: TraceStore,
) -> None:
    hook = Hook()
    ingest = Ingest(traces, grace_s=3600, on_trace=hook.on_trace)
    await ingest.start()
    release = asyncio.Event()
    arrival = ingest.accept_stored("default", _worker_like(traces, release))
    stopping = asyncio.create_task(ingest.stop())
    await asyncio.sleep(0.05)
    assert not stopping.done()  # stop waits for the request in the worker
    with pytest.raises(Overloaded):  # while new requests are refused
        ingest.accept_stored("default", _worker_like(traces, release))
    release.set()
    batch = await arrival
    await stopping
    assert batch.spans == 2
    assert [t.trace_id for t, _ in hook.traces] == [TID]  # flushed at stop, graded
    (summary,), _ = traces.list_traces("default")
    assert summary.span_count == 2


@run
async def test_a_cancelled_request_in_a_worker_still_reaches_assembly(traces: TraceStore) -> None:
    """A sender that gives up (a gRPC deadline) does not undo a commit: the batch joins its
    trace, which is summarised and graded."""
    hook = Hook()
    ingest = Ingest(traces, grace_s=0.05, on_trace=hook.on_trace)
    await ingest.start()
    try:
        release = asyncio.Event()
        arrival = ingest.accept_stored("default", _worker_like(traces, release))
        request = asyncio.ensure_future(asyncio.shield(arrival))
        await asyncio.sleep(0.01)
        request.cancel()
        release.set()
        await _wait(hook, 1)
    finally:
        await ingest.stop()
    (summary,), _ = traces.list_traces("default")
    assert summary.trace_id == TID


@run
async def test_spans_the_row_encoder_refuses_are_a_user_error(traces: TraceStore) -> None:
    nested: Any = "leaf"
    for _ in range(300):  # past the JSON encoder's nesting limit
        nested = [nested]
    ingest = Ingest(traces)
    await ingest.start()
    try:
        with pytest.raises(UserError, match="refused these spans"):
            await ingest.accept("default", [Span(TID, ROOT, name="deep", attributes={"x": nested})])
        assert traces.get_trace("default", TID) is None
    finally:
        await ingest.stop()


@run
async def test_feedback_while_a_completed_trace_is_handed_over_waits_for_it(
    traces: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace is no longer open, and not yet with the policies (building it, from the
    rows held or read back, is slow): feedback waits for the hand-over, so the trace reaches
    each hook once."""
    hook = Hook()
    read, build = traces.get_trace, traces.trace_from_rows
    slow = threading.Event()

    def busy() -> None:
        if not slow.is_set():
            slow.set()
            import time

            time.sleep(0.3)  # a busy store

    def slow_read(project: str, trace_id: str) -> Trace | None:
        busy()
        return read(project, trace_id)

    def slow_build(*args: Any) -> Trace:
        busy()
        return build(*args)

    monkeypatch.setattr(traces, "get_trace", slow_read)
    monkeypatch.setattr(traces, "trace_from_rows", slow_build)
    ingest = Ingest(traces, grace_s=0.05, on_trace=hook.on_trace, on_feedback=hook.on_feedback)
    await ingest.start()
    assert await ingest.recovered() == 0  # nothing left open before: no read back for it
    try:
        await ingest.accept("default", _spans())
        while not slow.is_set():  # completed, its read-back under way
            await asyncio.sleep(0.005)
        assert ingest.assembler.get("default", TID) is None
        await ingest.feedback("default", Feedback(trace_id=TID, value=-1.0, time_unix_nano=1))
        assert len(hook.traces) == 1  # handed over before the feedback went on
    finally:
        await ingest.stop()
    assert [t.trace_id for t, _ in hook.traces] == [TID]
    assert [(t.trace_id, f.value) for t, f in hook.feedback] == [(TID, -1.0)]


@run
async def test_traces_a_crash_left_open_are_assembled_at_start(traces: TraceStore) -> None:
    """Spans stored and acknowledged, the server killed before the trace completed: the next
    server completes (and grades) it. A trace that has its row is not touched again."""
    traces.write_spans("default", _spans())  # what the killed server had stored
    done = Span("a" * 32, ROOT, name="done", start_time_unix_nano=1, end_time_unix_nano=2)
    traces.write_spans("team-b", [done])
    first = Ingest(traces, grace_s=0.05)
    await first.start()  # the done one: completed and its row written by this "first" server
    assert await first.recovered() == 2
    await first.stop()
    hook = Hook()
    orphan = Span("b" * 32, LATE, ROOT, name="no root", start_time_unix_nano=3_000)
    traces.write_spans("team-b", [orphan])  # stored, then the server died
    ingest = Ingest(traces, grace_s=0.05, orphan_s=0.1, on_trace=hook.on_trace)
    await ingest.start()
    try:
        await _wait(hook, 1)
        async with asyncio.timeout(10):
            while ingest.stats.traces < 1:
                await asyncio.sleep(0.01)
    finally:
        await ingest.stop()
    assert ingest.stats.recovered == 1  # only the trace without a row
    assert [t.trace_id for t, _ in hook.traces] == ["b" * 32]
    assert {r.trace_id for r in traces.list_traces("team-b")[0]} == {"a" * 32, "b" * 32}
    assert [r.trace_id for r in traces.list_traces("default")[0]] == [TID]


@run
async def test_every_completed_trace_is_marked_before_the_first_is_handed_over(
    traces: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Completed traces go to the policies a batch at a time; feedback on one of a later batch
    must still find it (open or finishing), never in between."""
    from evalsi.traces import _completion

    monkeypatch.setattr(_completion, "FINISH_BATCH", 1)
    ingest = Ingest(traces, grace_s=0.05)
    seen: list[bool] = []
    finish = ingest.completion._finish

    async def spy(batch: Any, handed: Any) -> None:
        for c in batch:
            key = (c.trace.project, c.trace.trace_id)
            seen.append(ingest.assembler.get(*key) is not None or ingest.completion.finishing(*key))
        await finish(batch, handed)

    monkeypatch.setattr(ingest.completion, "_finish", spy)
    await ingest.start()
    try:
        spans = [
            Span(f"{n:032x}", "1" * 16, name="t", start_time_unix_nano=1, end_time_unix_nano=2)
            for n in (1, 2, 3)
        ]
        await ingest.accept("default", spans)
        async with asyncio.timeout(10):
            while ingest.stats.traces < 3:
                await asyncio.sleep(0.01)
    finally:
        await ingest.stop()
    assert seen == [True, True, True]
    assert ingest.completion._finishing == {}


@run
async def test_a_late_span_after_a_restart_neither_regrades_nor_shrinks_its_trace(
    traces: TraceStore,
) -> None:
    first = Ingest(traces, grace_s=0.05)
    await first.start()
    await first.accept("default", _spans())
    await first.stop()  # completed: its row says 2 spans, root "invoke_agent support"
    hook = Hook()
    ingest = Ingest(traces, grace_s=0.05, orphan_s=0.1, on_trace=hook.on_trace)
    await ingest.start()  # a new server: it has not seen the trace
    try:
        await ingest.accept("default", [Span(TID, LATE, ROOT, name="late tool call")])
        async with asyncio.timeout(10):
            while ingest.stats.late_spans < 1:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
    finally:
        await ingest.stop()
    assert hook.traces == []  # graded by the server that completed it, not again
    (row,), _ = traces.list_traces("default")
    assert (row.span_count, row.root_name) == (3, "invoke_agent support")  # from all 3 spans


@run
async def test_feedback_on_a_trace_opened_again_after_a_restart_reaches_the_policies(
    traces: TraceStore,
) -> None:
    first = Ingest(traces, grace_s=0.05)
    await first.start()
    await first.accept("default", _spans())
    await first.stop()
    hook = Hook()
    ingest = Ingest(
        traces, grace_s=0.05, orphan_s=0.1, on_trace=hook.on_trace, on_feedback=hook.on_feedback
    )
    await ingest.start()
    try:
        thumbs = SpanEvent("evalsi.feedback", 5_000, {"feedback.value": "down"})
        late = Span(TID, LATE, ROOT, name="feedback", start_time_unix_nano=5_000, events=[thumbs])
        await ingest.accept("default", [late])  # the trace is open again (a new server)
        async with asyncio.timeout(10):
            while not hook.feedback:
                await asyncio.sleep(0.01)
    finally:
        await ingest.stop()
    assert hook.traces == []  # graded before the restart
    assert [(t.trace_id, f.value) for t, f in hook.feedback] == [(TID, -1.0)]


@run
async def test_a_late_span_while_its_trace_waits_for_hand_over_does_not_skip_grading(
    traces: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsi.traces import _completion

    monkeypatch.setattr(_completion, "MAX_HANDING", 1)  # stands for 64 busy hand-overs
    other = "a" * 32
    release = threading.Event()
    building: list[str] = []
    graded: list[str] = []
    read, build = traces.get_trace, traces.trace_from_rows

    def busy(trace_id: str) -> None:
        building.append(trace_id)
        if trace_id == other:
            release.wait(10)  # its hand-over busy (a slow store)

    def slow_read(project: str, trace_id: str) -> Trace | None:
        busy(trace_id)
        return read(project, trace_id)

    def slow_build(project: str, trace_id: str, *args: Any) -> Trace:
        busy(trace_id)
        return build(project, trace_id, *args)

    monkeypatch.setattr(traces, "get_trace", slow_read)
    monkeypatch.setattr(traces, "trace_from_rows", slow_build)

    async def on_trace(trace: Trace, record: Record) -> None:
        graded.append(trace.trace_id)

    ingest = Ingest(traces, grace_s=0.05, on_trace=on_trace)
    await ingest.start()
    try:
        await ingest.accept("default", [Span(other, ROOT, name="busy")])
        async with asyncio.timeout(10):
            while other not in building:
                await asyncio.sleep(0.01)
            await ingest.accept("default", _spans())  # completes, waits for a hand-over slot
            while not ingest.completion.finishing("default", TID):
                await asyncio.sleep(0.01)
            late = Span(TID, LATE, ROOT, name="late", start_time_unix_nano=4_500)
            await ingest.accept("default", [late])  # joins a trace not yet handed over
            await asyncio.sleep(0.1)
            release.set()
            while TID not in graded:
                await asyncio.sleep(0.01)
    finally:
        await ingest.stop()
    assert graded == [other, TID]
    assert ingest.stats.traces == 2
    (row,) = [r for r in traces.list_traces("default")[0] if r.trace_id == TID]
    assert row.span_count == 3
