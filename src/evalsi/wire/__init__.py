"""The boundary between the domain types of ``evalsi.core`` and the wire schema (``evalsi._proto``).

Only edges (server, client, cluster workers, plugin host) import this package; everything below
them works on core types.
"""

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
    evaluator_ref_from_proto,
    evaluator_ref_to_proto,
    manifest_from_proto,
    manifest_to_proto,
    result_from_proto,
    result_to_proto,
    score_from_proto,
    score_to_proto,
    summary_from_proto,
    summary_to_proto,
)

__all__ = [
    "content_from_proto",
    "content_to_proto",
    "evaluator_ref_from_proto",
    "evaluator_ref_to_proto",
    "manifest_from_proto",
    "manifest_to_proto",
    "record_from_proto",
    "record_to_proto",
    "result_from_proto",
    "result_to_proto",
    "score_from_proto",
    "score_to_proto",
    "struct_from_proto",
    "struct_to_proto",
    "summary_from_proto",
    "summary_to_proto",
    "value_from_proto",
    "value_to_proto",
]
