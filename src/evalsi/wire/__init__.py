"""The boundary between the domain types of ``evalsi.core`` and the wire schema (``evalsi._proto``).

Only edges (server, client, cluster workers, plugin host) import this package; everything below
them works on core types.
"""

from evalsi.wire._catalog import (
    ConnectorInfo,
    PackInfo,
    connector_from_proto,
    connector_to_proto,
    pack_from_proto,
    pack_to_proto,
)
from evalsi.wire._compare import comparison_from_proto, comparison_to_proto
from evalsi.wire._json import (
    struct_from_proto,
    struct_to_proto,
    value_from_proto,
    value_to_proto,
)
from evalsi.wire._records import (
    content_from_proto,
    content_to_proto,
    record_from_proto,
    record_to_proto,
)
from evalsi.wire._results import (
    manifest_from_proto,
    manifest_to_proto,
    result_from_proto,
    result_to_proto,
    score_from_proto,
    score_to_proto,
    summary_from_proto,
    summary_to_proto,
)
from evalsi.wire._runs import (
    Progress,
    gate_from_proto,
    gate_to_proto,
    run_from_proto,
    run_info_from_proto,
    run_result_to_proto,
    run_to_proto,
)
from evalsi.wire._traces import (
    ScoreRow,
    StoredTrace,
    attr_json,
    feedback_from_proto,
    feedback_to_proto,
    flat_scores,
    session_from_proto,
    session_to_proto,
    span_from_proto,
    span_to_proto,
    trace_from_proto,
    trace_summary_from_proto,
    trace_summary_to_proto,
    trace_to_proto,
)
from evalsi.wire._warnings import (
    cause_from_proto,
    cause_to_proto,
    warning_from_proto,
    warning_to_proto,
    warnings_from_proto,
)

__all__ = [
    "ConnectorInfo",
    "PackInfo",
    "Progress",
    "ScoreRow",
    "StoredTrace",
    "attr_json",
    "cause_from_proto",
    "cause_to_proto",
    "comparison_from_proto",
    "comparison_to_proto",
    "connector_from_proto",
    "connector_to_proto",
    "content_from_proto",
    "content_to_proto",
    "feedback_from_proto",
    "feedback_to_proto",
    "flat_scores",
    "gate_from_proto",
    "gate_to_proto",
    "manifest_from_proto",
    "manifest_to_proto",
    "pack_from_proto",
    "pack_to_proto",
    "record_from_proto",
    "record_to_proto",
    "result_from_proto",
    "result_to_proto",
    "run_from_proto",
    "run_info_from_proto",
    "run_result_to_proto",
    "run_to_proto",
    "score_from_proto",
    "score_to_proto",
    "session_from_proto",
    "session_to_proto",
    "span_from_proto",
    "span_to_proto",
    "struct_from_proto",
    "struct_to_proto",
    "summary_from_proto",
    "summary_to_proto",
    "trace_from_proto",
    "trace_summary_from_proto",
    "trace_summary_to_proto",
    "trace_to_proto",
    "value_from_proto",
    "value_to_proto",
    "warning_from_proto",
    "warning_to_proto",
    "warnings_from_proto",
]
