"""The OTLP trace receiver: ``POST /v1/traces`` (OTLP/HTTP, protobuf or JSON) and the gRPC
``opentelemetry.proto.collector.trace.v1.TraceService/Export``, both handing decoded spans to a
``SpanSink``.

Answers follow the OTLP specification (opentelemetry-proto ``docs/specification.md``):

* 200 with an ``ExportTraceServiceResponse`` in the request's encoding; ``partial_success``
  carries the count and reason of spans rejected for unusable ids;
* 400 (gRPC ``INVALID_ARGUMENT``) for a body that cannot be decoded, with a ``google.rpc.Status``
  body holding a ``BadRequest``; senders never retry it;
* 413 for a body over ``max_body_bytes`` before or after decompression, 415 for another content
  type or encoding;
* 503 with ``Retry-After`` (gRPC ``UNAVAILABLE`` with a ``RetryInfo``) when the sink raises
  ``Overloaded`` or when the decompressed bytes of the requests being ingested would pass
  ``max_inflight_bytes``. A request is taken whole or refused whole, so whatever was answered
  200 reached the sink and nothing refused was kept. 503 rather than 429: the limit is the
  server's memory, not a per-client quota.

The gRPC app is built by hand over the opentelemetry-proto message classes with connectrpc, as
the generated ``*_connect.py`` modules build theirs; connectrpc reads ``grpc-encoding: gzip``
and caps the decompressed message at ``read_max_bytes``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
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
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from protobuf.wkt import Any as WktAny
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from evalsi.core import UserError
from evalsi.server._errors import OversizeError, http_status, to_connect_error
from evalsi.server._otlp_decode import (
    JSON,
    PROTOBUF,
    BodyTooLarge,
    Decoded,
    UnsupportedMediaType,
    decode_body,
    decode_request,
    inflate,
    media_type,
    parse_protobuf,
)
from evalsi.server._rest import read_body
from evalsi.server._state import DEFAULT_PROJECT, ServerConfig
from evalsi.store import check_project_id
from evalsi.traces import BatchSink, EventSink, Overloaded, SpanSink

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from evalsi.server._ingest_pool import IngestPool
    from evalsi.server._metrics import Metrics

# Ingest worker processes and the sink their stored batches go to.
Workers = tuple["IngestPool", BatchSink]

log = logging.getLogger("evalsi.server")

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
TRACES_PATH = "/v1/traces"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"  # _otlp_logs
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


class _Ingest:
    """What both transports share: project check, byte budget, then the sink (or, with
    ingest workers, a worker that decodes and stores and the sink that assembles)."""

    def __init__(
        self, sink: SpanSink, budget: InflightBudget, workers: Workers | None = None
    ) -> None:
        self.sink = sink
        self.budget = budget
        self.workers = workers

    async def run(
        self,
        project: str,
        size: int,
        decode: Callable[[], Decoded],
        body: Callable[[], tuple[bytes, str]],
    ) -> Decoded:
        self.budget.admit(size)
        held = True  # the budget is given back once the request's bytes are done with
        try:
            if self.workers is not None and size:
                pool, batches = self.workers
                raw, kind = body()
                # Decoded and stored in a worker, then assembled; that goes on if this
                # request is cancelled (the spans may be committed already), and the bytes
                # count against the budget until it is over.
                arrival = batches.accept_stored(project, lambda: pool.prepare(project, raw, kind))
                arrival.add_done_callback(lambda _: self.budget.give_back(size))
                held = False
                batch = await asyncio.shield(arrival)
                return Decoded([], batch.rejected, batch.error_message)
            # A big request takes long enough to decode to stall every other request on the
            # loop; it is decoded in a thread (the GIL still serialises the work).
            decoded = await asyncio.to_thread(decode) if size > INLINE_DECODE_BYTES else decode()
            if decoded.spans:
                await self.sink.accept(project, decoded.spans)
            return decoded
        finally:
            if held:
                self.budget.give_back(size)


def project_of(header: str | None) -> str:
    """The project named by ``x-evalsi-project`` (``default`` without one)."""
    if header is None or header == "":
        return DEFAULT_PROJECT
    try:
        return check_project_id(header)
    except UserError as e:
        raise UserError(f"header {PROJECT_HEADER}: {e.message}", hint=e.hint) from e


def export_response(decoded: Decoded) -> ExportTraceServiceResponse:
    """Full success leaves ``partial_success`` unset, as the spec requires."""
    if not decoded.rejected:
        return ExportTraceServiceResponse()
    return ExportTraceServiceResponse(
        partial_success=ExportTracePartialSuccess(
            rejected_spans=decoded.rejected, error_message=decoded.error_message
        )
    )


# --- OTLP/HTTP -------------------------------------------------------------------------------


def otlp_routes(
    sink: SpanSink,
    *,
    max_body_bytes: int,
    max_inflight_bytes: int,
    budget: InflightBudget | None = None,
    metrics: Metrics | None = None,
    workers: Workers | None = None,
) -> list[Route]:
    """``POST /v1/traces``. Pass ``budget`` to share one byte budget with the gRPC app."""
    shared = budget if budget is not None else InflightBudget(max_inflight_bytes)
    ingest = _Ingest(sink, shared, workers)

    async def handle(project: str, raw: bytes, encoding: str) -> ExportTraceServiceResponse:
        decoded = await ingest.run(
            project, len(raw), lambda: decode_body(raw, encoding), lambda: (raw, encoding)
        )
        return export_response(decoded)

    return [export_route(TRACES_PATH, SERVICE, handle, max_body_bytes, metrics)]


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
        status, code, message = 415, Code.INVALID_ARGUMENT, error_text(exc)
    elif isinstance(exc, BodyTooLarge):
        status, code, message = 413, Code.RESOURCE_EXHAUSTED, error_text(exc)
    elif isinstance(exc, Overloaded):
        status, code, message = 503, Code.UNAVAILABLE, str(exc)
        headers["retry-after"] = str(max(0, math.ceil(exc.retry_after_s)))
        details.append(retry_info(exc.retry_after_s))
    elif isinstance(exc, UserError):
        status, code, message = 400, Code.INVALID_ARGUMENT, error_text(exc)
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


def error_text(e: UserError) -> str:
    return e.message if not e.hint else f"{e.message} (hint: {e.hint})"


def retry_info(seconds: float) -> RetryInfo:
    whole = max(0.0, seconds)
    return RetryInfo(
        retry_delay=Duration(seconds=int(whole), nanos=int((whole - int(whole)) * 1e9))
    )


# --- OTLP/gRPC -------------------------------------------------------------------------------


class RawExport:
    """An Export request's bytes as received (``ExportCodec``): an ingest worker parses them,
    so the event loop never parses a request only to serialise it again."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def parsed(self) -> ExportTraceServiceRequest:
        return parse_protobuf(self.data)


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


class TraceServiceHandler:
    """``TraceService/Export`` over a sink; errors leave as ``ConnectError``s."""

    def __init__(
        self, sink: SpanSink, budget: InflightBudget, workers: Workers | None = None
    ) -> None:
        self._ingest = _Ingest(sink, budget, workers)

    async def export(
        self,
        request: ExportTraceServiceRequest | RawExport,
        ctx: RequestContext[Any, ExportTraceServiceResponse],
        /,
    ) -> ExportTraceServiceResponse:
        try:
            project = project_of(ctx.request_headers.get(PROJECT_HEADER))
            if isinstance(request, RawExport):
                raw = request
                decoded = await self._ingest.run(
                    project,
                    len(raw.data),
                    lambda: decode_request(raw.parsed()),
                    lambda: (raw.data, PROTOBUF),
                )
            else:  # a parsed message (the native gRPC port, tests)
                message = request
                decoded = await self._ingest.run(
                    project,
                    message.ByteSize(),
                    lambda: decode_request(message),
                    lambda: (message.SerializeToString(), PROTOBUF),
                )
        except Exception as e:
            raise grpc_error(e, ctx) from e
        return export_response(decoded)


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


def trace_service_app(
    sink: SpanSink,
    *,
    max_body_bytes: int,
    max_inflight_bytes: int,
    budget: InflightBudget | None = None,
    interceptors: Iterable[Any] = (),
    workers: Workers | None = None,
) -> OtlpExportApp:
    """The gRPC (and gRPC-Web, Connect) ``TraceService`` app, to mount at its ``path``."""
    shared = budget if budget is not None else InflightBudget(max_inflight_bytes)
    return OtlpExportApp(
        SERVICE,
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
        TraceServiceHandler(sink, shared, workers),
        interceptors=interceptors,
        read_max_bytes=max_body_bytes,
    )


# --- wiring ----------------------------------------------------------------------------------


def otlp_mounts(
    sink: SpanSink,
    config: ServerConfig,
    *,
    interceptors: Iterable[Any] = (),
    metrics: Metrics | None = None,
    workers: Workers | None = None,
    events: EventSink | None = None,
) -> list[BaseRoute]:
    """Both OTLP trace endpoints over one sink and one in-flight byte budget, for
    ``build_app``. ``workers``: an ingest pool and the sink its stored batches go to
    (``Watch``); ``events``: where span events sent as log records go (the logs endpoints,
    ``_otlp_logs``, are mounted only with it)."""
    budget = InflightBudget(config.traces.otlp.max_inflight_bytes)
    app = trace_service_app(
        sink,
        max_body_bytes=config.max_body_bytes,
        max_inflight_bytes=budget.limit,
        budget=budget,
        interceptors=interceptors,
        workers=workers,
    )
    routes: list[BaseRoute] = [Mount(app.path, app)]
    routes += otlp_routes(
        sink,
        max_body_bytes=config.max_body_bytes,
        max_inflight_bytes=budget.limit,
        budget=budget,
        metrics=metrics,
        workers=workers,
    )
    if events is not None:
        from evalsi.server._otlp_logs import LogsServiceHandler, logs_routes

        logs = OtlpExportApp(
            LOGS_SERVICE,
            ExportLogsRequest,
            ExportLogsServiceResponse,
            LogsServiceHandler(events, budget),
            interceptors=interceptors,
            read_max_bytes=config.max_body_bytes,
        )
        routes.append(Mount(logs.path, logs))
        routes += logs_routes(
            events, max_body_bytes=config.max_body_bytes, budget=budget, metrics=metrics
        )
    return routes


def otlp_handlers(routes: Iterable[BaseRoute]) -> dict[str, Any]:
    """The objects answering the OTLP gRPC services among ``routes``, by service name (what
    grpcio serves on ``traces.otlp.grpcPort``)."""
    return {
        r.path.strip("/"): r.app.handler
        for r in routes
        if isinstance(r, Mount) and hasattr(r.app, "handler")
    }


def otlp_ports(config: ServerConfig) -> list[int]:
    """The extra ports the main app (hypercorn) answers OTLP on: ``traces.otlp.httpPort``, and
    ``grpcPort`` when it shares a port with HTTP (else grpcio serves it: ``native_grpc_port``);
    never the main port."""
    otlp = config.traces.otlp
    native = native_grpc_port(config)
    ports = [
        p
        for p in (otlp.grpc_port, otlp.http_port)
        if p is not None and p != config.port and p != native
    ]
    return list(dict.fromkeys(ports))


def native_grpc_port(config: ServerConfig) -> int | None:
    """``traces.otlp.grpcPort`` when it is a port of its own: grpcio's C core serves OTLP/gRPC
    there (hypercorn's pure-Python HTTP/2 cost more than the ingest itself per request)."""
    otlp = config.traces.otlp
    port = otlp.grpc_port
    if port is None or port == config.port or port == otlp.http_port:
        return None
    return port


def otlp_binds(config: ServerConfig) -> list[str]:
    """The extra hypercorn ``bind`` entries for the OTLP ports (the same app listens there)."""
    host = config.host
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return [f"{host}:{port}" for port in otlp_ports(config)]


def is_otlp_path(path: str) -> bool:
    return path in _OTLP_PATHS or path.startswith(_OTLP_SERVICES)


_OTLP_PATHS = (TRACES_PATH, LOGS_PATH)
_OTLP_SERVICES = (f"/{SERVICE}/", f"/{LOGS_SERVICE}/")


class OtlpOnlyOn:
    """ASGI middleware: on the given ports (the OTLP listeners) only the OTLP endpoints answer;
    anything else is 404, so opening 4317/4318 to collectors does not expose the API there.

    A port of 0 (pick any) cannot be recognised and is left unrestricted.
    """

    def __init__(self, app: ASGIApp, ports: Collection[int]) -> None:
        self.app = app
        self.ports = frozenset(p for p in ports if p)
        # build_app's state (metrics, handlers) stays reachable through the wrapper.
        self.state = getattr(app, "state", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if (
            scope["type"] == "http"
            and server is not None
            and server[1] in self.ports
            and not is_otlp_path(scope["path"])
        ):
            await Response("only OTLP is served on this port\n", 404)(scope, receive, send)
            return
        await self.app(scope, receive, send)
