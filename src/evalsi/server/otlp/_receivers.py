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

What this receiver shares with the logs receiver (``_logs``): the budget, the export route,
the error mapping, the project header, the ``Export`` app, lives in ``_shared``. The wiring
below (``otlp_mounts``, the OTLP ports) mounts both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from connectrpc.request import RequestContext
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
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount

from evalsi.server._state import ServerConfig
from evalsi.server._web_guard import bracketed
from evalsi.server.otlp._decode import (
    PROTOBUF,
    Decoded,
    decode_body,
    decode_request,
)
from evalsi.server.otlp._shared import (
    INLINE_DECODE_BYTES,
    LOGS_PATH,
    LOGS_SERVICE,
    PROJECT_HEADER,
    SERVICE,
    TRACES_PATH,
    InflightBudget,
    OtlpExportApp,
    RawExport,
    export_route,
    grpc_error,
    project_of,
)
from evalsi.traces import BatchSink, EventSink, SpanSink

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from evalsi.server._metrics import Metrics
    from evalsi.server.otlp._ingest_pool import IngestPool

# The span resource attribute naming the project its spans go to, honoured only where the
# caller may write traces (``may_write``); and a project check for that.
PROJECT_ATTRIBUTE = "evalsi.project"
MayWrite = Callable[[str], bool]

# Ingest worker processes and the sink their stored batches go to.
Workers = tuple["IngestPool", BatchSink]


class _Ingest:
    """What both transports share: project check, byte budget, then the sink (or, with
    ingest workers, a worker that decodes and stores and the sink that assembles)."""

    def __init__(
        self,
        sink: SpanSink,
        budget: InflightBudget,
        workers: Workers | None = None,
        may_write: MayWrite | None = None,
    ) -> None:
        self.sink = sink
        self.budget = budget
        self.workers = workers
        self.may_write = may_write

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
                raw, kind = body()
                # A request naming projects of its own is routed here; the others (nearly
                # all: one bytes search tells) go to a worker whole, for one project.
                if self.may_write is None or PROJECT_ATTRIBUTE.encode() not in raw:
                    pool, batches = self.workers
                    # Decoded and stored in a worker, then assembled; that goes on if this
                    # request is cancelled (the spans may be committed already), and the
                    # bytes count against the budget until it is over.
                    keep = batches.keeps_rows(project)
                    arrival = batches.accept_stored(
                        project, lambda: pool.prepare(project, raw, kind, keep_rows=keep)
                    )
                    arrival.add_done_callback(lambda _: self.budget.give_back(size))
                    held = False
                    batch = await asyncio.shield(arrival)
                    return Decoded([], batch.rejected, batch.error_message)
            # A big request takes long enough to decode to stall every other request on the
            # loop; it is decoded in a thread (the GIL still serialises the work).
            decoded = await asyncio.to_thread(decode) if size > INLINE_DECODE_BYTES else decode()
            groups, decoded = self._route(project, decoded)
            for into, spans in groups.items():
                await self.sink.accept(into, spans)
            return decoded
        finally:
            if held:
                self.budget.give_back(size)

    def _route(self, project: str, decoded: Decoded) -> tuple[dict[str, list[Any]], Decoded]:
        """The spans by project: the request's, or the one their resource's
        ``evalsi.project`` names where the caller may write traces; spans naming a project it
        may not are rejected (counted in ``partial_success``), never stored elsewhere."""
        may_write = self.may_write
        groups: dict[str, list[Any]] = {}
        refused: set[str] = set()
        allowed: dict[str, bool] = {project: True}
        for span in decoded.spans:
            named = span.resource.get(PROJECT_ATTRIBUTE) if may_write else None
            into = project if named is None else str(named)
            if into not in allowed:
                allowed[into] = isinstance(named, str) and may_write is not None and may_write(into)
            if allowed[into]:
                groups.setdefault(into, []).append(span)
            else:
                refused.add(into)
        if not refused:
            return groups, decoded
        n = len(decoded.spans) - sum(len(g) for g in groups.values())
        why = (
            f"{PROJECT_ATTRIBUTE} names a project this credential may not write traces to "
            f"({', '.join(sorted(refused)[:3])}): {n} span(s) not stored"
        )
        message = "; ".join(m for m in (decoded.error_message, why) if m)
        return groups, Decoded(decoded.spans, decoded.rejected + n, message)


def export_response(decoded: Decoded) -> ExportTraceServiceResponse:
    """Full success leaves ``partial_success`` unset, as the spec requires."""
    if not decoded.rejected:
        return ExportTraceServiceResponse()
    return ExportTraceServiceResponse(
        partial_success=ExportTracePartialSuccess(
            rejected_spans=decoded.rejected, error_message=decoded.error_message
        )
    )


class TraceServiceHandler:
    """``TraceService/Export`` over a sink (errors leave as ``ConnectError``s), and the body of
    a ``POST /v1/traces`` (``export_body``)."""

    def __init__(
        self,
        sink: SpanSink,
        budget: InflightBudget,
        workers: Workers | None = None,
        may_write: MayWrite | None = None,
    ) -> None:
        self._ingest = _Ingest(sink, budget, workers, may_write)

    async def export_body(
        self, project: str, raw: bytes, encoding: str
    ) -> ExportTraceServiceResponse:
        decoded = await self._ingest.run(
            project, len(raw), lambda: decode_body(raw, encoding), lambda: (raw, encoding)
        )
        return export_response(decoded)

    async def export(
        self,
        request: ExportTraceServiceRequest | RawExport,
        ctx: RequestContext[Any, ExportTraceServiceResponse],
        /,
    ) -> ExportTraceServiceResponse:
        try:
            project = project_of(ctx.request_headers.get(PROJECT_HEADER))
            if isinstance(request, RawExport):  # the bytes as received
                return await self.export_body(project, request.data, PROTOBUF)
            message = request  # a parsed message (the native gRPC port, tests)
            decoded = await self._ingest.run(
                project,
                message.ByteSize(),
                lambda: decode_request(message),
                lambda: (message.SerializeToString(), PROTOBUF),
            )
        except Exception as e:
            raise grpc_error(e, ctx) from e
        return export_response(decoded)


# --- wiring ----------------------------------------------------------------------------------


def otlp_mounts(
    sink: SpanSink,
    config: ServerConfig,
    *,
    interceptors: Iterable[Any] = (),
    metrics: Metrics | None = None,
    workers: Workers | None = None,
    events: EventSink | None = None,
    may_write: MayWrite | None = None,
) -> list[BaseRoute]:
    """Both OTLP trace endpoints over one sink and one in-flight byte budget, for
    ``build_app``. ``workers``: an ingest pool and the sink its stored batches go to
    (``Watch``); ``events``: where span events sent as log records go (the logs endpoints,
    ``_logs``, are mounted only with it); ``may_write``: whether the caller may write traces
    to a project a span's ``evalsi.project`` names (None: that attribute is not read)."""
    budget = InflightBudget(config.traces.otlp.max_inflight_bytes)
    cap = config.max_body_bytes

    def mount(service: str, request: type[Any], response: type[Any], handler: Any) -> Mount:
        app = OtlpExportApp(
            service, request, response, handler, interceptors=interceptors, read_max_bytes=cap
        )
        return Mount(app.path, app)

    traces = TraceServiceHandler(sink, budget, workers, may_write)
    routes: list[BaseRoute] = [
        mount(SERVICE, ExportTraceServiceRequest, ExportTraceServiceResponse, traces),
        export_route(TRACES_PATH, SERVICE, traces.export_body, cap, metrics),
    ]
    if events is not None:
        from evalsi.server.otlp._logs import LogsServiceHandler

        logs = LogsServiceHandler(events, budget)
        routes += [
            mount(LOGS_SERVICE, ExportLogsRequest, ExportLogsServiceResponse, logs),
            export_route(LOGS_PATH, LOGS_SERVICE, logs.export_body, cap, metrics),
        ]
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
    return [f"{bracketed(config.host)}:{port}" for port in otlp_ports(config)]


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
