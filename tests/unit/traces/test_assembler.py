"""The assembler: a trace completes grace after its root arrives; late spans; orphans; bounds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Span
from evalsi.traces._assembler import Assembler

T1, T2 = "1" * 32, "2" * 32


def span(trace: str, sid: str, parent: str = "") -> Span:
    return Span(trace_id=trace, span_id=sid * 16 if len(sid) == 1 else sid, parent_span_id=parent)


def test_completes_grace_after_the_root_arrives_not_before() -> None:
    a = Assembler(grace_s=5.0)
    assert a.add("p", [span(T1, "b", "a" * 16)], now=100.0) == []
    assert a.due(150.0) == []  # no root yet and within the orphan wait (60 s)
    a.add("p", [span(T1, "a")], now=101.0)  # the root
    assert a.due(105.9) == []
    done = a.due(106.0)
    assert [(d.trace.trace_id, d.reason, len(d.trace.spans)) for d in done] == [
        (T1, "root+grace", 2)
    ]
    assert a.open_traces == 0


def test_spans_arriving_during_the_grace_period_join() -> None:
    a = Assembler(grace_s=5.0)
    a.add("p", [span(T1, "a")], now=0.0)
    a.add("p", [span(T1, "c", "a" * 16)], now=4.0)
    (done,) = a.due(5.0)
    assert {s.span_id for s in done.trace.spans} == {"a" * 16, "c" * 16}


def test_spans_after_completion_are_late_and_do_not_reopen() -> None:
    a = Assembler(grace_s=1.0, late_s=600.0)
    a.add("p", [span(T1, "a")], now=0.0)
    assert len(a.due(1.0)) == 1
    late = a.add("p", [span(T1, "d", "a" * 16)], now=2.0)
    assert [s.span_id for s in late] == ["d" * 16]
    assert a.open_traces == 0
    # after late_s the id is forgotten: a span opens a new assembly
    a.add("p", [span(T2, "a")], now=700.0)
    a.due(701.0)
    assert a.add("p", [span(T1, "e", "a" * 16)], now=702.0) == []
    assert a.open_traces == 1


def test_projects_do_not_share_traces() -> None:
    a = Assembler(grace_s=1.0)
    a.add("p", [span(T1, "a")], now=0.0)
    a.add("q", [span(T1, "b", "a" * 16)], now=0.0)
    done = a.due(1.0)
    assert [(d.trace.project, len(d.trace.spans)) for d in done] == [("p", 1)]
    assert a.get("q", T1) is not None
    assert a.get("p", T1) is None


def test_orphans_complete_after_their_last_span_plus_orphan_wait() -> None:
    a = Assembler(grace_s=1.0, orphan_s=10.0)
    a.add("p", [span(T1, "b", "a" * 16)], now=0.0)
    a.add("p", [span(T1, "c", "a" * 16)], now=8.0)
    assert a.due(10.0) == []  # the wait restarted at 8
    (done,) = a.due(18.0)
    assert done.reason == "orphan"
    assert len(done.trace.spans) == 2


def test_more_than_max_open_evicts_the_oldest_first() -> None:
    a = Assembler(grace_s=100.0, max_open=2)
    for i, t in enumerate(("a" * 32, "b" * 32, "c" * 32)):
        a.add("p", [span(t, "1")], now=float(i))
    done = a.due(3.0)
    assert [(d.trace.trace_id, d.reason) for d in done] == [("a" * 32, "evicted")]
    assert a.open_traces == 2


def test_more_spans_than_max_spans_completes_the_oldest_traces_early() -> None:
    a = Assembler(grace_s=100.0, max_spans=5)
    a.add("p", [span(T1, "1"), span(T1, "2", "1" * 16), span(T1, "3", "1" * 16)], now=0.0)
    a.add("p", [span(T2, "4"), span(T2, "5", "4" * 16)], now=1.0)
    assert a.held_spans == 5
    assert a.due(2.0) == []  # at the bound, not over it
    a.add("p", [span("3" * 32, "6")], now=2.0)  # six spans: the oldest trace goes
    done = a.due(2.0)
    assert [(d.trace.trace_id, d.reason, len(d.trace.spans)) for d in done] == [(T1, "evicted", 3)]
    assert (a.held_spans, a.open_traces) == (3, 2)


def test_held_spans_stay_bounded_however_many_traces_arrive() -> None:
    """Memory is bounded by spans held, not by trace count: 2,000 five-span traces through an
    assembler bounded at 100 spans never hold more than 100 after a tick, and every span
    comes out exactly once."""
    a = Assembler(grace_s=3600.0, orphan_s=3600.0, max_spans=100)
    out = 0
    peak = 0
    for i in range(2000):
        trace = f"{i + 1:032x}"
        root = f"{i + 1:016x}"
        spans = [span(trace, root)] + [
            span(trace, f"{j + 1:04x}{i + 1:012x}", root) for j in range(4)
        ]
        a.add("p", spans, now=float(i))
        out += sum(len(d.trace.spans) for d in a.due(float(i)))
        peak = max(peak, a.held_spans)
    assert peak <= 100
    flushed = sum(len(d.trace.spans) for d in a.flush(2000.0))
    assert out + flushed == 2000 * 5
    assert a.held_spans == 0


def test_flush_completes_everything() -> None:
    a = Assembler()
    a.add("p", [span(T1, "a"), span(T2, "b", "c" * 16)], now=0.0)
    assert sorted(d.trace.trace_id for d in a.flush(0.0)) == [T1, T2]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.booleans(), st.floats(0, 50, allow_nan=False)),
        max_size=60,
    )
)
def test_every_span_is_delivered_exactly_once(arrivals: list[tuple[int, bool, float]]) -> None:
    """Whatever the order and timing, each span ends in exactly one completed trace or is
    reported late; nothing is lost or duplicated."""
    a = Assembler(grace_s=2.0, orphan_s=7.0, late_s=1000.0)
    seen: list[str] = []
    late: list[str] = []
    now = 0.0
    for n, (trace_no, root, dt) in enumerate(sorted(arrivals, key=lambda x: x[2])):
        now = max(now, dt)
        s = Span(
            trace_id=f"{trace_no + 1:032x}",
            span_id=f"{n + 1:016x}",
            parent_span_id="" if root else "f" * 16,
        )
        late += [x.span_id for x in a.add("p", [s], now)]
        seen += [x.span_id for d in a.due(now) for x in d.trace.spans]
    seen += [x.span_id for d in a.flush(now + 1000) for x in d.trace.spans]
    assert sorted(seen + late) == [f"{n + 1:016x}" for n in range(len(arrivals))]


def test_a_resent_span_replaces_its_first_copy() -> None:
    a = Assembler(grace_s=1.0)
    a.add("p", [span(T1, "a"), span(T1, "b", "a" * 16)], now=0.0)
    a.add("p", [span(T1, "b", "a" * 16)], now=0.5)  # the same request again
    assert a.held_spans == 2
    (done,) = a.due(1.0)
    assert sorted(s.span_id for s in done.trace.spans) == ["a" * 16, "b" * 16]
