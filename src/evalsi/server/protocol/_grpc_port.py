"""An optional second port where grpcio's native server answers gRPC (``server.grpcPort``).

The main port carries gRPC through hypercorn's pure-Python HTTP/2 stack, which costs about
1.3 ms per call before any handler runs; grpcio's C core answers the same call several times
faster (docs/decisions/0005-one-port-server.md). This port serves the very handler objects the
main app mounts (``app.state.handlers``), in the same event loop, with the same error mapping
(``_errors.to_connect_error``), the same body cap and the same metrics object (protocol label
``grpc_native``). Methods are read from each service's descriptor, so a new RPC needs no code
here.

Handlers get a connectrpc ``RequestContext`` built from the gRPC metadata (method, headers,
deadline, peer). Trailers a handler sets on it are sent with an error status (the OTLP
receiver's retry delay); response headers are not sent on this port.

The same class serves ``traces.otlp.grpcPort`` with the OTLP ``TraceService`` alone
(``raw``: the Export request stays bytes, parsed where it is ingested).

With ``auth.tls`` the port speaks TLS only, with the main port's certificate and key, and
requires a client certificate when ``clientCaFile`` is set (``bind(tls=...)``).

No ``Host`` / ``Origin`` guard here, unlike the main port (``_web_guard``): grpcio's server API
does not expose the ``:authority`` of a call, and no browser can reach this port. In cleartext
it speaks only HTTP/2 with prior knowledge, which a browser never sends (browsers use HTTP/2
over TLS only); their HTTP/1.1 request fails the connection preface and reaches no handler.
Over TLS a browser can connect, but grpcio answers only ``application/grpc`` POSTs, a content
type a page on another origin cannot send without a CORS preflight, which grpcio never
grants; and with authentication on every call needs a bearer credential no browser attaches.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

import grpc  # type: ignore[import-untyped]
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import Headers, RequestContext
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]

from evalsi.core import UserError
from evalsi.server._errors import _aiter, to_connect_error
from evalsi.server._metrics import Metrics, code_of
from evalsi.server._web_guard import bracketed
from evalsi.server.protocol._reflection import V1ALPHA_SERVICE
from evalsi.server.protocol._rest import handler_attr

if TYPE_CHECKING:
    from evalsi.server._tls import TlsFiles

log = logging.getLogger("evalsi.server")

PROTOCOL = "grpc_native"
# v1alpha reflection is wire-identical to v1 and has no descriptor of its own in the pool.
_SAME_AS = {V1ALPHA_SERVICE: "grpc.reflection.v1.ServerReflection"}
_STATUS: dict[Code, Any] = {
    code: grpc.StatusCode["CANCELLED" if code is Code.CANCELED else code.name] for code in Code
}
_CANCELED = ConnectError(Code.CANCELED, "the call was cancelled")
_METHOD_HANDLER: dict[tuple[bool, bool], Callable[..., Any]] = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}
_STREAM_TYPE = {
    (False, False): StreamType.UNARY,
    (True, False): StreamType.CLIENT_STREAM,
    (False, True): StreamType.SERVER_STREAM,
    (True, True): StreamType.BIDI_STREAM,
}


class GrpcPort:
    """A grpcio ``grpc.aio`` server over the main app's handlers.

    ``bind()`` claims the port (so a busy port fails before the main server starts);
    ``start()`` begins answering; ``stop(grace)`` lets calls in flight finish for ``grace``
    seconds, then cancels them.
    """

    def __init__(
        self,
        handlers: Mapping[str, Any],
        metrics: Metrics | None,
        *,
        max_body_bytes: int,
        pool: Any = None,
        raw: Mapping[str, Callable[[bytes], Any]] | None = None,
    ) -> None:
        """``raw``: for ``"service/Method"``, what the request bytes become instead of the
        parsed input message."""
        pool = pool if pool is not None else descriptor_pool.Default()
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", max_body_bytes),
                # grpcio sets SO_REUSEPORT by default, which lets two servers share a port
                # silently; a busy port must be an error as it is on the main port.
                ("grpc.so_reuseport", 0),
            ]
        )
        self._server.add_generic_rpc_handlers(
            [
                _service_handler(
                    name,
                    handler,
                    pool.FindServiceByName(_SAME_AS.get(name, name)),
                    metrics,
                    raw or {},
                )
                for name, handler in handlers.items()
            ]
        )
        self.port = 0

    def bind(
        self,
        host: str,
        port: int,
        setting: str = "--grpc-port (server.grpcPort)",
        *,
        tls: TlsFiles | None = None,
    ) -> int:
        """Listen on ``host:port`` (0: any free port), over TLS with ``tls``; returns the port
        bound."""
        address = f"{bracketed(host)}:{port}"
        try:
            if tls is None:
                bound = int(self._server.add_insecure_port(address))
            else:
                bound = int(self._server.add_secure_port(address, _credentials(tls)))
        except RuntimeError as e:  # grpcio raises RuntimeError("Failed to bind to address ...")
            raise _bind_error(host, port, str(e), setting) from e
        if bound == 0:
            raise _bind_error(host, port, "the address is in use or not available", setting)
        self.port = bound
        return bound

    async def start(self) -> None:
        await self._server.start()

    async def stop(self, grace: float | None) -> None:
        await self._server.stop(grace)


def _credentials(tls: TlsFiles) -> Any:
    """grpcio's server credentials: the certificate and key, and the client CA whose
    certificates every client must then show."""
    return grpc.ssl_server_credentials(
        [(tls.key, tls.cert)],
        root_certificates=tls.client_ca,
        require_client_auth=tls.client_ca is not None,
    )


def _bind_error(host: str, port: int, why: str, setting: str) -> UserError:
    return UserError(
        f"cannot listen for native gRPC on {host}:{port}: {why}",
        hint=f"pick another {setting}, or stop whatever is using this one",
    )


def _service_handler(
    name: str,
    handler: Any,
    service: Any,
    metrics: Metrics | None,
    raw: Mapping[str, Callable[[bytes], Any]],
) -> Any:
    methods: dict[str, Any] = {}
    for method in service.methods:
        client_streaming = bool(method.client_streaming)
        server_streaming = bool(method.server_streaming)
        info: MethodInfo[Any, Any] = MethodInfo(
            name=method.name,
            service_name=name,
            input=message_factory.GetMessageClass(method.input_type),
            output=message_factory.GetMessageClass(method.output_type),
            idempotency_level=IdempotencyLevel.UNKNOWN,
            stream_type=_STREAM_TYPE[(client_streaming, server_streaming)],
        )
        call = _Call(
            info,
            getattr(handler, handler_attr(method.name)),
            metrics,
            raw.get(f"{name}/{method.name}"),
        )
        make = _METHOD_HANDLER[(client_streaming, server_streaming)]
        behaviour = call.stream if server_streaming else call.answer
        # No request deserializer: _Call parses, so malformed bytes read INVALID_ARGUMENT
        # (grpcio would answer INTERNAL) and are counted like any failed call.
        methods[method.name] = make(behaviour, response_serializer=info.output.SerializeToString)
    return grpc.method_handlers_generic_handler(name, methods)


class _Call:
    """One RPC: parses, calls the handler, maps errors, records metrics."""

    def __init__(
        self,
        info: MethodInfo[Any, Any],
        function: Callable[..., Any],
        metrics: Metrics | None,
        raw: Callable[[bytes], Any] | None = None,
    ) -> None:
        self._info = info
        self._raw = raw
        self._function = function
        self._metrics = metrics
        self._client_streaming = info.stream_type in (
            StreamType.CLIENT_STREAM,
            StreamType.BIDI_STREAM,
        )

    async def answer(self, request: Any, context: Any) -> Any:
        """A unary or client-stream call: one response or an error status."""
        started = time.perf_counter()
        ctx = self._context(context)
        try:
            response = await self._function(self._input(request), ctx)
        except asyncio.CancelledError:  # the client went away or its deadline passed
            self._done(started, _CANCELED)
            raise
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            error = to_connect_error(e)
        else:
            self._done(started, None)
            return response
        self._done(started, error)
        trailers = _trailers(ctx, error)
        if trailers:
            context.set_trailing_metadata(trailers)
        await context.abort(_STATUS[error.code], error.message)  # raises
        return None

    async def stream(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """A server-stream or bidi call: the handler's messages, then OK or an error status."""
        started = time.perf_counter()
        try:
            source = self._function(self._input(request), self._context(context))
            async with contextlib.aclosing(_aiter(source)) as messages:
                async for message in messages:
                    yield message
        except (asyncio.CancelledError, GeneratorExit):
            self._done(started, _CANCELED)
            raise
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            error = to_connect_error(e)
        else:
            self._done(started, None)
            return
        self._done(started, error)
        await context.abort(_STATUS[error.code], error.message)

    def _input(self, request: Any) -> Any:
        if self._raw is not None:
            return self._raw(request)
        return self._parse_all(request) if self._client_streaming else self._parse(request)

    def _parse(self, raw: bytes) -> Any:
        try:
            return self._info.input.FromString(raw)
        except DecodeError as e:
            raise ConnectError(
                Code.INVALID_ARGUMENT,
                f"the request is not a valid {self._info.input.DESCRIPTOR.full_name} message",
            ) from e

    async def _parse_all(self, raws: AsyncIterator[bytes]) -> AsyncIterator[Any]:
        async for raw in raws:
            yield self._parse(raw)

    def _context(self, context: Any) -> RequestContext[Any, Any]:
        remaining = context.time_remaining()
        metadata = context.invocation_metadata() or ()
        return RequestContext(
            method=self._info,
            http_method="POST",
            # Binary (-bin) metadata arrives as bytes; Headers holds text only.
            request_headers=Headers([(k, v) for k, v in metadata if isinstance(v, str)]),
            timeout_ms=int(remaining * 1000) if remaining is not None else None,
            client_address=context.peer(),
        )

    def _done(self, started: float, error: Exception | None) -> None:
        if self._metrics is not None:
            self._metrics.observe(
                self._info.service_name,
                self._info.name,
                PROTOCOL,
                code_of(error),
                time.perf_counter() - started,
            )


def _trailers(ctx: RequestContext[Any, Any], error: ConnectError) -> list[tuple[str, Any]]:
    """The trailers a handler set, as grpcio metadata (``-bin`` values are base64 there), and
    the error's details as the standard rich status (``grpc-status-details-bin``)."""
    out: list[tuple[str, Any]] = []
    for key, value in ctx.response_trailers.items():
        if key.endswith("-bin"):
            out.append((key, base64.b64decode(value + "=" * (-len(value) % 4))))
        else:
            out.append((key, value))
    if error.details:
        status = Status(code=_STATUS[error.code].value[0], message=error.message)
        for detail in error.details:
            status.details.add(
                type_url=f"type.googleapis.com/{detail.type_name}", value=detail.message_bytes
            )
        out.append(("grpc-status-details-bin", status.SerializeToString()))
    return out
