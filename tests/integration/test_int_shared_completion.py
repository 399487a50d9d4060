"""``SharedCompletion`` on a real PostgreSQL (decision 0019): the lease holder completes each
stored trace once, whole, with its row; a trace that has its row (late spans) is given its row
again and not graded; nothing is graded before its grace has passed; a stopped completer
gives the lease up."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pytest

from evalsi.core import Record, Span, Trace
from evalsi.store import (
    SqlStore,
    TraceStore,
    TraceSummary,
    claim_counts,
    lease_holder,
)
from evalsi.traces import SharedCompletion, normalize


@pytest.fixture
def traces(pg_url: str) -> Iterator[TraceStore]:
    db = SqlStore.open(pg_url)
    store = TraceStore(db, views=normalize, claims=True)
    yield store
    store.close()
    db.close()


def tid(i: int) -> str:
    return f"{i:032x}"


def trace_spans(i: int, n: int = 3, *, root: bool = True) -> list[Span]:
    out = [
        Span(tid(i), f"{k + 2:016x}", parent_span_id="1" * 16, name=f"s{k}", end_time_unix_nano=9)
        for k in range(n - 1)
    ]
    if root:
        out.append(Span(tid(i), "1" * 16, name="root", end_time_unix_nano=10))
    return out


class Graded:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    async def __call__(self, trace: Trace, record: Record) -> None:
        assert record.id == trace.trace_id
        self.seen.append((trace.trace_id, len(trace.spans)))


def completer(store: TraceStore, graded: Graded, *, grace_s: float = 0.0) -> SharedCompletion:
    async def rows(project: str, summaries: Sequence[TraceSummary]) -> None:
        await asyncio.to_thread(store.write, {}, {project: list(summaries)})

    return SharedCompletion(
        store, rows, ttl_s=3.0, grace_s=grace_s, orphan_s=60.0, grade=graded, poll_s=0.05
    )


async def until(condition: object, within_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_each_trace_completed_and_graded_once_whole(traces: TraceStore) -> None:
    db = traces.store
    graded = Graded()

    async def main() -> None:
        # spans of one trace in several batches (as several replicas would store them)
        traces.write({"p": trace_spans(1)[:1] + trace_spans(2)})
        traces.write({"p": trace_spans(1)[1:] + trace_spans(3, root=False)})
        shared = completer(traces, graded)
        await shared.start()
        try:
            await until(lambda: claim_counts(db)["done"] == 2)
            assert shared.held
            await asyncio.sleep(0.3)  # a second round finds nothing more
        finally:
            await shared.stop()
            await shared.release()
        assert sorted(graded.seen) == [(tid(1), 3), (tid(2), 3)]  # the orphan waits 60 s
        assert claim_counts(db) == {"open": 1, "claimed": 0, "done": 2}
        assert {t.trace_id: t.span_count for t in traces.list_traces("p")[0]} == {
            tid(1): 3,
            tid(2): 3,
        }
        assert lease_holder(db, "watch") is None  # given up on release
        assert shared.stats.graded == 2
        assert shared.stats.completed == 2

    asyncio.run(main())


def test_late_spans_rebuild_the_row_and_are_not_graded_again(traces: TraceStore) -> None:
    db = traces.store
    graded = Graded()

    async def main() -> None:
        traces.write({"p": trace_spans(1)})
        shared = completer(traces, graded)
        await shared.start()
        try:
            await until(lambda: claim_counts(db)["done"] == 1)
            traces.write({"p": [Span(tid(1), "9" * 16, parent_span_id="1" * 16, name="late")]})
            await until(lambda: shared.stats.rebuilt == 1)
            await until(lambda: claim_counts(db)["done"] == 1)
        finally:
            await shared.stop()
            await shared.release()
        assert graded.seen == [(tid(1), 3)]
        [row], _ = traces.list_traces("p")
        assert row.span_count == 4  # its row counts the late span

    asyncio.run(main())


def test_nothing_is_completed_before_its_grace(traces: TraceStore) -> None:
    db = traces.store
    graded = Graded()

    async def main() -> None:
        traces.write({"p": trace_spans(1)})
        shared = completer(traces, graded, grace_s=1.5)
        await shared.start()
        try:
            await asyncio.sleep(0.8)
            assert graded.seen == []
            assert claim_counts(db)["open"] == 1
            await until(lambda: claim_counts(db)["done"] == 1, within_s=10)
        finally:
            await shared.stop()
            await shared.release()
        assert graded.seen == [(tid(1), 3)]

    asyncio.run(main())


def test_a_failing_grade_gives_the_trace_back(traces: TraceStore) -> None:
    db = traces.store
    calls: list[str] = []

    async def flaky(trace: Trace, record: Record) -> None:
        calls.append(trace.trace_id)
        if len(calls) == 1:
            raise RuntimeError("grading failed once")

    async def main() -> None:
        traces.write({"p": trace_spans(1)})

        async def rows(project: str, summaries: Sequence[TraceSummary]) -> None:
            await asyncio.to_thread(traces.write, {}, {project: list(summaries)})

        shared = SharedCompletion(
            traces, rows, ttl_s=3.0, grace_s=0.0, orphan_s=60.0, grade=flaky, poll_s=0.05
        )
        await shared.start()
        try:
            await until(lambda: claim_counts(db)["done"] == 1)
        finally:
            await shared.stop()
            await shared.release()
        assert calls == [tid(1), tid(1)]  # given back, graded again, then done
        assert shared.stats.failed == 1

    asyncio.run(main())
