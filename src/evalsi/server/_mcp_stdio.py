"""``evalsi mcp``: the MCP tools (``_mcp``) over stdin/stdout, on the user's own machine.

The caller is the local user, who owns the store: the handlers are called unguarded, as
``evalsi run`` would, on a state built as ``evalsi serve`` builds its own (the run manager
started; Watch's ingest and policies are not: they belong to a server).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from evalsi.server._mcp import McpTools
from evalsi.server._mcp_serve import report_renderer
from evalsi.server._state import ServerConfig, ServerState, server_registry


def stdio_config(config: ServerConfig, configured_datasets: bool) -> ServerConfig:
    """What ``evalsi mcp`` serves with: the user's own machine, as ``evalsi run`` sees it —
    datasets relative to the working directory unless ``datasetsDir`` is set, and Python
    targets and tools of the user's own code allowed."""
    datasets = config.datasets_dir if configured_datasets else Path.cwd()
    return dataclasses.replace(config, datasets_dir=datasets, allow_python_targets=True)


def serve_stdio(config: ServerConfig) -> int:
    """Serve the MCP tools over stdin/stdout until the client closes them."""
    from evalsi.server._app import default_services
    from evalsi.server._run_manager import RunManager
    from evalsi.store import SqlStore

    config.data_dir.mkdir(parents=True, exist_ok=True)
    store = SqlStore.open(config.store)
    try:
        state = ServerState(config=config, store=store, registry=server_registry(config))
        state.runs = RunManager(state)
        services = default_services(state)
        handlers = {factory(handler).path.strip("/"): handler for factory, handler in services}
        tools = McpTools(handlers, report_renderer(state))
        asyncio.run(_stdio(state, tools))
    finally:
        store.close()
    return 0


async def _stdio(state: ServerState, tools: McpTools) -> None:
    from mcp.server.stdio import stdio_server

    from evalsi.connectors import close_shared_session
    from evalsi.datasets import param_files_confined
    from evalsi.sandbox import configure as configure_sandbox

    server = tools.server()
    configure_sandbox(state.config.sandbox)
    assert state.runs is not None
    await state.runs.start()
    try:
        with param_files_confined(state.config.datasets_dir):
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
    finally:
        await state.runs.stop()
        await close_shared_session()
        configure_sandbox(None)


__all__ = ["serve_stdio", "stdio_config"]
