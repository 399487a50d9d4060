"""What a listing reports of runs, traces and sessions: the values ``evalsi runs`` and
``evalsi traces`` print, whether a store read them or a server sent them (``wire`` builds them
from its messages, so a client never reads a store's rows)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from evalsi.core._score import EvaluationResult, Score
from evalsi.core._trace import Trace

PREVIEW_CHARS = 280
"""A trace summary's input and output previews are cut to this many characters."""


def preview(text: str) -> str:
    """``text`` cut to ``PREVIEW_CHARS``, marked with an ellipsis when cut."""
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


@dataclass(slots=True)
class RunInfo:
    """A run: its kind, status, times, spec and summary (the owner fields are a store's)."""

    id: str
    kind: str
    status: str
    created_at: float
    name: str = ""
    finished_at: float | None = None
    records: int = 0
    spec: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    error: str | None = None
    pid: int | None = None
    project_id: str = "default"
    tenant_id: str = ""  # reserved for multi-tenancy: "" until auth arrives
    host: str | None = None
    heartbeat_at: float | None = None
    created_by: str = ""  # the principal that started it (provider/subject); "" without auth

    @property
    def evaluators(self) -> list[dict[str, Any]]:
        return list(self.spec.get("evaluators", []))


@dataclass(slots=True)
class TraceSummary:
    """One assembled trace: its root, times, size, status and previews."""

    trace_id: str
    service: str = ""
    root_name: str = ""
    start_time_unix_nano: int = 0
    end_time_unix_nano: int = 0
    duration_ms: float = 0.0
    span_count: int = 0
    error: bool = False
    session_id: str = ""
    user_id: str = ""
    input_preview: str = ""
    output_preview: str = ""
    # the assembled Record as JSON-able data (None in listings, which leave it out)
    record: dict[str, Any] | None = None
    completed_at: float = 0.0  # unix seconds
    # the online policies' scored results, each tagged with metadata policy/evaluator/run_id
    scores: list[Score] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        trace: Trace,
        *,
        record: dict[str, Any] | None = None,
        user_id: str = "",
        input_preview: str = "",
        output_preview: str = "",
        completed_at: float | None = None,
    ) -> TraceSummary:
        """The summary of an assembled trace (previews are cut to ``PREVIEW_CHARS``)."""
        root = trace.root
        return cls(
            trace_id=trace.trace_id,
            service=trace.service,
            root_name=root.name if root is not None else "",
            start_time_unix_nano=trace.start_time_unix_nano,
            end_time_unix_nano=trace.end_time_unix_nano,
            duration_ms=trace.duration_ms,
            span_count=len(trace.spans),
            error=trace.error,
            session_id=trace.session_id,
            user_id=user_id,
            input_preview=preview(input_preview),
            output_preview=preview(output_preview),
            record=record,
            completed_at=time.time() if completed_at is None else completed_at,
        )


@dataclass(slots=True)
class SessionSummary:
    """The traces of one session id: how many, when, how many failed."""

    session_id: str
    trace_count: int
    error_count: int
    first_start_unix_nano: int
    last_end_unix_nano: int
    user_id: str = ""  # one of the session's user ids (sessions rarely have several)


@dataclass(frozen=True, slots=True)
class TraceScore:
    """One evaluator's result on a trace under a policy version (its ``watch`` run)."""

    policy: str
    run_id: str
    result: EvaluationResult
