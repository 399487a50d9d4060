"""gRPC server reflection, so grpcurl, grpcui and Postman can call the API without .proto files.

Answers from the default descriptor pool (every generated ``_pb2`` module registers there).
The same handler is mounted under ``grpc.reflection.v1`` and ``grpc.reflection.v1alpha``:
the two are wire-identical and many tools (grpcurl included) still ask v1alpha first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.server import ConnectASGIApplication, Endpoint
from google.protobuf import descriptor_pool

from evalsi._proto.grpc.reflection.v1.reflection_pb2 import (
    ServerReflectionRequest,
    ServerReflectionResponse,
)

# grpc.StatusCode values carried in ErrorResponse.error_code.
_NOT_FOUND = 5
_INVALID_ARGUMENT = 3

V1ALPHA_SERVICE = "grpc.reflection.v1alpha.ServerReflection"


class ReflectionHandler:
    """Implements the generated ``ServerReflection`` protocol."""

    def __init__(self, services: Iterable[str], pool: Any = None) -> None:
        self._services = sorted(set(services))
        self._pool = pool if pool is not None else descriptor_pool.Default()

    async def server_reflection_info(
        self, requests: AsyncIterator[ServerReflectionRequest], ctx: Any, /
    ) -> AsyncIterator[ServerReflectionResponse]:
        async for request in requests:
            yield self.answer(request)

    def answer(self, request: ServerReflectionRequest) -> ServerReflectionResponse:
        response = ServerReflectionResponse(valid_host=request.host, original_request=request)
        kind = request.WhichOneof("message_request")
        try:
            if kind == "list_services":
                for name in self._services:
                    response.list_services_response.service.add(name=name)
            elif kind == "file_by_filename":
                self._files(response, self._pool.FindFileByName(request.file_by_filename))
            elif kind == "file_containing_symbol":
                self._files(response, self._file_of(request.file_containing_symbol))
            elif kind == "file_containing_extension":
                ext = request.file_containing_extension
                message = self._pool.FindMessageTypeByName(ext.containing_type)
                field = self._pool.FindExtensionByNumber(message, ext.extension_number)
                self._files(response, field.file)
            elif kind == "all_extension_numbers_of_type":
                name = request.all_extension_numbers_of_type
                message = self._pool.FindMessageTypeByName(name)
                numbers = self._pool.FindAllExtensions(message)
                out = response.all_extension_numbers_response
                out.base_type_name = name
                out.extension_number.extend(sorted(f.number for f in numbers))
            else:
                response.error_response.error_code = _INVALID_ARGUMENT
                response.error_response.error_message = "no request kind set"
        except KeyError:
            response.ClearField("message_response")
            response.error_response.error_code = _NOT_FOUND
            response.error_response.error_message = f"not found: {_subject(request, kind)}"
        return response

    def _file_of(self, symbol: str) -> Any:
        try:
            return self._pool.FindFileContainingSymbol(symbol)
        except KeyError:
            # upb's pool does not index methods, fields or enum values; look in the parent.
            parent, _, child = symbol.rpartition(".")
            if not parent:
                raise
            file = self._pool.FindFileContainingSymbol(parent)
            for service in file.services_by_name.values():
                if service.full_name == parent and child in service.methods_by_name:
                    return file
            raise

    def _files(self, response: ServerReflectionResponse, file: Any) -> None:
        """``file`` first, then every file it imports, transitively, each once."""
        seen: set[str] = set()
        order: list[Any] = []
        stack = [file]
        while stack:
            current = stack.pop()
            if current.name in seen:
                continue
            seen.add(current.name)
            order.append(current)
            stack.extend(reversed(current.dependencies))
        out = response.file_descriptor_response.file_descriptor_proto
        out.extend(f.serialized_pb for f in order)


def _subject(request: ServerReflectionRequest, kind: str | None) -> str:
    if kind == "file_containing_extension":
        ext = request.file_containing_extension
        return f"extension {ext.extension_number} of {ext.containing_type}"
    return repr(getattr(request, kind)) if kind else "(nothing)"


class V1AlphaReflectionASGIApplication(ConnectASGIApplication[ReflectionHandler]):
    """The v1 handler under the v1alpha service name (the generated app knows only v1)."""

    def __init__(self, service: ReflectionHandler, **kwargs: Any) -> None:
        super().__init__(
            service=service,
            endpoints=lambda svc: {
                f"/{V1ALPHA_SERVICE}/ServerReflectionInfo": Endpoint.bidi_stream(
                    method=MethodInfo(
                        name="ServerReflectionInfo",
                        service_name=V1ALPHA_SERVICE,
                        input=ServerReflectionRequest,
                        output=ServerReflectionResponse,
                        idempotency_level=IdempotencyLevel.UNKNOWN,
                        stream_type=StreamType.BIDI_STREAM,
                    ),
                    function=svc.server_reflection_info,
                )
            },
            **kwargs,
        )

    @property
    def path(self) -> str:
        return f"/{V1ALPHA_SERVICE}"
