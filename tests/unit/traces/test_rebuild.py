"""Trace rows built again from the store: one rebuild of a trace at a time, each reading after
the one before wrote, so the last row written is built from the latest read."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from evalsi.core import Span, Trace
from evalsi.store import TraceSummary
from evalsi.traces._rebuild import RowRebuilder

TID = "4bf92f3577b34da6a3ce929d0e0e4736"


class Reader:
    """A trace whose span count grows by one at every read (events keep arriving)."""

    def __init__(self) -> None:
        self.reads = 0
        self.log: list[str] = []

    def get_trace(self, project: str, trace_id: str) -> Trace | None:
        if trace_id != TID:
            return None
        self.reads += 1
        self.log.append(f"read {self.reads}")
        spans = [Span(TID, f"{i + 1:016x}", name="s") for i in range(self.reads)]
        return Trace(TID, project=project, spans=spans)


def test_rebuilds_of_one_trace_do_not_overtake_each_other() -> None:
    reader = Reader()
    written: list[int] = []

    async def main() -> None:
        first_store_entered = asyncio.Event()
        release = asyncio.Event()

        async def store(project: str, rows: Sequence[TraceSummary]) -> None:
            reader.log.append(f"write {rows[0].span_count}")
            if not written and not first_store_entered.is_set():
                first_store_entered.set()
                await release.wait()  # the first write is slow: the second must wait for it
            written.append(rows[0].span_count)

        rebuilder = RowRebuilder(reader, store)  # type: ignore[arg-type]
        first = asyncio.create_task(rebuilder.rebuild("default", [TID], keep=True))
        await first_store_entered.wait()
        second = asyncio.create_task(rebuilder.rebuild("default", [TID, "0" * 32], keep=True))
        await asyncio.sleep(0.05)
        assert reader.reads == 1  # the second has not read while the first was writing
        release.set()
        got = await asyncio.gather(first, second)
        assert [len(t) for t in got] == [1, 1]  # the trace with no span is left out
        assert rebuilder._locks == {}  # nothing held once done

    asyncio.run(main())
    assert reader.log == ["read 1", "write 1", "read 2", "write 2"]
    assert written == [1, 2]  # the last row is built from the latest read


def test_nothing_to_rebuild_reads_nothing() -> None:
    reader = Reader()

    async def store(project: str, rows: Sequence[TraceSummary]) -> None:
        raise AssertionError("nothing to write")

    rebuilder = RowRebuilder(reader, store)  # type: ignore[arg-type]
    assert asyncio.run(rebuilder.rebuild("default", [])) == {}
    assert asyncio.run(rebuilder.rebuild("default", ["0" * 32])) == {}
    assert reader.reads == 0


def test_one_trace_that_fails_costs_the_others_nothing() -> None:
    class Failing(Reader):
        def get_trace(self, project: str, trace_id: str) -> Trace | None:
            if trace_id == "f" * 32:
                raise RuntimeError("a corrupt row")
            return Trace(trace_id, project=project, spans=[Span(trace_id, "1" * 16, name="s")])

    good, bad, refused = "a" * 32, "f" * 32, "b" * 32
    written: list[list[str]] = []

    async def store(project: str, rows: Sequence[TraceSummary]) -> None:
        ids = [r.trace_id for r in rows]
        if refused in ids:  # the store refuses this trace's row, and with it the batch
            raise ValueError("row refused")
        written.append(ids)

    rebuilder = RowRebuilder(Failing(), store)  # type: ignore[arg-type]
    assert asyncio.run(rebuilder.rebuild("default", [bad, good, refused])) == {}
    # the batch failed on one row: written again one at a time, the good one lands
    assert written == [[good]]
    kept = asyncio.run(rebuilder.rebuild("default", [good], keep=True))
    assert list(kept) == [good]
