"""Where runs and results live: SQLite embedded by default or PostgreSQL, one schema.

Exports are loaded on first use, so that the writer process (which needs only ``_rows``)
starts without importing SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.core import RunInfo, SessionSummary, TraceScore, TraceSummary, preview
    from evalsi.store._access import (
        delete_binding,
        expire_audit,
        insert_binding,
        insert_key,
        insert_project,
        list_keys,
        load_access,
        read_audit,
        revoke_key,
        write_audit,
    )
    from evalsi.store._calibrations import (
        CalibrationKey,
        latest_calibration,
        list_calibrations,
        save_calibration,
    )
    from evalsi.store._leases import LeaseHolder, acquire_lease, lease_holder, release_lease
    from evalsi.store._objects import (
        ObjectError,
        ObjectRef,
        ObjectStore,
        ObjectStoreConfig,
        sha256_hex,
    )
    from evalsi.store._owner import set_lease
    from evalsi.store._reviews import APPROVALS, Review, read_reviews, save_reviews
    from evalsi.store._rows import OutputRow, TaskResults, score_dict, scores_from_dicts
    from evalsi.store._runs import DEFAULT_PROJECT, check_project_id, new_run_id
    from evalsi.store._shards import (
        cancel_shards,
        cancelled_among,
        finish_shard,
        queue_shards,
        shard_counts,
        start_shard,
        unavailable,
    )
    from evalsi.store._shared_limits import (
        prune_rate,
        record_spend,
        session_spend,
        settle_rate,
        take_rate,
    )
    from evalsi.store._sql import SqlStore
    from evalsi.store._trace_claims import (
        claim_counts,
        claim_due,
        finish_claims,
        reap_claims,
        release_claims,
    )
    from evalsi.store._trace_rows import row_bytes, span_rows, view_dict
    from evalsi.store._trace_scores import trace_scores
    from evalsi.store._traces import TraceStore
    from evalsi.store._writer import BackgroundWriter

DEFAULT_STORE = ".evalsi/evalsi.db"

__all__ = [
    "APPROVALS",
    "DEFAULT_PROJECT",
    "DEFAULT_STORE",
    "BackgroundWriter",
    "CalibrationKey",
    "LeaseHolder",
    "ObjectError",
    "ObjectRef",
    "ObjectStore",
    "ObjectStoreConfig",
    "OutputRow",
    "Review",
    "RunInfo",
    "SessionSummary",
    "SqlStore",
    "TaskResults",
    "TraceScore",
    "TraceStore",
    "TraceSummary",
    "acquire_lease",
    "cancel_shards",
    "cancelled_among",
    "check_project_id",
    "claim_counts",
    "claim_due",
    "delete_binding",
    "expire_audit",
    "finish_claims",
    "finish_shard",
    "insert_binding",
    "insert_key",
    "insert_project",
    "latest_calibration",
    "lease_holder",
    "list_calibrations",
    "list_keys",
    "load_access",
    "new_run_id",
    "preview",
    "prune_rate",
    "queue_shards",
    "read_audit",
    "read_reviews",
    "reap_claims",
    "record_spend",
    "release_claims",
    "release_lease",
    "revoke_key",
    "row_bytes",
    "save_calibration",
    "save_reviews",
    "score_dict",
    "scores_from_dicts",
    "session_spend",
    "set_lease",
    "settle_rate",
    "sha256_hex",
    "shard_counts",
    "span_rows",
    "start_shard",
    "take_rate",
    "trace_scores",
    "unavailable",
    "view_dict",
    "write_audit",
]

# Exports are imported on first use (core/_lazy.py).
__getattr__ = lazy_exports(__name__, __file__)
