"""`evalsi serve`: one ASGI app answering gRPC, gRPC-Web, Connect and REST for every service.

Each RPC has one handler (``_evaluation``, ``_runs``, ``_catalog``, ``_datasets``); connectrpc
carries the RPC protocols and ``protocol`` (the REST gateway, reflection, health, the native
gRPC port) carries the rest to the same handlers; ``otlp`` receives OpenTelemetry traces and
logs. Nothing imports this package except the CLI, through the names below.

The face stays light: a name is imported on first use (core/_lazy.py), so importing
``evalsi.server`` imports neither the ASGI stack nor the config loader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.server._config import load_config, load_sandbox_config
    from evalsi.server._mcp_stdio import serve_stdio as serve_mcp_stdio
    from evalsi.server._mcp_stdio import stdio_config
    from evalsi.server._serve import serve
    from evalsi.server._worker import cluster_report, run_worker

__all__ = [
    "cluster_report",
    "load_config",
    "load_sandbox_config",
    "run_worker",
    "serve",
    "serve_mcp_stdio",
    "stdio_config",
]

# Exports are imported on first use (core/_lazy.py).
__getattr__ = lazy_exports(__name__, __file__)
