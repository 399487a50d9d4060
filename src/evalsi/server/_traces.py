"""TraceService: reading back the traces received over OTLP, and posting feedback.

Every request names its project (empty: ``default``) and sees only that project's rows. The
store's queries are blocking, so they run in a worker thread. Each returned trace carries what
the project's online policies gave it (``TraceSummary.scores``): one more query per page, keyed
by the trace ids' result keys (``store.trace_scores``).
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
import time
from typing import Any

from connectrpc.request import RequestContext

from evalsi._proto.evalsi.v1alpha1 import trace_service_pb2 as pb
from evalsi.core import SPAN_TYPES, NotFoundError, Trace, UserError
from evalsi.policies import result_key
from evalsi.server._runs import _page_size, _project
from evalsi.server._state import ServerState
from evalsi.store import TraceScore, TraceStore, trace_scores
from evalsi.traces import normalize, record_row
from evalsi.wire import (
    feedback_from_proto,
    feedback_to_proto,
    session_to_proto,
    span_to_proto,
    trace_summary_to_proto,
    trace_to_proto,
)

DEFAULT_PAGE = 50
MAX_PAGE = 1000
_TRACE_ID = re.compile(r"[0-9a-f]{32}")


class TraceHandler:
    """Implements the generated ``TraceService`` protocol over the server's store.

    Uses ``state.trace_store`` when the server set one (the store its OTLP ingest writes), else
    a ``TraceStore`` of ``state.store`` of its own.
    """

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._own: TraceStore | None = None

    @property
    def traces(self) -> TraceStore:
        shared = getattr(self.state, "trace_store", None)
        if isinstance(shared, TraceStore):
            return shared
        if self._own is None:
            self._own = TraceStore(self.state.store, views=normalize)
        return self._own

    async def list_traces(
        self, request: pb.ListTracesRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ListTracesResponse:
        since, until = _range(request)
        project = _project(request.project_id)
        query = functools.partial(
            self.traces.list_traces,
            project,
            service=request.service or None,
            since_ns=since,
            until_ns=until,
            session_id=request.session_id or None,
            error=request.error if request.HasField("error") else None,
            attributes=_attributes(request.attributes),
            name=request.name or None,
            limit=_page_size(request.page_size, DEFAULT_PAGE, MAX_PAGE),
            page_token=request.page_token,
        )

        def read() -> pb.ListTracesResponse:
            rows, token = query()
            scores = self._scores(project, [r.trace_id for r in rows])
            out = pb.ListTracesResponse(next_page_token=token)
            out.traces.extend(trace_summary_to_proto(r, scores.get(r.trace_id, ())) for r in rows)
            return out

        return await asyncio.to_thread(read)

    async def get_trace(
        self, request: pb.GetTraceRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.GetTraceResponse:
        project = _project(request.project_id)
        trace_id = _trace_id(request.trace_id)

        def read() -> pb.GetTraceResponse:
            store = self.traces
            trace = store.get_trace(project, trace_id)
            summary = store.trace_summary(project, trace_id)
            if trace is None and summary is None:
                raise NotFoundError(
                    f"trace_id: no trace {trace_id} in project {project!r}",
                    hint="traces are kept for the server's retention period",
                )
            if trace is None:  # its spans expired before its summary
                trace = Trace(trace_id, project, feedback=store.feedback_for(project, trace_id))
            elif summary is not None and summary.record is None:
                summary.record = record_row(trace)
            scores = self._scores(project, [trace_id]).get(trace_id, [])
            return pb.GetTraceResponse(trace=trace_to_proto(trace, summary, scores))

        return await asyncio.to_thread(read)

    def _scores(self, project: str, trace_ids: list[str]) -> dict[str, list[TraceScore]]:
        """The policy results of these traces (blocking: call from the worker thread)."""
        return trace_scores(self.state.store, project, {t: result_key(t) for t in trace_ids})

    async def list_sessions(
        self, request: pb.ListSessionsRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ListSessionsResponse:
        since, until = _range(request)
        rows, token = await asyncio.to_thread(
            self.traces.list_sessions,
            _project(request.project_id),
            service=request.service or None,
            since_ns=since,
            until_ns=until,
            user_id=request.user_id or None,
            limit=_page_size(request.page_size, DEFAULT_PAGE, MAX_PAGE),
            page_token=request.page_token,
        )
        out = pb.ListSessionsResponse(next_page_token=token)
        out.sessions.extend(session_to_proto(r) for r in rows)
        return out

    async def list_spans(
        self, request: pb.ListSpansRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ListSpansResponse:
        if request.type and request.type not in SPAN_TYPES:
            raise UserError(f"type: {request.type!r} is not one of {', '.join(SPAN_TYPES)}")
        since, until = _range(request)
        rows, token = await asyncio.to_thread(
            self.traces.list_spans,
            _project(request.project_id),
            trace_id=_trace_id(request.trace_id) if request.trace_id else None,
            type=request.type or None,
            name=request.name or None,
            service=request.service or None,
            since_ns=since,
            until_ns=until,
            error=request.error if request.HasField("error") else None,
            limit=_page_size(request.page_size, DEFAULT_PAGE, MAX_PAGE),
            page_token=request.page_token,
        )
        out = pb.ListSpansResponse(next_page_token=token)
        out.spans.extend(span_to_proto(s) for s in rows)
        return out

    async def post_feedback(
        self, request: pb.PostFeedbackRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.PostFeedbackResponse:
        project = _project(request.project_id)
        if not request.HasField("feedback"):
            raise UserError("feedback: required (trace_id or session_id, name, value or label)")
        # Checked before use: an out-of-range time overflows the int64 columns and key hashing.
        nanos_of(request.feedback, "time", "feedback.time")
        feedback = feedback_from_proto(request.feedback)
        if not feedback.trace_id and not feedback.session_id:
            raise UserError("feedback: give a trace_id or a session_id to attach it to")
        if feedback.trace_id:
            feedback.trace_id = _trace_id(feedback.trace_id, "feedback.trace_id")
        if not feedback.name:
            raise UserError("feedback.name: required (e.g. thumbs, csat, label)")
        if len(feedback.name) > 256:
            raise UserError("feedback.name: at most 256 characters")
        if feedback.value is not None and not math.isfinite(feedback.value):
            raise UserError(f"feedback.value: expected a finite number, got {feedback.value}")
        feedback.source = "api"
        feedback.time_unix_nano = feedback.time_unix_nano or time.time_ns()
        ingest = getattr(self.state, "ingest", None)
        if ingest is not None:  # joins an open trace, or triggers delayed evaluators
            await ingest.feedback(project, feedback)
        else:
            await asyncio.to_thread(self.traces.add_feedback, project, feedback)
        return pb.PostFeedbackResponse(feedback=feedback_to_proto(feedback))


def _trace_id(value: str, field: str = "trace_id") -> str:
    lowered = value.lower()
    if not _TRACE_ID.fullmatch(lowered):
        raise UserError(f"{field}: expected 32 hex digits, got {value!r}")
    return lowered


# Span times are unix nanoseconds in signed 64-bit columns.
_MAX_NS = 2**63 - 1


def _range(request: Any) -> tuple[int | None, int | None]:
    since = nanos_of(request, "since")
    until = nanos_of(request, "until")
    if since is not None and until is not None and until <= since:
        raise UserError("until: must be after since")
    return since, until


def nanos_of(request: Any, name: str, field: str = "") -> int | None:
    """A request's timestamp field in unix nanoseconds, refused (naming ``field``) outside
    what a signed 64-bit integer holds; ``None`` when unset."""
    if not request.HasField(name):
        return None
    nanos = int(getattr(request, name).ToNanoseconds())
    if not 0 <= nanos <= _MAX_NS:
        raise UserError(
            f"{field or name}: expected a time between 1970-01-01 and 2262-04-11 (unix "
            "nanoseconds fit a signed 64-bit integer)"
        )
    return nanos


def _attributes(items: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = str(item).partition("=")
        if not eq or not key:
            raise UserError(f"attributes: expected key=value, got {item!r}")
        out[key] = value
    return out
