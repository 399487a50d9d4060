"""The server's guard against the web browser it shares a machine with.

``evalsi serve`` has no authentication yet and listens on loopback, so any page open in the
developer's browser can reach it. Three browser tricks are refused here, in one place, before
any route runs (every port the app serves, the OTLP listeners included):

* **DNS rebinding.** A page at ``evil.example`` re-points its name to 127.0.0.1; its requests
  then reach us same-origin, with ``Host: evil.example``. The ``Host`` header (HTTP/2's
  ``:authority``, which hypercorn hands over as ``host``) must name the address the connection
  arrived on, ``localhost`` / ``127.0.0.1`` / ``[::1]`` when that is loopback (with the port),
  or a name ``server.allowedHosts`` lists: else 421.
* **Cross-site requests.** A page may POST ``text/plain`` or a form to any URL without asking
  (a CORS "simple request"): the run starts even though the page cannot read the answer. A
  request carrying an ``Origin`` that is neither this server's own nor listed in
  ``server.cors.allowOrigins`` is refused with 403, GETs too (they read data). Requests
  without ``Origin`` (curl, the SDKs, gRPC) pass: browsers always send it cross-origin, except
  on plain navigations, whose answers the page cannot read.
* **Content types a form can send.** Every API request with a body must say JSON, protobuf,
  Connect, gRPC or gRPC-Web (415 otherwise), so even a same-origin-looking simple request
  cannot carry a body. The OTLP routes check their own (415 for anything else).

A listed origin gets CORS answers: its preflight (``OPTIONS`` with
``Access-Control-Request-Method``) is answered 204, and its responses carry
``Access-Control-Allow-Origin``; a preflight from any other origin is refused like the rest.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the config loader imports this module: it stays stdlib only
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

BODY_TYPES = frozenset(
    {
        "application/json",  # REST, Connect unary JSON, OTLP/HTTP JSON
        "application/proto",
        "application/protobuf",
        "application/x-protobuf",
        "application/connect+json",
        "application/connect+proto",
        "application/grpc",
        "application/grpc+proto",
        "application/grpc+json",
        "application/grpc-web",
        "application/grpc-web+proto",
        "application/grpc-web+json",
        "application/grpc-web-text",
        "application/grpc-web-text+proto",
        "application/grpc-web-text+json",
    }
)
"""Media types an API request body may have: none of them is one an HTML form or a CORS
simple request can send."""

_READ_ONLY = frozenset({"GET", "HEAD", "OPTIONS"})
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
# Headers a browser script may read from a cross-origin answer besides the safelisted ones:
# what gRPC-Web and Connect clients need to see the status of a call.
_EXPOSE = (  # what a page of an allowed origin may read: gRPC-Web's and MCP's own headers
    "grpc-status, grpc-message, grpc-status-details-bin, connect-protocol-version, retry-after, "
    "mcp-session-id, mcp-protocol-version, www-authenticate"
)
_METHODS = "GET, POST, PUT, PATCH, DELETE"
PREFLIGHT_MAX_AGE_S = 600


class WebGuard:
    """ASGI middleware enforcing the rules above.

    Args:
        app: the app behind the guard.
        allowed_hosts: ``server.allowedHosts``: host names (any port) or ``name:port``
            accepted in ``Host`` besides the listening address; ``*`` turns the check off.
        allow_origins: ``server.cors.allowOrigins``: ``scheme://host[:port]`` origins allowed
            to call from a browser (normalised: lower case, no default port).
        own_body_rules: paths that check their own content type (the OTLP routes).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Collection[str] = (),
        allow_origins: Collection[str] = (),
        own_body_rules: Callable[[str], bool] = lambda path: False,
    ) -> None:
        self.app = app
        self.any_host = "*" in allowed_hosts
        # "[fd00::1]" (any port) is matched against the bare address the Host parses to.
        self.hosts = frozenset(
            h.lower()[1:-1] if h.startswith("[") and h.endswith("]") else h.lower()
            for h in allowed_hosts
            if h != "*"
        )
        self.origins = frozenset(allow_origins)
        self.own_body_rules = own_body_rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host")
        if host is not None and not self.host_allowed(host, scope):
            await _refuse(
                scope,
                send,
                421,
                f"Host {host[:100]!r} is not a name this server answers to (DNS rebinding "
                "guard); add it to server.allowedHosts in evalsi.yaml if it is yours",
            )
            return
        origin = headers.get("origin")
        cross = origin is not None and not _same_origin(origin, scope, host)
        if cross and _normal_origin(origin or "") not in self.origins:
            await _refuse(
                scope,
                send,
                403,
                f"cross-origin request from {(origin or '')[:100]!r} refused: browsers may call "
                "this server only from origins listed in server.cors.allowOrigins (evalsi.yaml)",
            )
            return
        method = scope.get("method", "GET")
        if cross and method == "OPTIONS" and "access-control-request-method" in headers:
            await _preflight(send, origin or "", headers)
            return
        if (
            scope["type"] == "http"
            and method not in _READ_ONLY
            and not self.own_body_rules(scope["path"])
        ):
            problem = _body_type_problem(headers)
            if problem is not None:
                await _refuse(scope, send, 415, problem)
                return
        if cross:
            send = _with_cors(send, origin or "")
        await self.app(scope, receive, send)

    def host_allowed(self, host: str, scope: Scope) -> bool:
        """Whether ``host`` (a ``Host`` header) names this server as the connection reached it."""
        if self.any_host:
            return True
        name, port = _split_host(host, _DEFAULT_PORTS.get(scope.get("scheme", "http"), 80))
        if name is None:
            return False
        if name in self.hosts or f"{bracketed(name)}:{port}" in self.hosts:
            return True
        server = scope.get("server")
        if not server or server[1] is None:
            return False  # a unix socket: only the configured names
        bound, bound_port = str(server[0]).strip("[]").lower(), int(server[1])
        if port != bound_port:
            return False
        return name == bound or (is_loopback(bound) and name in _LOOPBACK_NAMES)


def normal_origin(value: str) -> str | None:
    """``scheme://host[:port]`` in lower case without a default port, or None if ``value`` is
    not an http(s) origin (a path, a query, credentials or ``null``)."""
    origin = _normal_origin(value)
    return origin or None


def _normal_origin(value: str) -> str:
    try:
        url = urlsplit(value.strip())
        port = url.port
    except ValueError:
        return ""
    if url.scheme not in ("http", "https") or not url.hostname or url.username is not None:
        return ""
    if url.path not in ("", "/") or url.query or url.fragment:
        return ""
    host = bracketed(url.hostname.lower())
    if port is None or port == _DEFAULT_PORTS[url.scheme]:
        return f"{url.scheme}://{host}"
    return f"{url.scheme}://{host}:{port}"


def _same_origin(origin: str, scope: Scope, host: str | None) -> bool:
    """Whether ``origin`` is the scheme, host and port this request was sent to (the host
    was checked first, so it is one of ours)."""
    scheme = scope.get("scheme", "http")
    if scheme in ("ws", "wss"):
        scheme = "https" if scheme == "wss" else "http"
    if host is None:
        server = scope.get("server")
        if not server:
            return False
        host = f"{bracketed(str(server[0]))}:{server[1]}"
    return _normal_origin(origin) == _normal_origin(f"{scheme}://{host}")


def _split_host(host: str, default_port: int) -> tuple[str | None, int]:
    try:
        url = urlsplit("//" + host.strip())
        port = url.port
    except ValueError:
        return None, 0
    if not url.hostname or url.username is not None or url.path or url.query:
        return None, 0
    return url.hostname.lower().rstrip("."), port if port is not None else default_port


def bracketed(name: str) -> str:
    """An IPv6 address in brackets, as URLs and Host headers write it; anything else as is."""
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _body_type_problem(headers: dict[str, str]) -> str | None:
    raw = headers.get("content-type")
    if raw is None:
        empty = headers.get("content-length", "0").strip() == "0"
        if empty and "transfer-encoding" not in headers:
            return None  # nothing to interpret (curl -X POST .../runs/ID:cancel)
        return (
            "a request body needs a content-type: application/json (REST, Connect), "
            "application/proto or a gRPC / gRPC-Web type"
        )
    media = raw.split(";", 1)[0].strip().lower()
    if media in BODY_TYPES:
        return None
    return (
        f"content-type {raw[:100]!r} is not accepted: send application/json (REST, Connect), "
        "application/proto or a gRPC / gRPC-Web type"
    )


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


async def _refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    code = {403: "permission_denied", 415: "invalid_argument", 421: "permission_denied"}[status]
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
        return
    body = json.dumps({"code": code, "message": message, "details": []}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _preflight(send: Send, origin: str, headers: dict[str, str]) -> None:
    asked = headers.get("access-control-request-headers", "")
    reply = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-methods", _METHODS.encode()),
        (b"access-control-max-age", str(PREFLIGHT_MAX_AGE_S).encode()),
        (b"vary", b"Origin"),
        (b"content-length", b"0"),
    ]
    if asked:  # the origin is trusted: whatever headers its client needs (connect-*, grpc-*)
        reply.append((b"access-control-allow-headers", asked.encode("latin-1")))
    await send({"type": "http.response.start", "status": 204, "headers": reply})
    await send({"type": "http.response.body", "body": b""})


def _with_cors(send: Send, origin: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = dict(message)
            message["headers"] = [
                *message.get("headers", ()),
                (b"access-control-allow-origin", origin.encode("latin-1")),
                (b"access-control-expose-headers", _EXPOSE.encode()),
                (b"vary", b"Origin"),
            ]
        await send(message)

    return sending
