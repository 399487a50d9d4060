"""Events of a span received apart from it (OTLP log records): stored once, merged into their
span's events on read before the view is built, scoped by project, expired by retention, and
the schema-6 migration; on SQLite and on PostgreSQL (skipped when unreachable)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from evalsi.core import Span, SpanEvent, StoreError, UserError
from evalsi.store import SqlStore, TraceStore
from evalsi.store import _migrations as migrations_module
from evalsi.store import _traces as traces_module
from evalsi.store._migrations import MIGRATIONS
from evalsi.store._schema import span_events
from evalsi.traces import normalize

S = 1_000_000_000
T0 = 1_700_000_000 * S
TRACE = "ab" * 16
CHAT = "cd" * 8


def chat(span_id: str = CHAT, trace_id: str = TRACE, events: list[SpanEvent] | None = None) -> Span:
    return Span(
        trace_id,
        span_id,
        name="chat m",
        kind=3,
        start_time_unix_nano=T0,
        end_time_unix_nano=T0 + 100,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        events=list(events or []),
    )


def user(content: str, time_ns: int = T0 + 1) -> SpanEvent:
    return SpanEvent("gen_ai.user.message", time_ns, {"event.body": {"content": content}})


def answer(content: str, time_ns: int = T0 + 50) -> SpanEvent:
    return SpanEvent("gen_ai.choice", time_ns, {"event.body": {"message": {"content": content}}})


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def ts(url: str) -> Iterator[TraceStore]:
    store = SqlStore.open(url)
    traces = TraceStore(store, views=normalize)  # as the server builds it
    yield traces
    traces.close()
    store.close()


def one_span(ts: TraceStore, project: str = "default") -> Span:
    trace = ts.get_trace(project, TRACE)
    assert trace is not None
    assert len(trace.spans) == 1
    return trace.spans[0]


def test_log_events_are_merged_into_their_span_and_the_view_reads_them(ts: TraceStore) -> None:
    ts.write_spans("default", [chat()])
    before = one_span(ts).view
    assert before is not None
    assert (before.type, before.input) == ("llm", None)  # no message events yet
    added = ts.add_span_events("default", [(TRACE, CHAT, user("hi")), (TRACE, CHAT, answer("yo"))])
    assert added == 2
    got = one_span(ts)
    assert got.events == [user("hi"), answer("yo")]
    assert got.view is not None
    assert got.view.input == [{"role": "user", "content": "hi"}]
    assert got.view.output == [{"role": "assistant", "content": "yo"}]
    listed, _ = ts.list_spans("default")
    assert [s.events for s in listed] == [[user("hi"), answer("yo")]]
    assert listed[0].view == got.view


def test_an_event_reads_back_as_it_would_on_its_span(ts: TraceStore) -> None:
    """Nested values, bytes, lists: the same encoding as a span's own events."""
    attributes = {
        "blob": b"\x00\xffbin",
        "nested": {"raw": b"\x01", "x": [1, 2.5, True, None]},
        "tags": ("a", "b"),
        "text": "héllo",
    }
    event = SpanEvent("weird", T0 + 3, attributes)
    on_span = chat("01" * 8, events=[event])
    apart = chat("02" * 8)
    ts.write_spans("default", [on_span, apart])
    ts.add_span_events("default", [(TRACE, apart.span_id, dataclasses.replace(event))])
    trace = ts.get_trace("default", TRACE)
    assert trace is not None
    events = {s.span_id: s.events for s in trace.spans}
    assert events[apart.span_id] == events[on_span.span_id]
    assert events[apart.span_id][0].attributes["blob"] == b"\x00\xffbin"
    assert events[apart.span_id][0].attributes["tags"] == ["a", "b"]


def test_merged_events_are_ordered_by_time(ts: TraceStore) -> None:
    own = [SpanEvent("own.10", T0 + 10), SpanEvent("own.30", T0 + 30)]
    ts.write_spans("default", [chat(events=own)])
    later, same = SpanEvent("log.20", T0 + 20), SpanEvent("log.10", T0 + 10)
    first = SpanEvent("log.5", T0 + 5)
    tie_a, tie_b = SpanEvent("tie.a", T0 + 40), SpanEvent("tie.b", T0 + 40)
    ts.add_span_events("default", [(TRACE, CHAT, e) for e in (later, tie_b, same, tie_a, first)])
    # at one time the span's own event first, then those sent apart in the order they came
    expected = ["log.5", "own.10", "log.10", "log.20", "own.30", "tie.b", "tie.a"]
    assert [e.name for e in one_span(ts).events] == expected
    listed, _ = ts.list_spans("default", trace_id=TRACE)
    assert [e.name for e in listed[0].events] == expected


def test_events_of_one_time_keep_the_order_they_were_sent_in(ts: TraceStore) -> None:
    """A conversation sent with one timestamp (a coarse clock) reads back in its order, across
    requests too, whatever their hashes."""
    ts.write_spans("default", [chat()])
    turns = [SpanEvent(f"m{i}", T0 + 7, {"content": f"turn {i}"}) for i in range(12)]
    ts.add_span_events("default", [(TRACE, CHAT, e) for e in turns[:5]])
    ts.add_span_events("default", [(TRACE, CHAT, e) for e in turns[5:]])
    assert [e.name for e in one_span(ts).events] == [f"m{i}" for i in range(12)]


def test_an_event_sent_again_is_stored_once(ts: TraceStore) -> None:
    ts.write_spans("default", [chat()])
    triple = (TRACE, CHAT, user("hi"))
    assert ts.add_span_events("default", [triple]) == 1
    assert ts.add_span_events("default", [triple]) == 0
    assert ts.add_span_events("default", [triple, triple]) == 0
    # the same attributes in another order are the same event
    reordered = SpanEvent("e", T0 + 2, {"b": 2, "a": {"y": 1, "x": 0}})
    swapped = SpanEvent("e", T0 + 2, {"a": {"x": 0, "y": 1}, "b": 2})
    assert ts.add_span_events("default", [(TRACE, CHAT, reordered), (TRACE, CHAT, swapped)]) == 1
    # a different time, name, span or attribute value is another event
    others = [
        (TRACE, CHAT, user("hi", T0 + 9)),
        (TRACE, CHAT, user("hello")),
        (TRACE, CHAT, dataclasses.replace(user("hi"), name="gen_ai.system.message")),
        (TRACE, "ef" * 8, user("hi")),
    ]
    assert ts.add_span_events("default", others) == 4
    assert [e.name for e in one_span(ts).events].count("gen_ai.user.message") == 3
    assert ts.add_span_events("default", []) == 0


def test_a_large_batch_counts_only_the_new_events(ts: TraceStore) -> None:
    ts.write_spans("default", [chat()])
    big = [(TRACE, CHAT, SpanEvent("e", T0 + i, {"i": i})) for i in range(1500)]
    assert ts.add_span_events("default", big) == 1500
    more = [(TRACE, CHAT, SpanEvent("e", T0 + i, {"i": i})) for i in range(1490, 1520)]
    assert ts.add_span_events("default", more) == 20  # 10 of them were stored already
    assert len(one_span(ts).events) == 1520


def test_events_that_come_before_their_span_wait_for_it(ts: TraceStore) -> None:
    assert ts.add_span_events("default", [(TRACE, CHAT, user("early"))]) == 1
    assert ts.get_trace("default", TRACE) is None  # no span stored: nothing to show
    assert ts.list_spans("default") == ([], "")
    ts.write_spans("default", [chat()])
    got = one_span(ts)
    assert got.events == [user("early")]
    assert got.view is not None
    assert got.view.input == [{"role": "user", "content": "early"}]
    ts.write_spans("default", [chat()])  # the span re-sent: its events stay, merged once
    assert one_span(ts).events == [user("early")]


def test_list_spans_merges_the_events_of_each_span_of_the_page(ts: TraceStore) -> None:
    traces = [f"{n:032x}" for n in range(1, 5)]
    spans = [
        dataclasses.replace(chat(trace_id=t), start_time_unix_nano=T0 + n * S)
        for n, t in enumerate(traces)
    ]
    ts.write_spans("default", spans)
    ts.add_span_events("default", [(t, CHAT, user(f"m{t[-1]}")) for t in traces])
    seen: list[tuple[str, object]] = []
    token = ""
    while True:
        page, token = ts.list_spans("default", limit=3, page_token=token)
        seen += [(s.trace_id, s.view.input if s.view else None) for s in page]
        if not token:
            break
    assert seen == [(t, [{"role": "user", "content": f"m{t[-1]}"}]) for t in reversed(traces)]


def test_projects_never_see_each_others_events(ts: TraceStore) -> None:
    for project in ("a", "b"):
        ts.write_spans(project, [chat()])
    assert ts.add_span_events("a", [(TRACE, CHAT, user("secret"))]) == 1
    assert one_span(ts, "a").events == [user("secret")]
    assert one_span(ts, "b").events == []
    assert ts.list_spans("b")[0][0].events == []
    # the same event in another project is another row
    assert ts.add_span_events("b", [(TRACE, CHAT, user("secret"))]) == 1


def test_retention_deletes_span_events_by_their_time(
    ts: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces_module, "DELETE_BATCH", 2)  # several batches
    old = [(TRACE, CHAT, SpanEvent("old", T0 + i)) for i in range(5)]
    new = [(TRACE, CHAT, SpanEvent("new", T0 + 100 * S + i)) for i in range(3)]
    ts.add_span_events("kept", old + new)
    # a project with nothing but events (their span never came) expires too
    ts.add_span_events("orphans", old)
    now_s = T0 / S + 150
    assert ts.delete_expired(now_s, 60.0, {"kept": None}) == 5
    assert ts.delete_expired(now_s, 60.0) == 5
    assert ts.delete_expired(now_s, 60.0) == 0
    with ts.engine.connect() as conn:
        left = conn.execute(sa.select(span_events.c.project_id, span_events.c.name)).all()
    assert sorted(left) == [("kept", "new")] * 3
    ts.write_spans("orphans", [chat()])
    assert one_span(ts, "orphans").events == []
    ts.write_spans("kept", [chat()])
    assert [e.name for e in one_span(ts, "kept").events] == ["new"] * 3


@pytest.mark.parametrize("project", ["", "bad project!", "x" * 65])
def test_an_invalid_project_is_a_user_error(ts: TraceStore, project: str) -> None:
    with pytest.raises(UserError, match="project_id"):
        ts.add_span_events(project, [(TRACE, CHAT, user("hi"))])


def test_a_failed_write_is_a_store_error(tmp_path: Path) -> None:
    store = SqlStore.open(str(tmp_path / "s.db"))
    ts = TraceStore(store)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE span_events")
    with pytest.raises(StoreError, match="cannot write span events to"):
        ts.add_span_events("default", [(TRACE, CHAT, user("hi"))])
    ts.close()
    store.close()


def test_a_version_5_store_gains_the_span_events_table(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:  # the evalsi before this migration
        m.setattr(migrations_module, "SCHEMA_VERSION", 5)
        m.setattr(migrations_module, "MIGRATIONS", MIGRATIONS[:5])
        old = SqlStore.open(url)
        assert not sa.inspect(old.engine).has_table("span_events")
        before = TraceStore(old)
        before.write_spans("default", [chat()])
        before.close()
        old.close()
    store = SqlStore.open(url)
    try:
        assert store.migrations_applied == [m.version for m in MIGRATIONS[5:]]  # 6 and later
        inspector = sa.inspect(store.engine)
        columns = {c["name"] for c in inspector.get_columns("span_events")}
        assert columns == set(span_events.columns.keys())
        assert inspector.get_pk_constraint("span_events")["constrained_columns"] == [
            "project_id",
            "trace_id",
            "span_id",
            "key",
        ]
        indexes = {ix["name"]: ix["column_names"] for ix in inspector.get_indexes("span_events")}
        assert indexes == {"span_events_time": ["project_id", "time_ns"]}
        ts = TraceStore(store, views=normalize)
        assert ts.add_span_events("default", [(TRACE, CHAT, user("hi"))]) == 1
        got = one_span(ts)  # the span written before the migration
        assert got.view is not None
        assert got.view.input == [{"role": "user", "content": "hi"}]
        ts.close()
    finally:
        store.close()
