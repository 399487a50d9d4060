"""``evalsi serve``: the API server (gRPC, gRPC-Web, Connect, REST) on one port."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evalsi.core import require_extra

DEFAULT_CONFIG = "evalsi.yaml"

EPILOG = """\
examples:
  evalsi serve                                  # 127.0.0.1:8080, store .evalsi/evalsi.db
  evalsi serve --port 9090 --config evalsi.yaml
  evalsi serve --host 0.0.0.0 --no-auth         # reachable from other machines: no auth!
  evalsi serve --grpc-port 9090                 # also native gRPC (grpcio) on 9090: faster

one port answers every protocol, for every service:
  gRPC (HTTP/2 cleartext), gRPC-Web, Connect (JSON or protobuf)
      POST /evalsi.v1alpha1.EvaluationService/Evaluate   (also RunService, CatalogService,
                                                           DatasetService)
  REST (proto3 JSON), e.g.
      curl http://127.0.0.1:8080/v1alpha1/evaluate -d '{"records": [{"id": "1",
        "output": {"text": "Paris"}, "reference": {"text": "Paris"}}],
        "evaluators": [{"ref": "exact-match"}]}'
      curl http://127.0.0.1:8080/v1alpha1/runs
  GET /openapi.json   the REST API as OpenAPI 3.1
  GET /healthz        200 while serving
  GET /metrics        Prometheus: requests, latencies, runs and tasks by state
  gRPC health (grpc.health.v1.Health) and reflection (grpcurl -plaintext HOST:PORT list)

optional second port (--grpc-port or server.grpcPort; off by default):
  plain gRPC only, served by grpcio's C core: the same services, health and reflection,
  errors, body limit and /metrics (protocol="grpc_native"), a few times less overhead per
  call than gRPC on the main port. Same listen address as the main port.

evalsi.yaml (every key optional; relative paths start from the file's directory):
  server: {host: 127.0.0.1, port: 8080, maxBodyBytes: 33554432, maxConcurrentRuns: 4,
           grpcPort: 9090}                 # grpcPort: optional, off when absent
  storage: {sqlite: {path: .evalsi/evalsi.db}}     # or {postgres: {dsn: postgresql://...}}
  dataDir: .evalsi
  datasetsDir: .evalsi/datasets                    # dataset paths in requests stay inside
  judges: {default: {connector: openai-compatible, baseUrl: ..., model: ..., secretRef: env:KEY}}
  allowPythonTargets: false
  secrets: {allowEnv: [OPENAI_API_KEY]}            # env: refs run specs may use (default none)

Flags override the file. SIGINT or SIGTERM stops the server gracefully; runs in progress
are resumed from the store on the next start.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "serve",
        help="run the API server (gRPC, gRPC-Web, Connect, REST on one port)",
        description="Serve the evalsi API: every service on every protocol, on one port.",
        epilog=EPILOG,
    )
    p.add_argument(
        "--host", help="listen address (default 127.0.0.1; non-loopback needs --no-auth)"
    )
    p.add_argument("--port", type=int, help="listen port (default 8080)")
    p.add_argument(
        "--grpc-port",
        type=int,
        metavar="PORT",
        help="also serve native gRPC (grpcio, lower latency) on this port, same host; "
        "default: off (gRPC stays on --port either way)",
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="evalsi.yaml to read (default: ./evalsi.yaml when it exists)",
    )
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="allow a non-loopback --host although the server has no authentication yet",
    )
    p.set_defaults(handler=serve_command)


SERVER_MODULES = ("starlette", "hypercorn", "prometheus_client", "grpc", "opentelemetry.proto")
"""What the ``server`` extra installs (pyproject.toml): checked before any of it is imported."""


def serve_command(args: argparse.Namespace) -> int:
    require_extra("evalsi serve", "server", *SERVER_MODULES)
    from evalsi.server import load_config, serve

    path = args.config
    if path is None and Path(DEFAULT_CONFIG).is_file():  # the project's own file, if it has one
        path = Path(DEFAULT_CONFIG)
    config = load_config(
        path, host=args.host, port=args.port, grpc_port=args.grpc_port, no_auth=args.no_auth
    )
    return serve(config)
