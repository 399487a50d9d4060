"""Server errors as evalsi errors, so a remote call fails the way the embedded one would: bad
input is a ``UserError`` (exit 2) with the server's message, an unreachable server a
``RunError`` (exit 3) naming the URL."""

from __future__ import annotations

from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi.core import EvalsiError, NotFoundError, RunError, UserError

# Codes that mean the request itself is wrong; retrying it unchanged cannot help.
_USER_CODES = frozenset(
    {
        Code.INVALID_ARGUMENT,
        Code.FAILED_PRECONDITION,
        Code.OUT_OF_RANGE,
        Code.ALREADY_EXISTS,
        Code.RESOURCE_EXHAUSTED,
        Code.UNIMPLEMENTED,
    }
)


class ServerUnavailable(RunError):
    """The server could not be reached, dropped the connection, did not answer in time, or
    said it is unavailable (gRPC's UNAVAILABLE and DEADLINE_EXCEEDED): the same call may
    succeed later, so a caller that follows a server (``evalsi watch``) retries it. Exit 3
    for everyone else, as any ``RunError``."""


def from_connect(error: ConnectError, url: str) -> EvalsiError:
    """The evalsi error a Connect/gRPC status stands for."""
    message, hint = _split_hint(error.message or error.code.value)
    if error.code == Code.UNAVAILABLE and error.__cause__ is None:
        # Sent by the server (its own infrastructure failed), not a connection we could not make.
        return ServerUnavailable(f"the evalsi server at {url}: {message}", hint=hint)
    if error.code == Code.NOT_FOUND:
        return NotFoundError(message, hint=hint)
    if error.code == Code.UNIMPLEMENTED:
        return UserError(
            f"the evalsi server at {url} does not offer this call: {message}",
            hint="check that URL points at `evalsi serve` and that client and server versions "
            "match",
        )
    if error.code == Code.RESOURCE_EXHAUSTED:
        return UserError(
            f"the evalsi server at {url} refused the request: {message}",
            hint="send less per call, or raise the server's max_body_bytes",
        )
    if error.code in _USER_CODES:
        return UserError(message, hint=hint)
    if error.code == Code.UNAVAILABLE:
        return ServerUnavailable(
            f"cannot reach the evalsi server at {url}: {message}",
            hint="is `evalsi serve` running there? check --server / EVALSI_SERVER",
        )
    if error.code == Code.DEADLINE_EXCEEDED:
        return ServerUnavailable(
            f"the evalsi server at {url} did not answer in time: {message}",
            hint="raise the client's timeout",
        )
    if error.code == Code.UNAUTHENTICATED:
        return UserError(
            f"the evalsi server at {url} refused access: {message}",
            hint="send a credential: EVALSI_TOKEN (an OIDC token, `evalsi login`) or "
            "EVALSI_API_KEY (`evalsi auth keys create`)",
        )
    if error.code == Code.PERMISSION_DENIED:
        return UserError(f"the evalsi server at {url} refused access: {message}")
    return RunError(f"the evalsi server at {url} failed ({error.code.value}): {message}")


def translate(error: BaseException, url: str) -> EvalsiError:
    """Any failure of a call (a Connect status or a transport error) as an evalsi error."""
    if isinstance(error, EvalsiError):
        return error
    if isinstance(error, ConnectError):
        return from_connect(error, url)
    if isinstance(error, OSError):  # a socket error the HTTP client did not wrap
        return ServerUnavailable(
            f"cannot reach the evalsi server at {url}: {type(error).__name__}: {error}"
        )
    return RunError(f"cannot reach the evalsi server at {url}: {type(error).__name__}: {error}")


def _split_hint(text: str) -> tuple[str, str | None]:
    """The server sends ``message (hint: ...)``; the CLI prints the hint on its own line."""
    head, sep, tail = text.partition(" (hint: ")
    if sep and tail.endswith(")"):
        return head, tail[:-1]
    return text, None
