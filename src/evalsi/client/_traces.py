"""TraceService calls for ``AsyncClient`` (a mixin, as ``_policies`` is for the PolicyService).

``AsyncTraceMixin`` needs what ``AsyncClient`` has: ``_traces`` (its ``TraceServiceClient``),
``_call`` and ``_paged``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import trace_service_pb2 as tr_pb
from evalsi._proto.evalsi.v1alpha1.trace_service_connect import TraceServiceClient
from evalsi.core import Feedback, SessionSummary, Span, TraceSummary
from evalsi.wire import (
    StoredTrace,
    feedback_from_proto,
    feedback_to_proto,
    session_from_proto,
    span_from_proto,
    trace_from_proto,
    trace_summary_from_proto,
)


class AsyncTraceMixin:
    """``list_traces``, ``get_trace``, ``list_sessions``, ``list_spans``, ``post_feedback``."""

    _traces: TraceServiceClient
    _call: Callable[..., Any]
    _paged: Callable[..., Awaitable[list[Any]]]

    async def list_traces(
        self,
        *,
        project_id: str = "",
        limit: int = 50,
        service: str = "",
        since: float | None = None,
        until: float | None = None,
        session_id: str = "",
        error: bool | None = None,
        attributes: Mapping[str, str] | None = None,
        name: str = "",
    ) -> list[TraceSummary]:
        request = tr_pb.ListTracesRequest(
            project_id=project_id,
            service=service,
            session_id=session_id,
            attributes=[f"{k}={v}" for k, v in (attributes or {}).items()],
            name=name,
        )
        _set_filters(request, since, until, error)
        found = await self._paged(self._traces.list_traces, request, "traces", limit)
        return [trace_summary_from_proto(t) for t in found]

    async def get_trace(self, trace_id: str, *, project_id: str = "") -> StoredTrace:
        request = tr_pb.GetTraceRequest(project_id=project_id, trace_id=trace_id)
        response = await self._call(self._traces.get_trace, request)
        return trace_from_proto(response.trace, project_id or "default")

    async def list_sessions(
        self,
        *,
        project_id: str = "",
        limit: int = 50,
        service: str = "",
        since: float | None = None,
        until: float | None = None,
        user_id: str = "",
    ) -> list[SessionSummary]:
        request = tr_pb.ListSessionsRequest(project_id=project_id, service=service, user_id=user_id)
        _set_filters(request, since, until)
        found = await self._paged(self._traces.list_sessions, request, "sessions", limit)
        return [session_from_proto(s) for s in found]

    async def list_spans(
        self,
        *,
        project_id: str = "",
        limit: int = 50,
        trace_id: str = "",
        type: str = "",
        name: str = "",
        service: str = "",
        since: float | None = None,
        until: float | None = None,
        error: bool | None = None,
    ) -> list[Span]:
        request = tr_pb.ListSpansRequest(
            project_id=project_id, trace_id=trace_id, type=type, name=name, service=service
        )
        _set_filters(request, since, until, error)
        found = await self._paged(self._traces.list_spans, request, "spans", limit)
        return [span_from_proto(s) for s in found]

    async def post_feedback(self, feedback: Feedback, *, project_id: str = "") -> Feedback:
        """Attach a late signal to a trace or a session (the server stores a signal once: the
        same fields and time again are the same signal). Without ``time_unix_nano`` it is
        stamped with the time now; to retry a call that may have reached the server, give a
        time, or send the same stamped feedback again, so the retry is not a second signal."""
        if not feedback.time_unix_nano:
            feedback = dataclasses.replace(feedback, time_unix_nano=time.time_ns())
        request = tr_pb.PostFeedbackRequest(
            project_id=project_id, feedback=feedback_to_proto(feedback)
        )
        response = await self._call(self._traces.post_feedback, request)
        return feedback_from_proto(response.feedback)


def _set_filters(
    request: Any, since: float | None, until: float | None, error: bool | None = None
) -> None:
    """``since``/``until`` are unix seconds; None leaves a filter unset."""
    if since is not None:
        request.since.FromNanoseconds(round(since * 1e9))
    if until is not None:
        request.until.FromNanoseconds(round(until * 1e9))
    if error is not None:
        request.error = error
