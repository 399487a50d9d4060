"""The trace tables in a real store: migrating an existing store, ingest beside retention and
readers, two writers on one file, PostgreSQL's text rules (skipped when it is unreachable)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from evalsi.core import Feedback, Span, SpanView
from evalsi.store import SqlStore, TraceStore, TraceSummary
from evalsi.store import _migrations as migrations_module
from evalsi.store._migrations import MIGRATIONS
from evalsi.store._schema import spans, trace_feedback, traces

S = 1_000_000_000
T0 = 1_700_000_000 * S


def batch(b: int, n: int = 64, *, start_s: float = 0.0) -> list[Span]:
    resource = {"service.name": "bot"}
    start = T0 + round(start_s * S)
    return [
        Span(
            f"{b:016x}{i // 8:016x}",
            f"{i:016x}",
            parent_span_id="" if i % 8 == 0 else f"{i - i % 8:016x}",
            name="step",
            start_time_unix_nano=start + i,
            end_time_unix_nano=start + i + S,
            attributes={"i": i},
            resource=resource,
            view=SpanView("llm", model="m"),
        )
        for i in range(n)
    ]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


def test_a_version_3_store_gains_the_trace_tables(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:  # the evalsi before this migration
        m.setattr(migrations_module, "SCHEMA_VERSION", 3)
        m.setattr(migrations_module, "MIGRATIONS", MIGRATIONS[:3])
        old = SqlStore.open(url)
        with old.engine.begin() as conn:  # what that evalsi wrote (today's code writes more)
            conn.exec_driver_sql(
                "INSERT INTO runs (id, name, kind, status, created_at, records, spec) "
                "VALUES ('20260101-000000-dddddd', 'before', 'score', 'done', 1.0, 0, "
                "'{\"evaluators\": []}')"
            )
        old.close()
    run_id = "20260101-000000-dddddd"
    store = SqlStore.open(url)
    try:
        assert store.migrations_applied == [m.version for m in MIGRATIONS[3:]]  # 4 and later
        inspector = sa.inspect(store.engine)
        for table in (spans, traces, trace_feedback):
            columns = {c["name"] for c in inspector.get_columns(table.name)}
            assert columns == set(table.columns.keys()), table.name
        assert {ix["name"] for ix in inspector.get_indexes("spans")} == {"spans_start"}
        assert store.get_run(run_id).name == "before"
        ts = TraceStore(store)
        ts.write_spans("default", batch(1, 8))
        got = ts.get_trace("default", f"{1:016x}{0:016x}")
        assert got is not None
        assert len(got.spans) == 8
        ts.close()
    finally:
        store.close()


def test_a_version_4_store_keeps_its_feedback_and_gains_the_key(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    thumbs = Feedback(trace_id="ab" * 16, name="thumbs", value=-1, time_unix_nano=7)
    with monkeypatch.context() as m:  # the evalsi before this migration: no key, no dedup
        m.setattr(migrations_module, "SCHEMA_VERSION", 4)
        m.setattr(migrations_module, "MIGRATIONS", MIGRATIONS[:4])
        old = SqlStore.open(url)
        with old.engine.begin() as conn:
            for _ in range(2):  # what a retry left behind before schema 5
                conn.execute(
                    sa.text(
                        "INSERT INTO trace_feedback (project_id, tenant_id, trace_id, "
                        "session_id, name, value, label, comment, source, time_ns, "
                        "received_at) VALUES ('default', '', :t, '', 'thumbs', -1, '', '', "
                        "'api', 7, 1.0)"
                    ),
                    {"t": thumbs.trace_id},
                )
        old.close()
    store = SqlStore.open(url)
    try:
        assert store.migrations_applied == [m.version for m in MIGRATIONS[4:]]  # 5 and later
        ts = TraceStore(store)
        assert len(ts.feedback_for("default", trace_id=thumbs.trace_id)) == 2  # kept as they were
        assert ts.add_feedback("default", thumbs) is True  # old rows have keys of their own
        assert ts.add_feedback("default", thumbs) is False
        assert len(ts.feedback_for("default", trace_id=thumbs.trace_id)) == 3
        ts.close()
    finally:
        store.close()


def test_ingest_beside_retention_and_readers(url: str) -> None:
    """A writer thread stores new spans while another thread expires old ones and a third
    reads: every new span survives, every old one goes, nobody fails."""
    store = SqlStore.open(url)
    ts = TraceStore(store)
    old = [batch(b, start_s=0) for b in range(10)]  # ended by T0 + 1 s
    for b in old:
        ts.write_spans("default", b)
    new = [batch(100 + b, start_s=1000) for b in range(20)]  # ends after T0 + 1000 s
    errors: list[BaseException] = []
    written = threading.Event()

    def guard(fn: object) -> threading.Thread:
        def body() -> None:
            try:
                fn()  # type: ignore[operator]
            except BaseException as e:  # noqa: BLE001 - reported by the test below
                errors.append(e)

        return threading.Thread(target=body)

    def write() -> None:
        for b in new:
            ts.write_spans("default", b)
        written.set()

    deleted: list[int] = []

    def expire() -> None:
        while True:  # until the writer is done, then once more
            done = written.is_set()
            deleted.append(ts.delete_expired(T0 / S + 500, 100.0))
            if done:
                return

    def read() -> None:
        while not written.is_set():
            ts.list_spans("default", limit=100)

    threads = [guard(write), guard(expire), guard(read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(deleted) == 10 * 64
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(spans)).scalar_one() == 20 * 64
    ts.close()
    store.close()


def test_two_writers_on_one_store(url: str) -> None:
    """A server and a CLI (two stores, two connections) writing the same traces at once."""
    a, b = SqlStore.open(url), SqlStore.open(url)
    ta, tb = TraceStore(a), TraceStore(b)
    batches = [batch(k) for k in range(12)]

    def write(ts: TraceStore, which: list[list[Span]]) -> None:
        for x in which:
            ts.write_spans("p", x)

    threads = [
        threading.Thread(target=write, args=(ta, batches[::2])),
        threading.Thread(target=write, args=(tb, batches)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    found, token = ta.list_spans("p", limit=1000)
    assert len(found) == 12 * 64
    assert token == ""
    for ts, store in ((ta, a), (tb, b)):
        ts.close()
        store.close()


def test_nul_characters_in_text_are_dropped_on_postgresql(pg_url: str) -> None:
    store = SqlStore.open(pg_url)
    ts = TraceStore(store)
    bad = batch(1, 2)
    bad[1].name = "st\x00ep"
    # JSON escapes NUL, and PostgreSQL stores the escape, but its jsonb casts (attribute
    # filters) refuse it: dropped too, so one such span cannot break a project's queries
    bad[1].attributes["k\x00"] = "v\x00"
    ts.write_spans("default", bad)
    got = ts.get_trace("default", bad[0].trace_id)
    assert got is not None
    assert [s.name for s in got.spans] == ["step", "step"]
    assert got.spans[1].attributes["k"] == "v"
    ts.upsert_trace("default", TraceSummary.of(got, completed_at=1.0))
    assert ts.list_traces("default")[0][0].span_count == 2
    assert [t.trace_id for t in ts.list_traces("default", attributes={"k": "v"})[0]] == [
        bad[0].trace_id
    ]
    ts.close()
    store.close()


def test_span_events_round_trip_on_postgresql(pg_url: str) -> None:
    """Events sent apart from their span (OTLP log records) on PostgreSQL: merged into the
    span with the view rebuilt from them, read back as the span's own events would be (NUL
    characters dropped alike), stored once when re-sent."""
    from evalsi.core import SpanEvent
    from evalsi.traces import normalize

    store = SqlStore.open(pg_url)
    ts = TraceStore(store, views=normalize)
    trace_id, chat, other = "ab" * 16, "cd" * 8, "ef" * 8
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    odd = SpanEvent("odd\x00", T0 + 2, {"k\x00": "v\x00", "raw": b"\x00\x01", "n": {"x": [1]}})
    ts.write_spans(
        "default",
        [
            Span(
                trace_id,
                chat,
                name="chat m",
                start_time_unix_nano=T0,
                end_time_unix_nano=T0 + 9,
                attributes=attributes,
            ),
            Span(
                trace_id,
                other,
                name="x",
                start_time_unix_nano=T0,
                end_time_unix_nano=T0 + 9,
                events=[odd],
            ),
        ],
    )
    message = SpanEvent("gen_ai.user.message", T0 + 1, {"event.body": {"content": "hi"}})
    sent = [(trace_id, chat, message), (trace_id, chat, odd)]
    assert ts.add_span_events("default", sent) == 2
    assert ts.add_span_events("default", sent) == 0
    got = ts.get_trace("default", trace_id)
    assert got is not None
    by_id = {s.span_id: s for s in got.spans}
    assert by_id[chat].events[0] == message
    assert by_id[chat].events[1] == by_id[other].events[0]  # stored apart or on the span
    assert by_id[chat].events[1].attributes["k"] == "v"
    view = by_id[chat].view
    assert view is not None
    assert view.input == [{"role": "user", "content": "hi"}]
    listed, _ = ts.list_spans("default", name="chat m")
    assert [s.view.input if s.view else None for s in listed] == [view.input]
    ts.close()
    store.close()
