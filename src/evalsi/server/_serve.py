"""``evalsi serve``: open the store, build the app, run hypercorn until SIGINT or SIGTERM.

hypercorn serves HTTP/1.1 and cleartext HTTP/2 (h2c, prior knowledge) on the one port, with
the ASGI trailers extension gRPC needs. Its default ``keep_alive_max_requests`` (1000) closes a
connection with GOAWAY after that many requests and fails the gRPC call in flight, so it is
raised far out of reach (docs/decisions/0005-one-port-server.md).

With ``grpc_port`` set, grpcio's native server answers gRPC on a second port too, in the same
event loop and over the same handlers (``_grpc_port``); it starts once the app's lifespan has
started (the run scheduler is up) and drains alongside hypercorn on shutdown.

With ``auth.tls`` every listener speaks TLS only (``_tls``): hypercorn's ports offer ALPN
``h2`` and ``http/1.1``, grpcio's take the same certificate and key, and with
``clientCaFile`` every port requires a client certificate. grpcio's OTLP port is guarded here
(``guard_otlp``), as the app's own middleware guards OTLP on hypercorn's ports.
"""

from __future__ import annotations

import asyncio
import copy
import errno
import gc
import logging
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evalsi.core import RunError
from evalsi.server._state import ServerConfig, ServerState, server_registry
from evalsi.server._web_guard import bracketed, is_loopback

if TYPE_CHECKING:
    from evalsi.server._tls import TlsFiles
    from evalsi.server.protocol import GrpcPort

log = logging.getLogger("evalsi.server")

KEEP_ALIVE_MAX_REQUESTS = 1_000_000_000
# Seconds open streams (WatchRun) get to finish once a shutdown starts.
GRACEFUL_TIMEOUT_S = 5.0


def _setup_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            level=logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )


def serve(config: ServerConfig) -> int:
    """Serve until SIGINT/SIGTERM; 0 after a clean shutdown."""
    _setup_logging()
    from evalsi.server._app import build_app
    from evalsi.server._run_manager import RunManager
    from evalsi.server.otlp import GC_THRESHOLDS
    from evalsi.store import SqlStore

    config.data_dir.mkdir(parents=True, exist_ok=True)
    config.datasets_dir.mkdir(parents=True, exist_ok=True)
    store = SqlStore.open(config.store)
    try:
        state = ServerState(config=config, store=store, registry=server_registry(config))
        state.object_store()  # objectStore: a wrong endpoint, bucket or key stops the start
        state.runs = RunManager(state)
        app = build_app(state)
        if config.no_auth and not is_loopback(config.host):
            log.warning(
                "listening on %s without authentication (--no-auth): anyone who can reach "
                "the port can run evaluations and read every result",
                config.host,
            )

        def listening() -> None:
            # Said once the port really accepts connections, never before a bind that fails.
            log.info(
                "evalsi serve: listening on %s://%s:%d (gRPC, gRPC-Web, Connect, REST)%s; "
                "store %s; datasets %s",
                "https" if config.auth.tls is not None else "http",
                bracketed(config.host),
                config.port,
                _client_certs(config),
                store.location,
                config.datasets_dir,
            )
            otlp = config.traces.otlp
            log.info(
                "evalsi serve: OTLP traces on the main port (POST /v1/traces, gRPC TraceService)%s",
                "".join(
                    f"; {name} on {port}"
                    for name, port in (("OTLP/gRPC", otlp.grpc_port), ("OTLP/HTTP", otlp.http_port))
                    if port is not None
                ),
            )

        # What start-up built lives as long as the server: out of the collector's sight.
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        asyncio.run(_run(app, config, listening))
    finally:
        store.close()
    log.info("evalsi serve: stopped")
    return 0


async def _run(app: Any, config: ServerConfig, listening: Callable[[], None]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await run_servers(app, config, stop, listening=listening)


async def run_servers(
    app: Any,
    config: ServerConfig,
    stop: asyncio.Event,
    *,
    listening: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` on ``config.port`` (and the native gRPC port, if any) until ``stop``;
    ``listening`` is called once every port accepts connections."""
    from hypercorn.asyncio.run import worker_serve
    from hypercorn.config import Config
    from hypercorn.utils import wrap_app

    from evalsi.server.otlp import OtlpOnlyOn, otlp_binds, otlp_ports

    # auth.tls's files, tried before any port is claimed or any lifespan starts.
    tls = _tls_files(config)
    hc = Config()
    # traces.otlp ports (4317/4318) are extra binds of the same app, answering OTLP only.
    hc.bind = [f"{bracketed(config.host)}:{config.port}", *otlp_binds(config)]
    hc.keep_alive_max_requests = KEEP_ALIVE_MAX_REQUESTS
    hc.graceful_timeout = GRACEFUL_TIMEOUT_S
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    if tls is not None:
        from evalsi.server._tls import configure_hypercorn

        configure_hypercorn(hc, tls)
    # grpcio listeners, bound now so a busy port fails before anything runs: server.grpcPort
    # and traces.otlp.grpcPort
    natives = _native_ports(app, config, tls)
    # hypercorn starts the app's lifespan (scheduler, watchers) before it binds, and a failed
    # bind then left that lifespan to be cancelled mid-flight: a page of tracebacks. Bound
    # here first, a busy port stops before anything started.
    try:
        sockets = _bind(hc, config)
    except BaseException:
        for native in natives:
            await native.stop(None)
        raise
    draining: list[asyncio.Task[None]] = []

    async def until_stopped() -> None:
        # hypercorn awaits this once the lifespan has started and its port listens.
        for native in natives:
            await native.start()
        if listening is not None:
            listening()
        await stop.wait()
        for native in natives:
            draining.append(asyncio.create_task(native.stop(GRACEFUL_TIMEOUT_S)))

    try:
        served: Any = OtlpOnlyOn(app, otlp_ports(config)) if otlp_ports(config) else app
        wrapped = wrap_app(served, hc.wsgi_max_body_size, "asgi")
        await worker_serve(wrapped, hc, sockets=sockets, shutdown_trigger=until_stopped)
    finally:
        if draining:
            await asyncio.gather(*draining)
        else:
            for native in natives:
                await native.stop(None)


def _bind(hc: Any, config: ServerConfig) -> Any:
    """hypercorn's sockets for ``hc.bind``, one bind at a time so an error names its port."""
    from hypercorn.config import Sockets

    from evalsi.server.otlp import otlp_ports

    bound: list[Any] = []
    for bind, port in zip(hc.bind, [config.port, *otlp_ports(config)], strict=True):
        one = copy.copy(hc)
        one.bind = [bind]
        try:
            made = one.create_sockets()
            bound.extend([*made.secure_sockets, *made.insecure_sockets])
        except OSError as e:
            for sock in bound:
                sock.close()
            why = "address already in use" if e.errno == errno.EADDRINUSE else e.strerror or e
            raise RunError(
                f"cannot listen on {bracketed(config.host)}:{port}: {why}",
                hint="another evalsi serve may be running; pick another --port"
                if port == config.port
                else "pick another traces.otlp port, or stop whatever is using this one",
            ) from e
    # With certfile set, hypercorn wraps every socket it is given as secure in TLS.
    return Sockets(bound, [], []) if hc.ssl_enabled else Sockets([], bound, [])


def _tls_files(config: ServerConfig) -> TlsFiles | None:
    if config.auth.tls is None:
        return None
    from evalsi.server._tls import load_tls

    return load_tls(config.auth.tls)


def _client_certs(config: ServerConfig) -> str:
    tls = config.auth.tls
    return "; client certificates required" if tls is not None and tls.client_ca_file else ""


def _native_ports(app: Any, config: ServerConfig, tls: TlsFiles | None = None) -> list[GrpcPort]:
    """grpcio's servers, bound: every service on ``server.grpcPort``, and OTLP/gRPC on
    ``traces.otlp.grpcPort`` when that is a port of its own."""
    natives = []
    host, cap = bracketed(config.host), config.max_body_bytes
    shown = " over TLS" if tls is not None else ""
    if config.grpc_port is not None:
        from evalsi.server.protocol import GrpcPort

        # The handlers build_app guarded: each RPC is decided on this port as on the main one.
        native = GrpcPort(app.state.handlers, app.state.metrics, max_body_bytes=cap)
        port = native.bind(config.host, config.grpc_port, tls=tls)
        log.info("evalsi serve: native gRPC (grpcio) on %s:%d%s", host, port, shown)
        natives.append(native)
    from evalsi.server.otlp import LOGS_SERVICE, SERVICE, RawExport, native_grpc_port

    otlp_port = native_grpc_port(config)
    handlers = getattr(app.state, "otlp_handlers", None)
    if otlp_port is not None and handlers:
        from evalsi.server.protocol import GrpcPort

        guarded = _guarded_otlp(app, config, handlers)
        raw = {f"{SERVICE}/Export": RawExport, f"{LOGS_SERVICE}/Export": RawExport}
        native = GrpcPort(guarded, app.state.metrics, max_body_bytes=cap, raw=raw)
        port = native.bind(config.host, otlp_port, "traces.otlp.grpcPort", tls=tls)
        log.info("evalsi serve: OTLP/gRPC (grpcio) on %s:%d%s", host, port, shown)
        natives.append(native)
    return natives


def _guarded_otlp(app: Any, config: ServerConfig, handlers: dict[str, Any]) -> dict[str, Any]:
    """The OTLP handlers behind the app's gate: no middleware sees grpcio's calls, so each
    ``Export`` is decided here as ``AuthMiddleware`` decides OTLP on hypercorn's ports."""
    gate = getattr(app.state, "gate", None)
    if gate is None:
        if config.auth.enabled:  # never serve OTLP unguarded where identity is required
            raise RuntimeError("the app has no gate to guard traces.otlp.grpcPort with")
        return handlers
    from evalsi.server._guard import guard_otlp

    return {name: guard_otlp(gate, name, handler) for name, handler in handlers.items()}
