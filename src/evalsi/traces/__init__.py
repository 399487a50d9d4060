"""The Watch way in: semantic-convention mappers, trace assembly, redaction, online policies.

Spans arrive decoded (the OTLP receiver at the server's edge builds ``evalsi.core.Span``),
and so do span events sent as OTLP log records (``LoggedEvent``); everything here is plain
Python over those objects.
"""

from __future__ import annotations

from evalsi.traces._assembler import Assembler, Completed
from evalsi.traces._feedback import check_feedback, feedback_from_events
from evalsi.traces._group_writer import store_failure
from evalsi.traces._ingest import Ingest, IngestStats, record_row
from evalsi.traces._mappers import CONVENTIONS, normalize, normalize_all
from evalsi.traces._prepare import Batch, prepare
from evalsi.traces._rebuild import summarize
from evalsi.traces._records import trace_to_record
from evalsi.traces._redact import RedactionRule, Redactor, parse_rules
from evalsi.traces._refs import SpanRef, ref_of, summarize_refs
from evalsi.traces._sink import BatchSink, EventSink, LoggedEvent, Overloaded, SpanSink

__all__ = [
    "CONVENTIONS",
    "Assembler",
    "Batch",
    "BatchSink",
    "Completed",
    "EventSink",
    "Ingest",
    "IngestStats",
    "LoggedEvent",
    "Overloaded",
    "RedactionRule",
    "Redactor",
    "SpanRef",
    "SpanSink",
    "check_feedback",
    "feedback_from_events",
    "normalize",
    "normalize_all",
    "parse_rules",
    "prepare",
    "record_row",
    "ref_of",
    "store_failure",
    "summarize",
    "summarize_refs",
    "trace_to_record",
]
