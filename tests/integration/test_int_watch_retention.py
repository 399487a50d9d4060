"""Retention on a running server: the Watch loop deletes spans and traces older than the
project's TTL when the server starts (and every few minutes after), and keeps the rest."""

from __future__ import annotations

import time
from pathlib import Path

from evalsi.core import Outcome, ResultBatch, Span, Trace
from evalsi.policies import result_key
from evalsi.server._state import TracesConfig
from evalsi.store import SqlStore, TraceStore, TraceSummary
from tests.support.server_state import server_state, serving

DAY_NS = 86_400 * 10**9


def _span(trace: str, end_ns: int) -> Span:
    return Span(
        trace, "1" * 16, name="root", start_time_unix_nano=end_ns - 1000, end_time_unix_nano=end_ns
    )


def test_the_server_deletes_what_outlived_its_ttl(tmp_path: Path) -> None:
    now_ns = time.time_ns()
    old, fresh = "a" * 32, "b" * 32
    seed = SqlStore.open(str(tmp_path / "s.db"))
    store = TraceStore(seed)
    store.write_spans("default", [_span(old, now_ns - 2 * DAY_NS), _span(fresh, now_ns)])
    store.write_spans("audit", [_span(old, now_ns - 2 * DAY_NS)])
    for trace_id, end in ((old, now_ns - 2 * DAY_NS), (fresh, now_ns)):
        store.upsert_trace(
            "default", TraceSummary.of(Trace(trace_id, spans=[_span(trace_id, end)]))
        )
    # a policy's scores of both traces, where the server's policies keep them
    watch = seed.create_run(kind="watch", spec={}, project_id="default").id
    rows = []
    for trace_id in (old, fresh):
        seq, trial = result_key(trace_id)
        batch = ResultBatch("check", "check", "check", [trace_id], trial=trial)
        batch.set_outcome(0, Outcome.SKIPPED, "x")
        rows.append((0, seq, batch))
    seed.write_batches(watch, rows)
    seed.close()

    config = TracesConfig(retention_s=86_400.0, project_retention_s={"audit": None})
    state = server_state(tmp_path, runs=False, traces=config)
    with serving(state):
        traces = TraceStore(state.store)
        deadline = time.monotonic() + 30
        while traces.get_trace("default", old) is not None:
            assert time.monotonic() < deadline, "retention did not run"
            time.sleep(0.1)
        assert traces.get_trace("default", fresh) is not None  # within the TTL
        while [r.record_id for _, _, r in state.store.iter_results(watch)] != [fresh]:
            assert time.monotonic() < deadline, "the expired trace's score was kept"
            time.sleep(0.1)  # it goes with its trace row, in the same retention pass
        assert traces.get_trace("audit", old) is not None  # audit keeps forever
