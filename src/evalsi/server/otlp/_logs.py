"""The OTLP logs receiver, for the events of spans: ``POST /v1/logs`` and the gRPC
``opentelemetry.proto.collector.logs.v1.LogsService/Export``.

GenAI instrumentations (OpenTelemetry's ``openai-v2``, ``google-genai``, ``vertexai``...) emit
a call's messages as *log-based events* (``gen_ai.user.message``, ``gen_ai.choice``,
``gen_ai.client.inference.operation.details``) rather than as span events: log records with
an event name and the trace and span ids of the call, exported by the SDK's logs pipeline,
separately from (and often before) the span. Without them such traces would have no content.

A log record is kept when it is the event of a span: a 16-byte trace id, an 8-byte span id
and an event name (the ``event_name`` field, or an ``event.name`` attribute, as older SDKs
send it). It becomes a ``SpanEvent`` of that span: its attributes, plus its body under
``event.body`` (where the GenAI mappers read a message), at its time (else its observed time).
Other log records are rejected with an OTLP partial success that says why, never dropped
silently: evalsi is not a log store.

Answers, limits and the shared in-flight byte budget are those of the trace receiver
(``_receivers``; what both use is in ``_shared``); requests are handled on the event loop
(logs of spans are a small stream beside the spans themselves), not in ingest workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connectrpc.request import RequestContext
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber

from evalsi.core import SpanEvent
from evalsi.server.otlp._decode import (
    _UINT64,
    PROTOBUF,
    _attrs,
    _enum,
    _field,
    _hex,
    _int,
    _json_any,
    _json_attrs,
    _list,
    _obj,
    _str,
    any_value,
    parse_protobuf,
    read_json,
)
from evalsi.server.otlp._shared import (
    INLINE_DECODE_BYTES,
    PROJECT_HEADER,
    InflightBudget,
    RawExport,
    grpc_error,
    project_of,
)
from evalsi.traces import EventSink, LoggedEvent

BODY_KEY = "event.body"
"""The event attribute a log record's body is kept under (the GenAI mappers read it there)."""

_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_NO_SPAN = (
    "without the trace id and span id of a span (evalsi keeps the events of spans; "
    "send other logs to a log store)"
)
_NO_EVENT = "that are not events (no event_name field, no event.name attribute)"
_SEVERITIES: dict[str, int] = dict(SeverityNumber.items())


@dataclass(slots=True)
class DecodedLogs:
    """The span events kept from one logs export request, and how many records were not."""

    events: list[LoggedEvent] = field(default_factory=list)
    rejected: int = 0
    error_message: str = ""


def _kept(
    trace_id: bytes,
    span_id: bytes,
    name: Any,
    time_ns: int,
    attributes: dict[str, Any],
    body: Any,
    reasons: dict[str, int],
) -> LoggedEvent | None:
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE or len(span_id) != 8 or span_id == _ZERO_SPAN:
        reasons[_NO_SPAN] = reasons.get(_NO_SPAN, 0) + 1
        return None
    if not name:
        name = attributes.get("event.name")
    if type(name) is not str or not name:
        reasons[_NO_EVENT] = reasons.get(_NO_EVENT, 0) + 1
        return None
    attributes.pop("event.name", None)
    if body is not None:
        attributes[BODY_KEY] = body
    # a record with no time at all keeps 0 (what identifies a re-sent copy; the store shows
    # when it was received instead)
    return LoggedEvent(trace_id.hex(), span_id.hex(), SpanEvent(name, time_ns, attributes))


def _decoded(events: list[LoggedEvent], reasons: dict[str, int]) -> DecodedLogs:
    message = "; ".join(f"{n} log record(s) {why}" for why, n in reasons.items())
    return DecodedLogs(events, sum(reasons.values()), message)


def decode_logs_request(request: ExportLogsServiceRequest) -> DecodedLogs:
    """The span events of a parsed logs export request."""
    events: list[LoggedEvent] = []
    reasons: dict[str, int] = {}
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                body = any_value(record.body) if record.HasField("body") else None
                kept = _kept(
                    record.trace_id,
                    record.span_id,
                    record.event_name,
                    record.time_unix_nano or record.observed_time_unix_nano,
                    _attrs(record.attributes),
                    body,
                    reasons,
                )
                if kept is not None:
                    events.append(kept)
    return _decoded(events, reasons)


def _json_logs(doc: dict[str, Any]) -> DecodedLogs:
    events: list[LoggedEvent] = []
    reasons: dict[str, int] = {}
    for resource_logs in _list(_field(doc, "resourceLogs", "resource_logs")):
        resource_logs = _obj(resource_logs, "resourceLogs[]")
        for scope_logs in _list(_field(resource_logs, "scopeLogs", "scope_logs")):
            scope_logs = _obj(scope_logs, "scopeLogs[]")
            for record in _list(_field(scope_logs, "logRecords", "log_records")):
                record = _obj(record, "logRecords[]")
                when = _int(_field(record, "timeUnixNano", "time_unix_nano"), _UINT64)
                if not when:
                    observed = _field(record, "observedTimeUnixNano", "observed_time_unix_nano")
                    when = _int(observed, _UINT64)
                # fields read for their shape only: a wrong type fails the body as ParseDict does
                _enum(_field(record, "severityNumber", "severity_number"), _SEVERITIES)
                _str(_field(record, "severityText", "severity_text"))
                kept = _kept(
                    _hex(_field(record, "traceId", "trace_id")),
                    _hex(_field(record, "spanId", "span_id")),
                    _str(_field(record, "eventName", "event_name")),
                    when,
                    _json_attrs(record.get("attributes")),
                    _json_any(record.get("body")),
                    reasons,
                )
                if kept is not None:
                    events.append(kept)
    return _decoded(events, reasons)


def decode_logs_body(raw: bytes, kind: str) -> DecodedLogs:
    """The span events of an uncompressed body of media type ``kind``."""
    if kind == PROTOBUF:
        return decode_logs_request(parse_protobuf(raw, ExportLogsServiceRequest, "log"))
    return read_json(raw, "ExportLogsServiceRequest", _json_logs)


def logs_response(decoded: DecodedLogs) -> ExportLogsServiceResponse:
    """Full success leaves ``partial_success`` unset, as the spec requires."""
    if not decoded.rejected:
        return ExportLogsServiceResponse()
    return ExportLogsServiceResponse(
        partial_success=ExportLogsPartialSuccess(
            rejected_log_records=decoded.rejected, error_message=decoded.error_message
        )
    )


class LogsServiceHandler:
    """``LogsService/Export`` over a sink (errors leave as ``ConnectError``s), and the body of a
    ``POST /v1/logs`` (``export_body``), within the trace receiver's byte ``budget``."""

    def __init__(self, sink: EventSink, budget: InflightBudget) -> None:
        self.sink = sink
        self.budget = budget

    async def export_body(
        self, project: str, raw: bytes, encoding: str
    ) -> ExportLogsServiceResponse:
        decoded = await self._ingest(project, len(raw), lambda: decode_logs_body(raw, encoding))
        return logs_response(decoded)

    async def export(
        self,
        request: ExportLogsServiceRequest | RawExport,
        ctx: RequestContext[Any, ExportLogsServiceResponse],
        /,
    ) -> ExportLogsServiceResponse:
        try:
            project = project_of(ctx.request_headers.get(PROJECT_HEADER))
            if isinstance(request, RawExport):  # the bytes as received
                return await self.export_body(project, request.data, PROTOBUF)
            message = request  # a parsed message (the native gRPC port, tests)
            decoded = await self._ingest(
                project, message.ByteSize(), lambda: decode_logs_request(message)
            )
        except Exception as e:
            raise grpc_error(e, ctx) from e
        return logs_response(decoded)

    async def _ingest(
        self, project: str, size: int, decode: Callable[[], DecodedLogs]
    ) -> DecodedLogs:
        """Budget, decode, then the sink; the budget is given back however it ends."""
        budget = self.budget
        budget.admit(size)
        held = True  # given back once the events are done with, even if the sender goes away
        try:
            # a big body would stall every other request on the loop: decoded in a thread
            decoded = await asyncio.to_thread(decode) if size > INLINE_DECODE_BYTES else decode()
            if decoded.events:
                accepted = asyncio.ensure_future(self.sink.accept_events(project, decoded.events))
                accepted.add_done_callback(lambda done: _give_back(budget, size, done))
                held = False
                await asyncio.shield(accepted)
            return decoded
        finally:
            if held:
                budget.give_back(size)


def _give_back(budget: InflightBudget, size: int, done: asyncio.Future[None]) -> None:
    budget.give_back(size)
    if not done.cancelled():
        done.exception()  # retrieved: the sender may have gone
