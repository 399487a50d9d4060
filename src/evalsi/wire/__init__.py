"""The boundary between the domain types of ``evalsi.core`` and the wire schema (``evalsi._proto``).

Only edges (server, client, cluster workers, plugin host) import this package; everything below
them works on core types. The harness protocol's gRPC client and server (``connect_harness``,
``serve_harness``) need ``grpcio`` (``evalsi[agents]``) and load on first use.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from evalsi.core import UserError, lazy_exports
from evalsi.wire._catalog import (
    ConnectorInfo,
    DatasetInfo,
    DatasetPage,
    PackInfo,
    connector_from_proto,
    connector_to_proto,
    dataset_from_proto,
    dataset_page_from_proto,
    pack_from_proto,
    pack_to_proto,
)
from evalsi.wire._compare import comparison_from_proto, comparison_to_proto
from evalsi.wire._json import (
    message_document,
    struct_from_proto,
    struct_to_proto,
    timestamp,
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
from evalsi.wire._reviews import review_from_proto, review_to_proto
from evalsi.wire._runs import (
    Progress,
    category_from_proto,
    category_to_proto,
    gate_from_proto,
    gate_to_proto,
    run_from_proto,
    run_info_from_proto,
    run_result_to_proto,
    run_to_proto,
)
from evalsi.wire._tasks import task_from_proto, task_to_proto
from evalsi.wire._traces import (
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

if TYPE_CHECKING:
    from evalsi.agents import Harness
    from evalsi.specs import HarnessSpec
    from evalsi.wire._harness import SOCKET_ENV, RemoteHarness, connect_harness, serve_harness


def remote_harness(
    spec: HarnessSpec, where: str
) -> contextlib.AbstractAsyncContextManager[Harness]:
    """``connect_harness``, or a ``UserError`` naming the extra when ``grpcio`` is missing: what
    the entry points hand the run engine as its ``remote_harness``."""
    try:
        from evalsi.wire._harness import connect_harness
    except ImportError as e:
        raise UserError(
            f"{where}: a harness in another process needs {e.name or 'grpcio'}",
            hint="pip install 'evalsi[agents]'",
        ) from None
    return connect_harness(spec, where)


__getattr__ = lazy_exports(__name__, __file__)

__all__ = [
    "SOCKET_ENV",
    "ConnectorInfo",
    "DatasetInfo",
    "DatasetPage",
    "PackInfo",
    "Progress",
    "RemoteHarness",
    "StoredTrace",
    "attr_json",
    "category_from_proto",
    "category_to_proto",
    "cause_from_proto",
    "cause_to_proto",
    "comparison_from_proto",
    "comparison_to_proto",
    "connect_harness",
    "connector_from_proto",
    "connector_to_proto",
    "content_from_proto",
    "content_to_proto",
    "dataset_from_proto",
    "dataset_page_from_proto",
    "feedback_from_proto",
    "feedback_to_proto",
    "flat_scores",
    "gate_from_proto",
    "gate_to_proto",
    "manifest_from_proto",
    "manifest_to_proto",
    "message_document",
    "pack_from_proto",
    "pack_to_proto",
    "record_from_proto",
    "record_to_proto",
    "remote_harness",
    "result_from_proto",
    "result_to_proto",
    "review_from_proto",
    "review_to_proto",
    "run_from_proto",
    "run_info_from_proto",
    "run_result_to_proto",
    "run_to_proto",
    "score_from_proto",
    "score_to_proto",
    "serve_harness",
    "session_from_proto",
    "session_to_proto",
    "span_from_proto",
    "span_to_proto",
    "struct_from_proto",
    "struct_to_proto",
    "summary_from_proto",
    "summary_to_proto",
    "task_from_proto",
    "task_to_proto",
    "timestamp",
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
