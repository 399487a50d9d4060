"""The one ASGI app ``evalsi serve`` runs: every protocol and endpoint on one port.

* ``/<package>.<Service>/<Method>``: gRPC (HTTP/2), gRPC-Web and Connect (JSON or protobuf,
  HTTP/1.1 or 2), carried by connectrpc for each service handler;
* the ``google.api.http`` routes (``/v1alpha1/...``) on the same handlers (``_rest``);
* ``/openapi.json`` (``_openapi``), ``/healthz``, ``/metrics`` (``_metrics``);
* ``grpc.health.v1.Health`` and gRPC reflection (v1 and v1alpha);
* ``/.well-known/evalsi-auth``: the issuer and client id ``evalsi login`` signs in with;
* ``/mcp``: the same handlers as MCP tools over streamable HTTP, with the protected-resource
  metadata MCP clients read (``_mcp_serve``).

Every RPC app shares the interceptors: metrics first (it sees requests whose body fails to
parse), then the error mapping (``_errors``), and the body cap ``max_body_bytes``. Before any
route, ``_web_guard`` refuses what a browser page could send (foreign Host, Origin, form
content types), then ``_guard`` authenticates the request; every service handler is wrapped by
``_guard`` too, so each RPC is decided on whichever protocol or port it arrives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

from connectrpc.compat import google_protobuf_binary_codec
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from evalsi._proto.grpc.health.v1.health_connect import HealthASGIApplication
from evalsi._proto.grpc.reflection.v1.reflection_connect import ServerReflectionASGIApplication
from evalsi.connectors import close_shared_session
from evalsi.datasets import param_files_confined
from evalsi.sandbox import configure as configure_sandbox
from evalsi.server._errors import ErrorInterceptor
from evalsi.server._metrics import CONTENT_TYPE, Metrics
from evalsi.server._state import ServerState
from evalsi.server._web_guard import WebGuard
from evalsi.server.protocol import (
    V1ALPHA_SERVICE,
    FastJSONCodec,
    HealthHandler,
    ReflectionHandler,
    V1AlphaReflectionASGIApplication,
    build_openapi,
    rest_routes,
)

AppFactory = Callable[..., Any]
"""A generated ``XxxASGIApplication`` class (called with the handler and options)."""

ServiceBinding = tuple[AppFactory, Any]
"""``(XxxASGIApplication, handler)``: one service and the object implementing it."""


def _no_path(path: str) -> bool:
    return False


def default_services(state: ServerState) -> list[ServiceBinding]:
    """The API services over ``state``; imported here so building them stays lazy.

    Builds the Watch way in onto ``state`` first (trace store, ingest, policy engine), which
    the Trace and Policy services share with the OTLP endpoints."""
    from evalsi._proto.evalsi.v1alpha1.auth_service_connect import AuthServiceASGIApplication
    from evalsi._proto.evalsi.v1alpha1.catalog_service_connect import CatalogServiceASGIApplication
    from evalsi._proto.evalsi.v1alpha1.dataset_service_connect import DatasetServiceASGIApplication
    from evalsi._proto.evalsi.v1alpha1.evaluation_service_connect import (
        EvaluationServiceASGIApplication,
    )
    from evalsi._proto.evalsi.v1alpha1.ingest_service_connect import IngestServiceASGIApplication
    from evalsi._proto.evalsi.v1alpha1.policy_service_connect import PolicyServiceASGIApplication
    from evalsi._proto.evalsi.v1alpha1.promotion_service_connect import (
        PromotionServiceASGIApplication,
    )
    from evalsi._proto.evalsi.v1alpha1.review_service_connect import ReviewServiceASGIApplication
    from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceASGIApplication
    from evalsi._proto.evalsi.v1alpha1.trace_service_connect import TraceServiceASGIApplication
    from evalsi.server._auth_service import AuthHandler
    from evalsi.server._catalog import CatalogHandler
    from evalsi.server._datasets import DatasetHandler
    from evalsi.server._evaluation import EvaluationHandler
    from evalsi.server._ingestion import IngestHandler
    from evalsi.server._policies import PolicyHandler
    from evalsi.server._promotion import PromotionHandler
    from evalsi.server._reviews import ReviewHandler
    from evalsi.server._runs import RunHandler
    from evalsi.server._traces import TraceHandler
    from evalsi.server._watch import Watch

    if state.watch is None:
        state.watch = Watch(state)
    policies = PolicyHandler(state, state.policies)
    state.watch.policy_service = policies  # started with the app: re-applies stored policies

    return [
        (EvaluationServiceASGIApplication, EvaluationHandler(state)),
        (CatalogServiceASGIApplication, CatalogHandler(state)),
        (DatasetServiceASGIApplication, DatasetHandler(state)),
        (RunServiceASGIApplication, RunHandler(state)),
        (TraceServiceASGIApplication, TraceHandler(state)),
        (PolicyServiceASGIApplication, policies),
        (IngestServiceASGIApplication, IngestHandler(state)),
        (ReviewServiceASGIApplication, ReviewHandler(state)),
        (PromotionServiceASGIApplication, PromotionHandler(state)),
        (AuthServiceASGIApplication, AuthHandler(access_of(state))),
    ]


def access_of(state: ServerState) -> Any:
    """The state's ``Access``, built from ``config.auth`` on first use."""
    if state.access is None:
        from evalsi.auth import Access

        state.access = Access(state.config.auth, state.store)
    return state.access


def _guarded(gate: Any, service: str, handler: Any, shape: str = "") -> Any:
    """``handler`` of ``service`` behind the gate (``shape``: a service with the same methods,
    for one that is not in the descriptor pool)."""
    from google.protobuf import descriptor_pool

    from evalsi.server._guard import guard_handler

    descriptor = descriptor_pool.Default().FindServiceByName(shape or service)
    return guard_handler(gate, service, descriptor.methods, handler)


def build_app(state: ServerState, services: Sequence[ServiceBinding] | None = None) -> Starlette:
    """The server's ASGI app over ``state``.

    Args:
        state: configuration, store, registry and run scheduler shared by the handlers.
        services: ``(XxxASGIApplication, handler)`` pairs; by default evalsi's services
            (``default_services``). Tests pass their own.
    """
    bindings = list(services) if services is not None else default_services(state)
    from evalsi.server._guard import OTLP_ACTION, AuthMiddleware, Gate

    gate = Gate(access_of(state))
    bindings = [
        (factory, _guarded(gate, factory(handler).path.strip("/"), handler))
        for factory, handler in bindings
    ]
    metrics = Metrics(state)
    options: dict[str, Any] = {
        "interceptors": (metrics.interceptor, ErrorInterceptor()),
        "read_max_bytes": state.config.max_body_bytes,
        # Compact proto3 JSON, several times faster than json_format's (_json_codec). Unknown
        # JSON fields are an error (a typo must not be ignored silently), as on REST.
        "codecs": (google_protobuf_binary_codec(), FastJSONCodec()),
    }
    rpc_apps = [factory(handler, **options) for factory, handler in bindings]
    handlers = {
        app.path.strip("/"): handler for app, (_, handler) in zip(rpc_apps, bindings, strict=True)
    }
    reflection = ReflectionHandler(
        [*handlers, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", V1ALPHA_SERVICE]
    )
    health = HealthHandler([*handlers, "grpc.reflection.v1.ServerReflection", V1ALPHA_SERVICE])
    guarded_health = _guarded(gate, "grpc.health.v1.Health", health)
    guarded_reflection = _guarded(gate, "grpc.reflection.v1.ServerReflection", reflection)
    guarded_v1alpha = _guarded(
        gate, V1ALPHA_SERVICE, reflection, shape="grpc.reflection.v1.ServerReflection"
    )
    rpc_apps += [
        HealthASGIApplication(guarded_health, **options),
        ServerReflectionASGIApplication(guarded_reflection, **options),
        V1AlphaReflectionASGIApplication(guarded_v1alpha, **options),
    ]
    openapi_doc: dict[str, Any] = {}

    async def openapi(request: Request) -> Response:
        if not openapi_doc:
            openapi_doc.update(build_openapi(handlers))
        return JSONResponse(openapi_doc)

    async def healthz(request: Request) -> Response:
        ok = health.status("") == 1
        return JSONResponse({"status": "ok" if ok else "shutting down"}, 200 if ok else 503)

    async def prometheus(request: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def login_info(request: Request) -> Response:
        login = state.config.auth.cli_login
        if login is None:
            return JSONResponse({"issuer": "", "client_id": "", "audience": ""})
        return JSONResponse(
            {"issuer": login.issuer, "client_id": login.client_id, "audience": login.audience}
        )

    from evalsi.server._mcp_serve import mcp_http

    mcp = mcp_http(state, handlers, gate)  # the same guarded handlers, as MCP tools
    otlp: list[BaseRoute] = []
    otlp_grpc: dict[str, Any] = {}
    own_body_rules: Callable[[str], bool] = _no_path
    if state.watch is not None:  # the OTLP endpoints feed the Watch pipeline
        from evalsi.server.otlp import is_otlp_path, otlp_handlers, otlp_mounts

        own_body_rules = is_otlp_path  # they answer 415 for a content type of their own

        watch = state.watch
        otlp = otlp_mounts(
            watch.ingest,
            state.config,
            interceptors=options["interceptors"],
            metrics=metrics,
            workers=(watch.pool, watch.ingest) if watch.pool is not None else None,
            events=watch.ingest,  # span events sent as OTLP log records
            may_write=gate.allows(OTLP_ACTION),  # a span's evalsi.project, where allowed
        )
        otlp_grpc = otlp_handlers(otlp)
    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", prometheus, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/.well-known/evalsi-auth", login_info, methods=["GET"]),
        *(Mount(app.path, app) for app in rpc_apps),
        *rest_routes(handlers, max_body_bytes=state.config.max_body_bytes, metrics=metrics),
        *otlp,
        *mcp.routes(),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        configure_sandbox(state.config.sandbox)  # this process's ladder, floor, concurrency
        if state.runs is not None:
            await state.runs.start()
        if state.watch is not None:
            await state.watch.start()
        try:
            # Files named by evaluator params (a drift baseline) come from datasets_dir only.
            with param_files_confined(state.config.datasets_dir):
                async with mcp.running(), _cluster_metrics(metrics):
                    yield
        finally:
            health.shutting_down()
            if state.watch is not None:
                await state.watch.stop()
            if state.runs is not None:
                await state.runs.stop()
            await close_shared_session()  # the judges' HTTP session on the server's loop
            configure_sandbox(None)
            gate.access.close()  # the audit events still queued are written

    # Before any route: Host, Origin and content type (DNS rebinding, cross-site requests).
    guard = Middleware(
        WebGuard,
        allowed_hosts=state.config.allowed_hosts,
        allow_origins=state.config.cors_allow_origins,
        own_body_rules=own_body_rules,
    )
    app = Starlette(
        routes=routes, lifespan=lifespan, middleware=[guard, Middleware(AuthMiddleware, gate=gate)]
    )
    app.state.metrics = metrics
    app.state.health = health
    # The OTLP TraceService and LogsService handlers by service name, for grpcio on
    # traces.otlp.grpcPort (_serve).
    app.state.otlp_handlers = otlp_grpc
    # Every service name and the object answering it: the native gRPC port (_grpc_port)
    # serves these same objects.
    app.state.handlers = {
        **handlers,
        "grpc.health.v1.Health": guarded_health,
        "grpc.reflection.v1.ServerReflection": guarded_reflection,
        V1ALPHA_SERVICE: guarded_v1alpha,
    }
    app.state.gate = gate
    return app


def _cluster_metrics(metrics: Metrics) -> AbstractAsyncContextManager[Any]:
    """The cluster's status read in the background while the app runs (with ``cluster:``)."""
    return metrics.cluster.running() if metrics.cluster is not None else nullcontext()
