"""Spans, traces and feedback in the store: round trips, upserts, queries, paging, project
scope and retention, on SQLite and on PostgreSQL (skipped when unreachable)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.core import (
    PREVIEW_CHARS,
    STATUS_ERROR,
    STATUS_OK,
    Feedback,
    Outcome,
    ResultBatch,
    Span,
    SpanEvent,
    SpanLink,
    SpanView,
    ToolCall,
    Trace,
    Usage,
    UserError,
)
from evalsi.policies import result_key
from evalsi.store import SqlStore, TraceStore, TraceSummary
from evalsi.store import _trace_rows as trace_rows
from evalsi.store import _traces as traces_module

S = 1_000_000_000  # ns per second
T0 = 1_700_000_000 * S


def tid(n: int) -> str:
    return f"{n:032x}"


def sid(n: int) -> str:
    return f"{n:016x}"


def span(
    trace: int,
    n: int,
    *,
    parent: int = 0,
    start_s: float = 0.0,
    dur_s: float = 1.0,
    service: str = "bot",
    view: SpanView | None = None,
    status: int = STATUS_OK,
    **attributes: object,
) -> Span:
    start = T0 + round(start_s * S)
    return Span(
        trace_id=tid(trace),
        span_id=sid(n),
        parent_span_id=sid(parent) if parent else "",
        name=f"op{n}",
        kind=1,
        start_time_unix_nano=start,
        end_time_unix_nano=start + round(dur_s * S),
        status_code=status,
        attributes={k.replace("_", "."): v for k, v in attributes.items()},
        resource={"service.name": service, "deployment.environment": "prod"},
        view=view,
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def ts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    url = str(tmp_path / "s.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    store = SqlStore.open(url)
    traces = TraceStore(store)
    yield traces
    traces.close()
    store.close()


def summary(spans: list[Span], **kw: object) -> TraceSummary:
    return TraceSummary.of(Trace(spans[0].trace_id, spans=spans), completed_at=1.0, **kw)  # type: ignore[arg-type]


def test_spans_round_trip_with_views_events_bytes_and_resource(ts: TraceStore) -> None:
    resource = {"service.name": "bot", "host.name": "h1", "k8s.labels": {"app": "x"}}
    llm = Span(
        tid(1),
        sid(2),
        parent_span_id=sid(1),
        name="chat gpt",
        kind=3,
        start_time_unix_nano=T0 + 5,
        end_time_unix_nano=T0 + 900,
        status_code=STATUS_ERROR,
        status_message="rate limited",
        attributes={
            "gen_ai.request.model": "gpt",
            "gen_ai.usage.input_tokens": 12,
            "temperature": 0.5,
            "stream": True,
            "blob": b"\x00\xffbin",
            "tags": ["a", "b"],
            "nested": {"blob": b"\x01", "x": [1, 2]},
        },
        events=[SpanEvent("gen_ai.choice", T0 + 7, {"index": 0, "raw": b"z"})],
        resource=resource,
        scope_name="opentelemetry.instrumentation.openai",
        scope_version="0.48b0",
        view=SpanView(
            type="llm",
            convention="otel-genai/1.37",
            name="gpt",
            model="gpt",
            input=[{"role": "user", "content": "hi"}],
            output=[{"role": "assistant", "content": "hello"}],
            usage=Usage(input_tokens=12, output_tokens=3),
            session_id="s1",
            user_id="u1",
        ),
    )
    tool = Span(
        tid(1),
        sid(3),
        parent_span_id=sid(1),
        name="execute_tool search",
        start_time_unix_nano=T0 + 1000,
        end_time_unix_nano=T0 + 2000,
        resource=resource,
        links=[
            SpanLink(tid(9), sid(5), {"why": "handoff", "raw": b"\x02"}),
            SpanLink(tid(1), sid(2)),
        ],
        view=SpanView(
            type="tool",
            name="search",
            tool_call=ToolCall("search", {"q": "x"}, "c1"),
            output="found",
        ),
    )
    retriever = Span(
        tid(1),
        sid(4),
        parent_span_id=sid(1),
        start_time_unix_nano=T0 + 3000,
        end_time_unix_nano=T0 + 4000,
        resource=resource,
        view=SpanView(type="retriever", documents=["d1", "d2"]),
    )
    root = Span(tid(1), sid(1), name="agent", start_time_unix_nano=T0, end_time_unix_nano=T0 + 5000)
    ts.write_spans("default", [tool, llm, root, retriever])
    got = ts.get_trace("default", tid(1))
    assert got is not None
    assert got.trace_id == tid(1)
    assert got.project == "default"
    # by start time, every field equal; views are not stored (the mappers rebuild them)
    assert got.spans == [dataclasses.replace(s, view=None) for s in (root, llm, tool, retriever)]
    rebuilt = TraceStore(ts.store, views=lambda span: SpanView(type="agent", name=span.name))
    again = rebuilt.get_trace("default", tid(1))
    assert again is not None
    assert [(s.view.type, s.view.name) for s in again.spans if s.view] == [
        ("agent", s.name) for s in (root, llm, tool, retriever)
    ]
    assert got.spans[1].attributes["blob"] == b"\x00\xffbin"
    assert got.feedback == []
    assert ts.get_trace("default", tid(2)) is None


def test_writing_a_span_again_replaces_it_and_a_batch_keeps_its_last_copy(ts: TraceStore) -> None:
    first = span(1, 1, status=STATUS_OK)
    ts.write_spans("default", [first, span(1, 2, parent=1)])
    again = span(1, 1, status=STATUS_ERROR, retry=True)
    ts.write_spans("default", [span(1, 1), again])  # the same span twice in one batch
    got = ts.get_trace("default", tid(1))
    assert got is not None
    assert [s.span_id for s in got.spans] == [sid(1), sid(2)]
    assert got.spans[0] == again
    ts.write_spans("default", [])  # nothing to do


def test_a_batch_larger_than_one_statement(ts: TraceStore) -> None:
    n = trace_rows.CHUNK * 2 + 7
    ts.write_spans("default", [span(1, i + 1, start_s=i) for i in range(n)])
    page, _ = ts.list_spans("default", trace_id=tid(1), limit=1000)
    got = ts.get_trace("default", tid(1))
    assert got is not None
    assert len(got.spans) == n
    assert page[0].span_id == sid(n)  # newest first


def test_projects_never_see_each_others_rows(ts: TraceStore) -> None:
    # the same trace and span ids in two projects are two spans
    written = {
        p: [span(1, 1, service=f"svc-{p}", view=SpanView("llm", session_id="s"))] for p in "ab"
    }
    for project, spans in written.items():
        ts.write_spans(project, spans)
    for project, service in (("a", "svc-a"), ("b", "svc-b")):
        got = ts.get_trace(project, tid(1))
        assert got is not None
        assert [s.service for s in got.spans] == [service]
        ts.upsert_trace(project, summary(written[project]))
        ts.add_feedback(project, Feedback(trace_id=tid(1), name=f"fb-{project}", value=1))
    rows, _ = ts.list_traces("a")
    assert [r.service for r in rows] == ["svc-a"]
    spans_a, _ = ts.list_spans("a")
    assert [s.service for s in spans_a] == ["svc-a"]
    sessions, _ = ts.list_sessions("b")
    assert [(x.session_id, x.trace_count) for x in sessions] == [("s", 1)]
    assert [f.name for f in ts.feedback_for("b", trace_id=tid(1))] == ["fb-b"]
    got_b = ts.get_trace("b", tid(1))
    assert got_b is not None
    assert [f.name for f in got_b.feedback] == ["fb-b"]
    assert ts.list_traces("c")[0] == []
    assert ts.get_trace("c", tid(1)) is None
    assert ts.trace_summary("c", tid(1)) is None


def _seed_traces(ts: TraceStore) -> None:
    """Six traces, one second apart: 1..6 (6 newest). Odd traces are in service "odd"."""
    for n in range(1, 7):
        root = span(
            n,
            10 * n,
            start_s=n,
            service="odd" if n % 2 else "even",
            view=SpanView("agent", session_id=f"sess{n % 3}", user_id="u"),
            status=STATUS_ERROR if n == 4 else STATUS_OK,
            tier="gold" if n in (2, 5) else "free",
        )
        child = span(n, 10 * n + 1, parent=10 * n, start_s=n + 0.1, model="m" if n == 3 else "x")
        ts.write_spans("default", [root, child])
        ts.upsert_trace(
            "default", summary([root, child], input_preview=f"question {n}", user_id="u")
        )


def test_list_traces_filters_newest_first(ts: TraceStore) -> None:
    _seed_traces(ts)

    def ids(**kw: object) -> list[int]:
        rows, token = ts.list_traces("default", **kw)  # type: ignore[arg-type]
        assert token == ""
        return [int(r.trace_id, 16) for r in rows]

    assert ids() == [6, 5, 4, 3, 2, 1]
    assert ids(service="odd") == [5, 3, 1]
    assert ids(since_ns=T0 + 3 * S, until_ns=T0 + 5 * S) == [4, 3]
    assert ids(session_id="sess1") == [4, 1]
    assert ids(error=True) == [4]
    assert ids(error=False) == [6, 5, 3, 2, 1]
    assert ids(name="op30") == [3]
    assert ids(attributes={"tier": "gold"}) == [5, 2]  # a root span's attribute
    assert ids(attributes={"model": "m"}) == [3]  # any span's
    assert ids(attributes={"deployment.environment": "prod"}) == [6, 5, 4, 3, 2, 1]  # resource
    assert ids(attributes={"tier": "gold", "model": "m"}) == []
    row = ts.list_traces("default", limit=1)[0][0]
    assert (row.span_count, row.duration_ms, row.input_preview) == (2, 1100.0, "question 6")
    assert row.record is None  # listings leave the record out


def test_attribute_values_compare_as_text(ts: TraceStore) -> None:
    ts.write_spans("default", [span(1, 1, count=3, flag=True, ratio=0.5)])
    ts.upsert_trace("default", summary([span(1, 1)]))
    for attrs in ({"count": "3"}, {"flag": "true"}, {"ratio": "0.5"}):
        assert len(ts.list_traces("default", attributes=attrs)[0]) == 1, attrs
    for attrs in ({"count": "4"}, {"flag": "false"}, {"missing": ""}):
        assert ts.list_traces("default", attributes=attrs)[0] == [], attrs


def test_list_traces_pages_by_keyset(ts: TraceStore) -> None:
    _seed_traces(ts)
    seen, token, pages = [], "", 0
    while True:
        rows, token = ts.list_traces("default", limit=4, page_token=token)
        seen += [int(r.trace_id, 16) for r in rows]
        pages += 1
        if not token:
            break
    assert (seen, pages) == ([6, 5, 4, 3, 2, 1], 2)
    # a trace added meanwhile (newer) does not shift the pages already handed out
    rows, token = ts.list_traces("default", limit=2)
    _seed_more = span(9, 90, start_s=100)
    ts.write_spans("default", [_seed_more])
    ts.upsert_trace("default", summary([_seed_more]))
    rows, _ = ts.list_traces("default", limit=2, page_token=token)
    assert [int(r.trace_id, 16) for r in rows] == [4, 3]


def test_trace_summary_keeps_the_record_and_counts_late_spans(ts: TraceStore) -> None:
    root, child = span(1, 1), span(1, 2, parent=1)
    ts.write_spans("default", [root, child])
    record = {"id": tid(1), "input": "hi", "output": {"text": "hello"}}
    ts.upsert_trace("default", summary([root], record=record, output_preview="x" * 1000))
    got = ts.trace_summary("default", tid(1))
    assert got is not None
    assert got.span_count == 2  # the stored spans, though the summary saw one
    assert got.record == record
    assert len(got.output_preview) == PREVIEW_CHARS
    assert got.output_preview.endswith("…")
    assert not got.error
    ts.write_spans("default", [span(1, 3, parent=1, status=STATUS_ERROR)])  # late, failed
    got = ts.trace_summary("default", tid(1))
    assert got is not None
    assert (got.span_count, got.error) == (3, True)
    ts.write_spans("default", [span(1, 3, parent=1, status=STATUS_OK)])  # error stays known
    got = ts.trace_summary("default", tid(1))
    assert got is not None
    assert (got.span_count, got.error) == (3, True)


def test_one_write_stores_spans_and_trace_rows_of_several_projects(ts: TraceStore) -> None:
    """Ingest's group commit: spans and summaries of two projects in one call; a summary
    counts the spans stored with it; of two summaries of one trace the last one wins; a
    summary that saw more spans than are stored keeps its own count."""
    a1, a2 = span(1, 1), span(1, 2, parent=1)
    b1 = span(2, 3)
    first = summary([a1], output_preview="first")
    last = summary([a1], output_preview="last")
    ts.write(
        {"default": [a1, a2], "other": [b1]},
        {"default": [first, last], "other": [summary([b1, span(2, 4, parent=3)])]},
    )
    got = ts.trace_summary("default", tid(1))
    assert got is not None
    assert (got.span_count, got.output_preview) == (2, "last")
    other = ts.trace_summary("other", tid(2))
    assert other is not None
    assert other.span_count == 2  # its own count: one of its two spans is stored
    assert ts.trace_summary("other", tid(1)) is None
    assert ts.trace_summary("default", tid(2)) is None


def test_a_batch_of_summaries_larger_than_one_statement(ts: TraceStore) -> None:
    n = trace_rows.TRACE_CHUNK + 5
    ts.write({}, {"default": [summary([span(i, i)]) for i in range(1, n + 1)]})
    found, _ = ts.list_traces("default", limit=1000)
    assert len(found) == 1000
    assert ts.trace_summary("default", tid(n)) is not None


def test_list_sessions(ts: TraceStore) -> None:
    _seed_traces(ts)
    rows, token = ts.list_sessions("default")
    # sess0: traces 3, 6; sess1: 1, 4 (4 failed); sess2: 2, 5; newest latest trace first
    got = [(r.session_id, r.trace_count, r.error_count) for r in rows]
    assert got == [("sess0", 2, 0), ("sess2", 2, 0), ("sess1", 2, 1)]
    assert token == ""
    sess1 = rows[2]
    assert sess1.first_start_unix_nano == T0 + 1 * S
    assert sess1.last_end_unix_nano == T0 + 4 * S + 1100 * 1_000_000
    assert sess1.user_id == "u"
    first, token = ts.list_sessions("default", limit=2)
    rest, end = ts.list_sessions("default", limit=2, page_token=token)
    assert [r.session_id for r in first + rest] == ["sess0", "sess2", "sess1"]
    assert end == ""
    only, _ = ts.list_sessions("default", service="odd")  # traces 1, 3, 5
    assert [(r.session_id, r.trace_count) for r in only] == [
        ("sess2", 1),
        ("sess0", 1),
        ("sess1", 1),
    ]


def test_list_spans_filters_and_pages(ts: TraceStore) -> None:
    _seed_traces(ts)
    agents, _ = ts.list_spans("default", type="agent")
    assert [s.span_id for s in agents] == [sid(10 * n) for n in (6, 5, 4, 3, 2, 1)]
    assert [s.span_id for s in ts.list_spans("default", trace_id=tid(2))[0]] == [sid(21), sid(20)]
    assert [s.span_id for s in ts.list_spans("default", name="op31")[0]] == [sid(31)]
    assert [s.span_id for s in ts.list_spans("default", error=True)[0]] == [sid(40)]
    assert len(ts.list_spans("default", service="even")[0]) == 3  # roots only carry "even"
    seen, token = [], ""
    while True:
        page, token = ts.list_spans("default", limit=5, page_token=token)
        seen += page
        if not token:
            break
    assert len(seen) == 12
    starts = [s.start_time_unix_nano for s in seen]
    assert starts == sorted(starts, reverse=True)


def test_feedback_on_traces_and_sessions(ts: TraceStore) -> None:
    ts.add_feedback("default", Feedback(trace_id=tid(1), name="thumbs", value=-1, time_unix_nano=2))
    ts.add_feedback(
        "default", Feedback(trace_id=tid(1), name="label", label="rude", time_unix_nano=1)
    )
    ts.add_feedback("default", Feedback(session_id="s", name="csat", value=4, comment="ok"))
    on_trace = ts.feedback_for("default", trace_id=tid(1))
    assert [(f.name, f.value, f.label) for f in on_trace] == [
        ("label", None, "rude"),
        ("thumbs", -1.0, ""),
    ]
    assert on_trace[1].negative
    (csat,) = ts.feedback_for("default", session_id="s")
    assert (csat.value, csat.comment, csat.source) == (4.0, "ok", "api")
    assert csat.time_unix_nano > 0  # stamped at receipt when not given
    assert len(ts.feedback_for("default", trace_id=tid(1), session_id="s")) == 3
    assert ts.feedback_for("default") == []
    with pytest.raises(UserError, match="trace_id or a session_id"):
        ts.add_feedback("default", Feedback(name="x"))
    with pytest.raises(UserError, match=r"feedback\.name"):
        ts.add_feedback("default", Feedback(trace_id=tid(1), name=""))


def test_feedback_sent_again_is_stored_once(ts: TraceStore) -> None:
    thumbs = Feedback(trace_id=tid(1), name="thumbs", value=-1, time_unix_nano=5)
    assert ts.add_feedback("default", thumbs) is True
    assert ts.add_feedback("default", Feedback(**vars_of(thumbs))) is False  # a retry
    assert ts.add_feedback("other", thumbs) is True  # another project's signal
    # anything that differs makes it another signal
    assert ts.add_feedback("default", Feedback(**{**vars_of(thumbs), "time_unix_nano": 6}))
    assert ts.add_feedback("default", Feedback(**{**vars_of(thumbs), "value": 1}))
    assert ts.add_feedback("default", Feedback(**{**vars_of(thumbs), "source": "span_event"}))
    assert len(ts.feedback_for("default", trace_id=tid(1))) == 4
    assert len(ts.feedback_for("other", trace_id=tid(1))) == 1


def vars_of(feedback: Feedback) -> dict[str, object]:
    return {f.name: getattr(feedback, f.name) for f in dataclasses.fields(feedback)}


def test_delete_expired_by_project_ttl(ts: TraceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traces_module, "DELETE_BATCH", 2)  # several batches per table
    for project in ("a", "b", "c"):
        old = [span(1, i + 1, start_s=0, dur_s=10) for i in range(5)]  # ends at T0 + 10 s
        new = [span(2, i + 1, start_s=100, dur_s=10) for i in range(3)]  # ends at T0 + 110 s
        ts.write_spans(project, old + new)
        ts.upsert_trace(project, summary(old))
        ts.upsert_trace(project, summary(new))
    now_s = T0 / S + 150
    # default TTL 60 s: ended before T0 + 90 s goes (the old trace), the new one stays;
    # "b" keeps everything; "c" has a TTL of 10 s, so both its traces go
    deleted = ts.delete_expired(now_s, 60.0, {"b": None, "c": 10.0})
    assert deleted == (5 + 1) + (5 + 3 + 2)
    assert ts.get_trace("a", tid(1)) is None
    assert [r.trace_id for r in ts.list_traces("a")[0]] == [tid(2)]
    assert len(ts.list_traces("b")[0]) == 2
    assert ts.list_traces("c")[0] == []
    assert ts.delete_expired(now_s, 60.0, {"b": None, "c": 10.0}) == 0
    assert ts.delete_expired(now_s, None) == 0  # no TTL: nothing goes


def test_expired_traces_take_their_policy_scores_with_them(
    ts: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces_module, "DELETE_BATCH", 2)  # several batches, resumed by key
    store = ts.store
    old = [tid(1), tid(3), tid(4)]  # end at T0 + 10 s
    for project in ("a", "b"):
        for n in (1, 2, 3, 4):
            start = 0 if tid(n) in old else 100
            ts.write_spans(project, [span(n, 1, start_s=start, dur_s=10)])
            ts.upsert_trace(project, summary([span(n, 1, start_s=start, dur_s=10)]))
    watch = {p: store.create_run(kind="watch", spec={}, project_id=p).id for p in ("a", "b")}
    graded = store.create_run(kind="score", spec={}, project_id="a").id  # not a policy's

    def scores(run_id: str, trace_ids: list[str]) -> None:
        rows = []
        for index in range(2):  # two evaluators
            for trace_id in trace_ids:
                seq, trial = result_key(trace_id)
                batch = ResultBatch(f"e{index}", f"e{index}", "m", [trace_id], trial=trial)
                batch.set_outcome(0, Outcome.SKIPPED, "x")
                rows.append((index, seq, batch))
        store.write_batches(run_id, rows)

    everything = [tid(n) for n in (1, 2, 3, 4)]
    for run_id in (*watch.values(), graded):
        scores(run_id, everything)
    assert ts.delete_expired(T0 / S + 150, 60.0, {"a": None, "b": None}) == 0
    deleted = ts.delete_expired(T0 / S + 150, 60.0, {"b": None}, score_key=result_key)
    assert deleted == 3 + 3 + 3 * 2  # a's old spans and traces, then 2 scores of each
    assert {r.record_id for _, _, r in store.iter_results(watch["a"])} == {tid(2)}
    assert store.count_results(watch["b"]) == 8  # b keeps everything
    assert store.count_results(graded) == 8  # an offline run's rows are not retention's
    assert ts.delete_expired(T0 / S + 150, 60.0, {"b": None}, score_key=result_key) == 0


def test_feedback_expires_by_when_it_was_received(ts: TraceStore) -> None:
    ts.add_feedback("a", Feedback(trace_id=tid(1), name="x", time_unix_nano=1))
    import time

    assert ts.delete_expired(time.time() + 3600, 7200.0) == 0
    assert ts.delete_expired(time.time() + 3600, 60.0) == 1
    assert ts.feedback_for("a", trace_id=tid(1)) == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.list_traces("default", page_token="nonsense"), "page_token"),
        (
            lambda t: t.list_spans("default", page_token=t.list_traces("default")[1] or "eA"),
            "page_token",
        ),
        (lambda t: t.list_traces("default", limit=0), "limit"),
        (lambda t: t.list_spans("default", limit=1001), "limit"),
        (lambda t: t.list_sessions("default", page_token="WyJ0IiwxLCJ4Il0"), "page_token"),
        (lambda t: t.list_traces("default", attributes={'a"b': "1"}), "attributes"),
        (lambda t: t.list_traces("default", attributes={"": "1"}), "attributes"),
        (lambda t: t.list_traces("default", attributes={str(i): "" for i in range(9)}), "at most"),
        (lambda t: t.write_spans("bad project!", [span(1, 1)]), "project_id"),
        (lambda t: t.upsert_trace("", summary([span(1, 1)])), "project_id"),
    ],
)
def test_bad_input_is_a_user_error_naming_the_field(
    ts: TraceStore, call: object, message: str
) -> None:
    with pytest.raises(UserError, match=message):
        call(ts)  # type: ignore[operator]


def test_a_token_from_another_listing_is_refused(ts: TraceStore) -> None:
    _seed_traces(ts)
    _, token = ts.list_traces("default", limit=1)
    with pytest.raises(UserError, match="page_token"):
        ts.list_spans("default", page_token=token)
