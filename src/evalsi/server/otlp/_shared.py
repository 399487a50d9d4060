"""What the OTLP receivers (traces, ``_receivers``; logs, ``_logs``) share: their services and
paths, the in-flight byte budget, the project header, the OTLP/HTTP export route and the error
mapping of both transports, and the gRPC ``Export`` app with its codec (``RawExport``: a
request's bytes as received).

Answers follow the OTLP specification; ``_receivers`` describes them.
"""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication, Endpoint
from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import BadRequest, RetryInfo  # type: ignore[import-untyped]
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest as ExportLogsRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from protobuf.wkt import Any as WktAny
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from evalsi.core import UserError
from evalsi.server._errors import OversizeError, http_status, to_connect_error, user_message
from evalsi.server._state import DEFAULT_PROJECT
from evalsi.server.otlp._decode import (
    JSON,
    PROTOBUF,
    BodyTooLarge,
    UnsupportedMediaType,
    inflate,
    media_type,
)
from evalsi.server.protocol import read_body
from evalsi.store import check_project_id
from evalsi.traces import Overloaded

if TYPE_CHECKING:
    from evalsi.server._metrics import Metrics

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
TRACES_PATH = "/v1/traces"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"  # _logs
LOGS_PATH = "/v1/logs"
PROJECT_HEADER = "x-evalsi-project"
# The trailer the OpenTelemetry gRPC exporters read their back-off from (besides the
# RetryInfo in grpc-status-details-bin, which other clients read).
RETRY_INFO_TRAILER = "google.rpc.retryinfo-bin"
# Requests up to this size (decompressed) are decoded on the event loop: ~3 ms per 100 kB, so
# at most ~30 ms of stall; a thread hop costs more than that saves on the usual 512-span batch.
INLINE_DECODE_BYTES = 1024 * 1024
# Seconds a sender waits when the in-flight byte budget is full.
INFLIGHT_RETRY_AFTER_S = 1.0
_HTTP_PROTOCOL = "otlp_http"
# google.rpc.Status.code numbers: connectrpc lists the codes in gRPC's order, from CANCELLED=1.
_GRPC_STATUS = {code: number for number, code in enumerate(Code, start=1)}


class InflightBudget:
    """The decompressed bytes of export requests being ingested now, against a limit.

    One request alone is always admitted (however big, below the body cap), so a limit below
    the body cap slows senders down but never locks one out. Used from one event loop only.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> bool:
        if self.used and self.used + size > self.limit:
            return False
        self.used += size
        return True

    def admit(self, size: int) -> None:
        """``take``, or ``Overloaded`` (503 / UNAVAILABLE with a retry delay) when full."""
        if not self.take(size):
            raise Overloaded(
                f"the server is ingesting {self.used} bytes of telemetry, its limit is "
                f"{self.limit} (traces.otlp.maxInflightBytes)",
                retry_after_s=INFLIGHT_RETRY_AFTER_S,
            )

    def give_back(self, size: int) -> None:
        self.used -= size


def project_of(header: str | None) -> str:
    """The project named by ``x-evalsi-project`` (``default`` without one)."""
    if header is None or header == "":
        return DEFAULT_PROJECT
    try:
        return check_project_id(header)
    except UserError as e:
        raise UserError(f"header {PROJECT_HEADER}: {e.message}", hint=e.hint) from e


Handle = Callable[[str, bytes, str], Awaitable[Any]]


def export_route(
    path: str, service: str, handle: Handle, max_body_bytes: int, metrics: Metrics | None
) -> Route:
    """``POST path`` for an OTLP/HTTP export: content type, project header, body (capped,
    inflated), then ``handle(project, body, encoding)``, whose answer goes back in the
    request's encoding; any failure becomes its OTLP status (``http_error``)."""

    async def export(request: Request) -> Response:
        started = time.perf_counter()
        kind = media_type(request.headers.get("content-type"))
        encoding = JSON if kind == JSON else PROTOBUF
        try:
            if kind not in (PROTOBUF, JSON):
                raise UnsupportedMediaType(
                    f"content-type {request.headers.get('content-type')!r} is not supported",
                    hint=f"send {PROTOBUF} or {JSON}",
                )
            project = project_of(request.headers.get(PROJECT_HEADER))
            try:
                body = await read_body(request, max_body_bytes)
            except OversizeError as e:  # its hint is about evaluation requests
                raise BodyTooLarge(max_body_bytes, "") from e
            raw = inflate(body, request.headers.get("content-encoding"), max_body_bytes)
            del body
            answer = await handle(project, raw, encoding)
        except Exception as e:  # noqa: BLE001 - every failure becomes an OTLP status
            response, code = http_error(e, encoding)
        else:
            response, code = encode_message(answer, encoding, 200), "ok"
        if metrics is not None:
            metrics.observe(service, "Export", _HTTP_PROTOCOL, code, time.perf_counter() - started)
        return response

    return Route(path, export, methods=["POST"])


def encode_message(
    message: Any, encoding: str, status: int, headers: dict[str, str] | None = None
) -> Response:
    if encoding == JSON:
        body = json_format.MessageToJson(message, indent=None).encode()
    else:
        body = message.SerializeToString()
    return Response(body, status, headers=headers, media_type=encoding)


def http_error(exc: Exception, encoding: str) -> tuple[Response, str]:
    """The response and metrics code for a failed export."""
    headers: dict[str, str] = {}
    details: list[Any] = []
    if isinstance(exc, UnsupportedMediaType):
        status, code, message = 415, Code.INVALID_ARGUMENT, user_message(exc)
    elif isinstance(exc, BodyTooLarge):
        status, code, message = 413, Code.RESOURCE_EXHAUSTED, user_message(exc)
    elif isinstance(exc, Overloaded):
        status, code, message = 503, Code.UNAVAILABLE, str(exc)
        headers["retry-after"] = str(max(0, math.ceil(exc.retry_after_s)))
        details.append(retry_info(exc.retry_after_s))
    elif isinstance(exc, UserError):
        status, code, message = 400, Code.INVALID_ARGUMENT, user_message(exc)
        details.append(
            BadRequest(
                field_violations=[BadRequest.FieldViolation(field="body", description=message)]
            )
        )
    else:
        err = to_connect_error(exc)  # logs what is unexpected; RunError → 503
        status, code, message = http_status(err.code), err.code, err.message
    body = Status(code=_GRPC_STATUS[code], message=message)
    for detail in details:
        body.details.add().Pack(detail)
    return encode_message(body, encoding, status, headers), code.value


def retry_info(seconds: float) -> RetryInfo:
    whole = max(0.0, seconds)
    return RetryInfo(
        retry_delay=Duration(seconds=int(whole), nanos=int((whole - int(whole)) * 1e9))
    )


class RawExport:
    """An Export request's bytes as received (``ExportCodec``): an ingest worker parses them,
    so the event loop never parses a request only to serialise it again."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class ExportCodec:
    """connectrpc's binary protobuf codec, except that Export requests (traces and logs) stay
    bytes: they are parsed where the size says (a worker, a thread, or inline)."""

    def name(self) -> str:
        return "proto"

    def encode(self, message: Any) -> bytes:
        return bytes(message.SerializeToString())

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        if message_class is ExportTraceServiceRequest or message_class is ExportLogsRequest:
            return RawExport(bytes(data))
        return message_class.FromString(data)


def grpc_error(exc: Exception, ctx: RequestContext[Any, Any]) -> ConnectError:
    """A failed OTLP/gRPC export as its status: ``Overloaded`` is ``UNAVAILABLE`` with a
    ``RetryInfo`` (also in the trailer the OpenTelemetry exporters read); anything else is
    mapped once, as on every other service."""
    if not isinstance(exc, Overloaded):
        return to_connect_error(exc)
    info = retry_info(exc.retry_after_s)
    ctx.response_trailers[RETRY_INFO_TRAILER] = (
        base64.b64encode(info.SerializeToString()).decode().rstrip("=")
    )
    return ConnectError(Code.UNAVAILABLE, str(exc), details=[error_detail(info)])


def error_detail(message: Any) -> ErrorDetail:
    """A google.protobuf message as a connectrpc error detail (which packs its own ``Any``)."""
    return ErrorDetail(
        WktAny(
            type_url=f"type.googleapis.com/{message.DESCRIPTOR.full_name}",
            value=message.SerializeToString(),
        )
    )


class OtlpExportApp(ConnectASGIApplication[Any]):
    """The connectrpc app for an OTLP collector service's unary ``Export`` (``TraceService``,
    ``LogsService``): what protoc-gen-connectrpc-py would write for one."""

    def __init__(
        self,
        service_name: str,
        request: type[Any],
        response: type[Any],
        handler: Any,
        *,
        interceptors: Iterable[Any] = (),
        read_max_bytes: int | None,
    ) -> None:
        method: MethodInfo[Any, Any] = MethodInfo(
            name="Export",
            service_name=service_name,
            input=request,
            output=response,
            idempotency_level=IdempotencyLevel.UNKNOWN,
            stream_type=StreamType.UNARY,
        )
        super().__init__(
            service=handler,
            endpoints=lambda svc: {
                f"/{service_name}/Export": Endpoint.unary(method=method, function=svc.export)
            },
            interceptors=interceptors,
            read_max_bytes=read_max_bytes,
            # OTLP/gRPC is binary protobuf; JSON over Connect is not an OTLP transport.
            codecs=(ExportCodec(),),
        )
        self.service_name = service_name
        # The object answering Export, for the native gRPC port (``otlp_handlers``).
        self.handler = handler

    @property
    def path(self) -> str:
        return f"/{self.service_name}"
