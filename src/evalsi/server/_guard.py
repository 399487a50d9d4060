"""The one enforcement point: every request of every protocol passes identity and access here.

Two halves, one ``Access``:

* ``AuthMiddleware`` (ASGI, every port the app serves) authenticates each request once. The
  routes that are not RPCs are decided here: ``/metrics``, ``/openapi.json``, ``/healthz`` and
  the OTLP receivers (HTTP, and gRPC on the main port), whose project comes from the
  credential: an API key's own project, or ``x-evalsi-project`` only when the principal may
  write traces there (the header is rewritten, so the receivers see the decided project).
* ``guard_handler`` wraps each service handler, so gRPC, gRPC-Web, Connect, REST and the
  native gRPC port (which calls the same objects) all decide through ``ACTIONS``: the RPC's
  action and resource, the decision, a denial audited with what decided it.
* ``guard_otlp`` wraps the OTLP ``Export`` handlers grpcio serves on ``traces.otlp.grpcPort``,
  which no middleware sees: the same project rule and decision as ``AuthMiddleware``'s.

A principal with no role in a project gets 404 for it, as for a project that does not exist:
what a caller cannot see does not exist for them. Handlers read the caller with
``current_principal()`` and, for a list over every project, ``readable_projects()``.
"""

from __future__ import annotations

import contextvars
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from evalsi.auth import (
    LOCAL,
    Access,
    AuditEvent,
    Decision,
    PermissionDenied,
    Principal,
    Unauthenticated,
)
from evalsi.core import NotFoundError, UserError
from evalsi.server._actions import ACTIONS, HEALTH, PATHS, Act
from evalsi.server.protocol import handler_attr
from evalsi.store import check_project_id

_CURRENT: contextvars.ContextVar[Principal | Exception] = contextvars.ContextVar("evalsi_principal")
_READABLE: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "evalsi_readable", default=None
)
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
_OTLP_PREFIXES = ("/opentelemetry.proto.collector.",)
_OTLP_PATHS = frozenset({"/v1/traces", "/v1/logs"})
PROJECT_HEADER = "x-evalsi-project"
OTLP_ACTION = "traces.write"
# Actions whose allowed calls are audited too (what changes state or spends budget).
AUDITED = frozenset(
    {"runs.create", "evaluations.run", "runs.cancel", "runs.resume", "policies.write",
     "datasets.write", "reviews.write", "results.write"}
)  # fmt: skip


def current_principal() -> Principal:
    """The caller of the RPC being answered (``local`` with authentication off)."""
    found = _CURRENT.get(LOCAL)
    return found if isinstance(found, Principal) else LOCAL


def principal_id(state: Any) -> str:
    """What a run records as ``created_by``: the caller's provider/subject ("" with
    authentication off)."""
    access = getattr(state, "access", None)
    return current_principal().id if access is not None and access.enabled else ""


def readable_projects() -> frozenset[str] | None:
    """For a list over every project: the projects the caller may read (None: all)."""
    return _READABLE.get()


def _request_info(method: str, protocol: str, headers: Iterable[tuple[str, str]]) -> dict[str, Any]:
    kept = {k: v for k, v in headers if k not in _CREDENTIAL_HEADERS}
    return {"method": method, "protocol": protocol, "headers": kept}


class Gate:
    """Decides one request and raises what its protocol turns into 401, 403 or 404."""

    def __init__(self, access: Access) -> None:
        self.access = access

    def allows(self, action: str) -> Callable[[str], bool]:
        """Whether the current caller may take ``action`` in a project: decided (and, when
        refused, audited) as a request is; with authentication off, any well-formed project."""

        def check(project: str) -> bool:
            try:
                check_project_id(project)
                if self.access.enabled:
                    resource = {"project": project, "labels": {}}
                    self.decide(current_principal(), action, resource, {}, "", action)
            except (UserError, Unauthenticated, PermissionDenied):  # NotFoundError: a UserError
                return False
            return True

        return check

    def decide(
        self,
        principal: Principal,
        action: str,
        resource: dict[str, Any],
        request: dict[str, Any],
        source: str,
        what: str,
    ) -> Decision:
        access = self.access
        if action == HEALTH:
            if access.settings.open_health or principal.authenticated or not access.enabled:
                return Decision(True, action, "", "health")
            self._deny(principal, action, resource, source, "health is protected", what)
        project = str(resource.get("project") or "")
        decision = access.decide(principal, action, resource, request, source)
        if not decision.allowed:
            self._deny(principal, action, resource, source, decision.by, what)
        if project:
            access.check_project(project)
        if action in AUDITED and access.enabled:
            access.record(
                AuditEvent(
                    principal.id,
                    action,
                    project,
                    what,
                    "allow",
                    decision.by,
                    request_id=_request_id(),
                    source=source,
                )
            )
        return decision

    def _deny(
        self,
        principal: Principal,
        action: str,
        resource: dict[str, Any],
        source: str,
        by: str,
        what: str,
    ) -> None:
        project = str(resource.get("project") or "")
        self.access.record(
            AuditEvent(
                principal.id,
                action,
                project,
                what,
                "deny",
                by,
                request_id=_request_id(),
                source=source,
            )
        )
        if not principal.authenticated and self.access.settings.strict:
            raise Unauthenticated("this server requires a bearer token or an API key")
        if project and project not in self._visible(principal):
            raise NotFoundError(
                f"no project {project!r}",
                hint="or none your credential may see; `evalsi whoami` lists your projects",
            )
        raise PermissionDenied(f"{principal.id or 'anonymous'} may not {action} here ({by})")

    def _visible(self, principal: Principal) -> set[str]:
        held = self.access.authorizer.projects_of(principal)
        return set(self.access.projects) if "*" in held else held

    async def principal(self, headers: Any) -> Principal:
        """The caller: authenticated by the middleware already, or now (the native port)."""
        found = _CURRENT.get(None)
        if found is None:
            try:
                found = await self.access.authenticate({k.lower(): v for k, v in headers.items()})
            except Unauthenticated as e:
                found = e
            _CURRENT.set(found)
        if isinstance(found, Exception):
            self.access.record(
                AuditEvent("", "authenticate", "", "", "deny", str(found), request_id=_request_id())
            )
            raise found
        return found


async def bind_caller(gate: Gate, headers: Mapping[str, str]) -> Principal:
    """Authenticate ``headers`` and make their principal the caller of the RPCs called from
    here on, in this context: for a transport whose handlers run apart from the HTTP request's
    own context (an MCP session's tasks outlive the request that opened it)."""
    try:
        found: Principal | Exception = await gate.access.authenticate(
            {k.lower(): v for k, v in headers.items()}
        )
    except Unauthenticated as e:
        found = e
    _CURRENT.set(found)
    _READABLE.set(None)
    if isinstance(found, Exception):
        raise found
    return found


def _request_id() -> str:
    return secrets.token_hex(8)


def guard_handler(gate: Gate, service: str, methods: Iterable[Any], handler: Any) -> Any:
    """``handler`` with every RPC of ``service`` (descriptor ``methods``) decided first."""
    wrapped: dict[str, Callable[..., Any]] = {}
    for method in methods:
        act = ACTIONS.get(f"{service}/{method.name}")
        if act is None:  # the action table test keeps this from happening
            raise RuntimeError(f"no action for {service}/{method.name}")
        function = getattr(handler, handler_attr(method.name))
        path = f"/{service}/{method.name}"
        if method.client_streaming:
            wrapped[handler_attr(method.name)] = _client_stream(
                gate, act, path, function, method.server_streaming
            )
        elif method.server_streaming:
            wrapped[handler_attr(method.name)] = _server_stream(gate, act, path, function)
        else:
            wrapped[handler_attr(method.name)] = _unary(gate, act, path, function)
    return _Guarded(handler, wrapped)


class _Guarded:
    """A handler's guarded RPC methods, and its other attributes as they are."""

    def __init__(self, handler: Any, methods: dict[str, Callable[..., Any]]) -> None:
        self._handler = handler
        self.__dict__.update(methods)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handler, name)


async def _check(gate: Gate, act: Act, path: str, request: Any, ctx: Any) -> None:
    if act.action == HEALTH and gate.access.settings.open_health:
        # gRPC health as /healthz: probes carry no credential, and a failed authentication
        # would be audited on every probe.
        return
    principal = await gate.principal(ctx.request_headers)
    protocol = "grpc" if ctx.http_method == "POST" else "rest"
    info = _request_info(path, protocol, ctx.request_headers.items())
    source = str(ctx.client_address or "")
    resource = act.resource(request)
    if act.lists and not getattr(request, "project_id", ""):
        _READABLE.set(gate.access.readable(principal, act.action))
        resource = {**resource, "project": ""}
        if gate.access.enabled and not principal.authenticated and gate.access.settings.strict:
            raise Unauthenticated("this server requires a bearer token or an API key")
        return
    gate.decide(principal, act.action, resource, info, source, _what(path, resource))


def _what(path: str, resource: dict[str, Any]) -> str:
    run = resource.get("run")
    if isinstance(run, dict) and run.get("id"):
        return f"run {run['id']}"
    return path


def _unary(gate: Gate, act: Act, path: str, function: Callable[..., Awaitable[Any]]) -> Any:
    async def call(request: Any, ctx: Any) -> Any:
        await _check(gate, act, path, request, ctx)
        return await function(request, ctx)

    return call


def _server_stream(gate: Gate, act: Act, path: str, function: Callable[..., Any]) -> Any:
    async def call(request: Any, ctx: Any) -> AsyncIterator[Any]:
        await _check(gate, act, path, request, ctx)
        async for message in function(request, ctx):
            yield message

    return call


def _client_stream(
    gate: Gate, act: Act, path: str, function: Callable[..., Any], streams_back: bool
) -> Any:
    """A client or bidi stream: decided on its first message (the one naming the project)."""

    async def checked(requests: AsyncIterator[Any], ctx: Any) -> AsyncIterator[Any]:
        first = await anext(aiter(requests), None)
        await _check(gate, act, path, first, ctx)

        async def again() -> AsyncIterator[Any]:
            if first is not None:
                yield first
                async for message in requests:
                    yield message

        return again()

    async def call(requests: AsyncIterator[Any], ctx: Any) -> Any:
        return await function(await checked(requests, ctx), ctx)

    async def bidi(requests: AsyncIterator[Any], ctx: Any) -> AsyncIterator[Any]:
        async for message in function(await checked(requests, ctx), ctx):
            yield message

    return bidi if streams_back else call


def guard_otlp(gate: Gate, service: str, handler: Any) -> Any:
    """``handler`` (an OTLP ``service``: ``Export`` only) decided as ``AuthMiddleware`` decides
    OTLP: for grpcio's own OTLP port, whose calls pass no ASGI middleware."""
    path = f"/{service}/Export"
    export = handler.export

    async def call(request: Any, ctx: Any) -> Any:
        headers = ctx.request_headers
        principal = await gate.principal(headers)
        project = otlp_project(headers, principal)
        headers[PROJECT_HEADER] = project  # the receiver reads the decided project only
        resource = {"project": project, "labels": {}}
        info = _request_info(path, "grpc", headers.items())
        gate.decide(principal, OTLP_ACTION, resource, info, str(ctx.client_address or ""), path)
        token = _CURRENT.set(principal)  # the receiver asks about projects spans name
        try:
            return await export(request, ctx)
        finally:
            _CURRENT.reset(token)

    return _Guarded(handler, {"export": call})


def otlp_project(headers: Any, principal: Principal | Exception) -> str:
    """The project OTLP data goes to: ``x-evalsi-project`` when given, else the API key's own
    (``default`` for other callers). Whether the caller may write there is decided after."""
    named = headers.get(PROJECT_HEADER)
    if named is None and isinstance(principal, Principal) and principal.kind == "apikey":
        named = next(iter(principal.grants), None)
    return str(named or "default") if named != "*" else "default"  # an every-project key


# -- the routes that are not RPCs ----------------------------------------------------------------


class AuthMiddleware:
    """ASGI middleware: authenticate every request; decide the non-RPC routes and OTLP."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            principal: Principal | Exception = await self.gate.access.authenticate(headers)
        except Unauthenticated as e:
            principal = e
        token = _CURRENT.set(principal)
        try:
            path = scope["path"]
            action = PATHS.get(path)
            if action is None and (path in _OTLP_PATHS or path.startswith(_OTLP_PREFIXES)):
                action = OTLP_ACTION
            if action is not None:
                refused = self._decide(scope, headers, principal, action, path)
                if refused is not None:
                    await _refuse(send, *refused)
                    return
            await self.app(scope, receive, send)
        finally:
            _CURRENT.reset(token)

    def _decide(
        self,
        scope: Any,
        headers: dict[str, str],
        principal: Principal | Exception,
        action: str,
        path: str,
    ) -> tuple[int, str, str] | None:
        client = scope.get("client")
        source = f"{client[0]}:{client[1]}" if client else ""
        resource: dict[str, Any] = {"project": "", "labels": {}}
        if action == OTLP_ACTION:
            resource["project"] = self._otlp_project(scope, headers, principal)
        try:
            if isinstance(principal, Exception):
                if action == HEALTH and self.gate.access.settings.open_health:
                    return None
                self.gate.access.record(
                    AuditEvent("", action, str(resource["project"]), path, "deny",
                               str(principal), request_id=_request_id(), source=source)
                )  # fmt: skip
                raise principal
            info = _request_info(path, "http", headers.items())
            self.gate.decide(principal, action, resource, info, source, path)
        except Unauthenticated as e:
            return 401, "unauthenticated", str(e)
        except PermissionDenied as e:
            return 403, "permission_denied", str(e)
        except NotFoundError as e:
            return 404, "not_found", str(e)
        return None

    @staticmethod
    def _otlp_project(scope: Any, headers: dict[str, str], principal: Any) -> str:
        """``otlp_project``, written into the request's header for the receivers."""
        project = otlp_project(headers, principal)
        raw = [(k, v) for k, v in scope["headers"] if k.lower() != PROJECT_HEADER.encode()]
        scope["headers"] = [*raw, (PROJECT_HEADER.encode(), project.encode("latin-1"))]
        return project


async def _refuse(send: Any, status: int, code: str, message: str) -> None:
    body = json.dumps({"code": code, "message": message, "details": []}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="evalsi"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
