"""Where runs and results live: SQLite embedded by default or PostgreSQL, one schema.

Exports are loaded on first use, so that the writer process (which needs only ``_rows``)
starts without importing SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalsi.store._calibrations import (
        Calibration,
        CalibrationKey,
        latest_calibration,
        list_calibrations,
        save_calibration,
    )
    from evalsi.store._runs import DEFAULT_PROJECT, RunInfo, check_project_id, new_run_id
    from evalsi.store._sql import SqlStore
    from evalsi.store._trace_rows import span_rows
    from evalsi.store._trace_scores import TraceScore, trace_scores
    from evalsi.store._traces import SessionSummary, TraceStore, TraceSummary, preview
    from evalsi.store._writer import BackgroundWriter

DEFAULT_STORE = ".evalsi/evalsi.db"

__all__ = [
    "DEFAULT_PROJECT",
    "DEFAULT_STORE",
    "BackgroundWriter",
    "Calibration",
    "CalibrationKey",
    "RunInfo",
    "SessionSummary",
    "SqlStore",
    "TraceScore",
    "TraceStore",
    "TraceSummary",
    "check_project_id",
    "latest_calibration",
    "list_calibrations",
    "new_run_id",
    "preview",
    "save_calibration",
    "span_rows",
    "trace_scores",
]

_WHERE = {
    "BackgroundWriter": "evalsi.store._writer",
    "Calibration": "evalsi.store._calibrations",
    "CalibrationKey": "evalsi.store._calibrations",
    "latest_calibration": "evalsi.store._calibrations",
    "list_calibrations": "evalsi.store._calibrations",
    "save_calibration": "evalsi.store._calibrations",
    "DEFAULT_PROJECT": "evalsi.store._runs",
    "RunInfo": "evalsi.store._runs",
    "check_project_id": "evalsi.store._runs",
    "SqlStore": "evalsi.store._sql",
    "SessionSummary": "evalsi.store._traces",
    "TraceStore": "evalsi.store._traces",
    "TraceSummary": "evalsi.store._traces",
    "preview": "evalsi.store._traces",
    "span_rows": "evalsi.store._trace_rows",
    "new_run_id": "evalsi.store._runs",
    "TraceScore": "evalsi.store._trace_scores",
    "trace_scores": "evalsi.store._trace_scores",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'evalsi.store' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
