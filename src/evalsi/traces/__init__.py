"""The Watch way in: semantic-convention mappers, trace assembly, redaction, ingest.

Spans arrive decoded (the OTLP receiver at the server's edge builds ``evalsi.core.Span``),
and so do span events sent as OTLP log records (``LoggedEvent``); everything here is plain
Python over those objects. Online policies (what is done with completed traces) live in
``evalsi.policies``.
"""

from __future__ import annotations

from evalsi.traces._group_writer import store_failure
from evalsi.traces._ingest import Ingest
from evalsi.traces._mappers import normalize
from evalsi.traces._prepare import Batch, prepare
from evalsi.traces._records import record_row
from evalsi.traces._redact import RedactionRule, Redactor, parse_rules
from evalsi.traces._shared import SharedCompletion, SharedStats
from evalsi.traces._sink import BatchSink, EventSink, LoggedEvent, Overloaded, SpanSink

__all__ = [
    "Batch",
    "BatchSink",
    "EventSink",
    "Ingest",
    "LoggedEvent",
    "Overloaded",
    "RedactionRule",
    "Redactor",
    "SharedCompletion",
    "SharedStats",
    "SpanSink",
    "normalize",
    "parse_rules",
    "prepare",
    "record_row",
    "store_failure",
]
