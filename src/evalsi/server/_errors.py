"""One mapping from exceptions to Connect codes and HTTP statuses, for every protocol.

Handlers raise evalsi's own errors (``UserError``, ``NotFoundError``, ``RunError``) or a
``ConnectError``; ``ErrorInterceptor`` turns the rest into ``ConnectError`` for the RPC
protocols and ``_rest`` uses ``to_connect_error`` + ``http_status`` for the REST routes, so a
given failure reads the same everywhere. A bug of ours becomes INTERNAL with a fixed message:
the exception is logged on the server, never sent to the client.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi.auth import PermissionDenied, Unauthenticated
from evalsi.core import EvalsiError, NotFoundError, RunError, UserError

log = logging.getLogger("evalsi.server")

REQ = TypeVar("REQ")
RES = TypeVar("RES")

INTERNAL_MESSAGE = "internal error; the server logged the details"

# REST statuses. They follow Connect's mapping except RESOURCE_EXHAUSTED (only ever raised for
# an oversize body here, so 413 rather than 429) and FAILED_PRECONDITION (the resource is in
# the wrong state, e.g. cancelling a finished run: 409, as HTTP APIs usually answer).
_HTTP_STATUS: dict[Code, int] = {
    Code.CANCELED: 499,
    Code.UNKNOWN: 500,
    Code.INVALID_ARGUMENT: 400,
    Code.DEADLINE_EXCEEDED: 504,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.RESOURCE_EXHAUSTED: 413,
    Code.FAILED_PRECONDITION: 409,
    Code.ABORTED: 409,
    Code.OUT_OF_RANGE: 400,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
    Code.UNAVAILABLE: 503,
    Code.DATA_LOSS: 500,
    Code.UNAUTHENTICATED: 401,
}


class OversizeError(UserError):
    """A request body larger than ``ServerConfig.max_body_bytes`` (413 / RESOURCE_EXHAUSTED)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"request body is larger than the server's limit of {limit} bytes",
            hint="send fewer records per call (EvaluateStream takes any number), or raise "
            "server.maxBodyBytes in evalsi.yaml",
        )


def user_message(e: EvalsiError) -> str:
    """What a client reads of one of our errors: the message, then the hint."""
    return e.message if not e.hint else f"{e.message} (hint: {e.hint})"


def to_connect_error(exc: Exception) -> ConnectError:
    """The ``ConnectError`` a client sees for ``exc``; unexpected ones are logged here."""
    if isinstance(exc, ConnectError):
        return exc
    if isinstance(exc, OversizeError):
        return ConnectError(Code.RESOURCE_EXHAUSTED, user_message(exc))
    if isinstance(exc, Unauthenticated):
        return ConnectError(Code.UNAUTHENTICATED, user_message(exc))
    if isinstance(exc, PermissionDenied):
        return ConnectError(Code.PERMISSION_DENIED, user_message(exc))
    if isinstance(exc, NotFoundError):
        return ConnectError(Code.NOT_FOUND, user_message(exc))
    if isinstance(exc, UserError):
        return ConnectError(Code.INVALID_ARGUMENT, user_message(exc))
    refused = _refused_value(exc)
    if refused is not None:
        return ConnectError(Code.INVALID_ARGUMENT, f"the store cannot hold a value: {refused}")
    if isinstance(exc, RunError):
        log.warning("request failed on infrastructure: %s", exc)
        return ConnectError(Code.UNAVAILABLE, user_message(exc))
    log.error("internal error while handling a request", exc_info=exc)
    return ConnectError(Code.INTERNAL, INTERNAL_MESSAGE)


def _refused_value(exc: BaseException) -> str | None:
    """The database's reason when it refused a value the client sent (a NUL character in
    PostgreSQL text, say): bad input, not an outage, whatever wrapped it on the way."""
    from sqlalchemy.exc import DataError

    seen: BaseException | None = exc
    for _ in range(8):  # the chain is short; never loop on a cycle
        if seen is None:
            return None
        if isinstance(seen, DataError):
            return str(seen.orig).splitlines()[0] if seen.orig is not None else "invalid value"
        seen = seen.__cause__ or seen.__context__
    return None


def http_status(code: Code) -> int:
    """The REST status of a Connect code."""
    return _HTTP_STATUS.get(code, 500)


def error_body(err: ConnectError) -> dict[str, Any]:
    """The JSON body of a REST error: Connect's error shape (``code`` is the string form)."""
    return {"code": err.code.value, "message": err.message, "details": []}


class ErrorInterceptor:
    """Maps whatever a handler raises through ``to_connect_error``, for every stream type.

    Without it connectrpc answers UNKNOWN with ``str(exc)`` as the message, which leaks
    internals and tells a client nothing about whose fault it was.
    """

    async def intercept_unary(
        self, call_next: Callable[[REQ, Any], Awaitable[RES]], request: REQ, ctx: Any, /
    ) -> RES:
        try:
            return await call_next(request, ctx)
        except Exception as e:
            raise to_connect_error(e) from e

    async def intercept_server_stream(
        self, call_next: Callable[[REQ, Any], AsyncIterator[RES]], request: REQ, ctx: Any, /
    ) -> AsyncIterator[RES]:
        try:
            async with contextlib.aclosing(_aiter(call_next(request, ctx))) as stream:
                async for message in stream:
                    yield message
        except Exception as e:
            raise to_connect_error(e) from e

    # A client stream is answered once, a bidi stream streams: the same wrapping serves each.
    intercept_client_stream = intercept_unary
    intercept_bidi_stream = intercept_server_stream


async def _aiter(source: AsyncIterator[RES]) -> AsyncGenerator[RES]:
    """An async generator over any async iterator, so ``aclosing`` can close it."""
    try:
        async for item in source:
            yield item
    finally:
        await aclose(source)


async def aclose(stream: Any) -> None:
    """Close ``stream`` if it can be closed (an async generator can, a plain iterator not)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
