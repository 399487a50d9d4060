"""Feedback as span events, and the checks on feedback posted to the API."""

from __future__ import annotations

import math

import pytest

from evalsi.core import Feedback, Span, SpanEvent, UserError
from evalsi.traces._feedback import check_feedback, feedback_from_events

TID = "ab" * 16


def test_feedback_events_become_feedback_on_the_span_trace() -> None:
    s = Span(
        trace_id=TID,
        span_id="1" * 16,
        end_time_unix_nano=99,
        events=[
            SpanEvent("evalsi.feedback", 5, {"feedback.value": "down", "feedback.comment": "no"}),
            SpanEvent("feedback", 0, {"feedback.value": 0.5, "feedback.name": "stars"}),
            SpanEvent("feedback", 0, {"feedback.label": "wrong-tool"}),
            SpanEvent("exception", 0, {"feedback.value": 1}),  # not a feedback event
            SpanEvent("feedback", 0, {"feedback.value": "maybe"}),  # nothing usable
        ],
    )
    got = feedback_from_events(s)
    assert [(f.name, f.value, f.label, f.time_unix_nano) for f in got] == [
        ("feedback", -1.0, "", 5),
        ("stars", 0.5, "", 99),
        ("feedback", None, "wrong-tool", 99),
    ]
    assert got[0].negative
    assert not got[1].negative
    assert all(f.trace_id == TID and f.source == "span_event" for f in got)


@pytest.mark.parametrize(
    ("fb", "message"),
    [
        (Feedback(value=1.0), "give trace_id or session_id"),
        (Feedback(trace_id="xyz", value=1.0), "feedback.trace_id: expected 32"),
        (Feedback(trace_id=TID, value=math.nan), "feedback.value: expected a finite"),
        (Feedback(trace_id=TID), "give a value"),
        (Feedback(session_id="s", value=1.0, comment="x" * 5000), "feedback.comment"),
    ],
)
def test_bad_feedback_names_the_field(fb: Feedback, message: str) -> None:
    with pytest.raises(UserError) as e:
        check_feedback(fb)
    assert message in str(e.value)


def test_good_feedback_passes() -> None:
    fb = Feedback(session_id="s1", label="resolved")
    assert check_feedback(fb) is fb
