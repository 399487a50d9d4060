"""Where the MCP tools (``_mcp``) are served: over stdio for ``evalsi mcp``, and at ``/mcp``
on ``evalsi serve`` (streamable HTTP), with the MCP authorization rules on top of the server's
identity layer.

At ``/mcp``, with authentication on:

* a request without a valid credential gets 401 and ``WWW-Authenticate: Bearer
  resource_metadata="…/.well-known/oauth-protected-resource/mcp"``; that document (RFC 9728)
  names the resource and the OpenID providers the server trusts;
* a JWT must be bound to this resource: its ``aud`` must hold the ``/mcp`` URL (an API key is
  evalsi's own credential and has no audience);
* every tool call is authenticated again from its own HTTP request and decided by the gate
  like any RPC (a session's calls may come with other credentials than the one that opened it);
* the browser guard in front of every route refuses a foreign ``Host`` or ``Origin``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from evalsi.auth import Unauthenticated
from evalsi.server._state import ServerState

if TYPE_CHECKING:
    pass

log = logging.getLogger("evalsi.server.mcp")

MCP_PATH = "/mcp"
MAX_SESSIONS = 1000  # open MCP sessions at once, every caller together
SESSION_IDLE_S = 600.0  # a session unused this long is closed
METADATA_PATH = "/.well-known/oauth-protected-resource"


def _resource(request: Request) -> str:
    """This server's ``/mcp`` URL as the client reached it (``Host`` is checked by the web
    guard before any route)."""
    return f"{request.url.scheme}://{request.url.netloc}{MCP_PATH}"


def report_renderer(state: ServerState) -> Any:
    async def render(run_id: str) -> str:
        from evalsi.reports import render_report

        return await asyncio.to_thread(render_report, state.store, run_id, fmt="md")

    return render


class McpHttp:
    """``/mcp`` and its protected-resource metadata, over the guarded handlers."""

    def __init__(self, state: ServerState, handlers: Mapping[str, Any], gate: Any) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from evalsi.server._mcp import McpTools

        self.state = state
        self.gate = gate
        self.tools = McpTools(handlers, report_renderer(state), authenticate=self._authenticate)
        self.manager = StreamableHTTPSessionManager(
            app=self.tools.server(),
            # The web guard already checks Host and Origin against server.allowedHosts and
            # server.cors, for every route alike.
            security_settings=None,
            max_request_body_size=state.config.max_body_bytes,
            max_sessions=MAX_SESSIONS,
            session_idle_timeout=SESSION_IDLE_S,
        )
        # The SDK logs every session id at INFO: an id is a bearer of the session, keep it out.
        logging.getLogger("mcp.server.streamable_http_manager").setLevel(logging.WARNING)

    @property
    def enabled(self) -> bool:
        return bool(self.gate.access.enabled)

    def routes(self) -> list[BaseRoute]:
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

        app = StreamableHTTPASGIApp(self.manager)

        async def endpoint(scope: Any, receive: Any, send: Any) -> None:
            if self.enabled:
                request = Request(scope)
                try:
                    principal = await self._check(request)
                except Unauthenticated as e:
                    await _challenge(request, e)(scope, receive, send)
                    return
                # The SDK binds a session to the "user" that opened it: another credential
                # using its id gets 404, so it can neither call nor cancel nor end it.
                scope["user"] = _owner(principal)
            await app(scope, receive, send)

        return [
            Route(MCP_PATH, endpoint=_AsgiEndpoint(endpoint), methods=["GET", "POST", "DELETE"]),
            Route(METADATA_PATH, self._metadata, methods=["GET"]),
            Route(f"{METADATA_PATH}{MCP_PATH}", self._metadata, methods=["GET"]),
        ]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    async def _metadata(self, request: Request) -> Response:
        issuers = [p.issuer for p in self.state.config.auth.providers]
        return JSONResponse(
            {
                "resource": _resource(request),
                "authorization_servers": issuers,
                "bearer_methods_supported": ["header"],
                "resource_name": "evalsi",
            }
        )

    async def _check(self, request: Request) -> Any:
        from evalsi.server._guard import bind_caller

        principal = await bind_caller(self.gate, dict(request.headers))
        if not principal.authenticated:
            raise Unauthenticated("/mcp needs a bearer token or an API key")
        if principal.kind in ("user", "service"):  # a JWT: bound to this resource (RFC 8707)
            aud = principal.claims.get("aud")
            audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if _resource(request) not in audiences:
                raise Unauthenticated(
                    f"the token is not for this MCP server: its audience (aud) must include "
                    f"{_resource(request)}"
                )
        return principal

    async def _authenticate(self, request: Any) -> None:
        """Before each tool call: its own request's caller, for the guarded handlers."""
        if request is None:  # not over HTTP: nothing to bind
            return
        if self.enabled:
            await self._check(request)


def _challenge(request: Request, e: Unauthenticated) -> Response:
    """401 with the protected-resource metadata's address (RFC 9728)."""
    metadata = f"{request.url.scheme}://{request.url.netloc}{METADATA_PATH}{MCP_PATH}"
    return JSONResponse(
        {"code": "unauthenticated", "message": str(e), "details": []},
        status_code=401,
        headers={"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'},
    )


def _owner(principal: Any) -> Any:
    """The principal as the SDK's session owner (compared by client id, issuer, subject)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(
        AccessToken(token="", client_id=principal.id, scopes=[], subject=principal.subject)
    )


class _NoMcp:
    """``/mcp`` where the ``mcp`` package is not installed: a clear 501, never a crash."""

    def routes(self) -> list[BaseRoute]:
        async def missing(request: Request) -> Response:
            return JSONResponse(
                {
                    "code": "unimplemented",
                    "message": "this server has no MCP support installed: pip install "
                    "'evalsi[server,mcp]'",
                    "details": [],
                },
                status_code=501,
            )

        return [Route(MCP_PATH, missing, methods=["GET", "POST", "DELETE"])]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield


def mcp_http(state: ServerState, handlers: Mapping[str, Any], gate: Any) -> McpHttp | _NoMcp:
    """``/mcp`` over ``handlers``, or its 501 stand-in without the ``mcp`` extra."""
    if importlib.util.find_spec("mcp") is None:
        log.info("evalsi serve: no /mcp (the mcp package is not installed)")
        return _NoMcp()
    return McpHttp(state, handlers, gate)


class _AsgiEndpoint:
    """An ASGI callable Starlette's ``Route`` treats as an app (not a request handler)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


__all__ = ["MCP_PATH", "METADATA_PATH", "McpHttp", "mcp_http", "report_renderer"]
