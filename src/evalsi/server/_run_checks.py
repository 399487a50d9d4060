"""What this server refuses of a run's spec: anything that would run, or reach, code of the
request's choosing on the server's own machine, unless ``allow_python_targets`` says the
server is trusted. Code that runs in the sandbox (sandbox tools, exit-code checkers, a CLI
agent) and network calls the egress policy checks are allowed."""

from __future__ import annotations

import dataclasses

from evalsi.core import UserError
from evalsi.server._state import ServerConfig
from evalsi.specs import RunSpec


def check_target(kind: str, config: ServerConfig) -> None:
    """Refuse a Python target unless ``allow_python_targets`` (code on the server's disk)."""
    if kind == "python" and not config.allow_python_targets:
        raise UserError(
            "spec.target.python: Python targets are refused by this server: the code "
            "would be imported from the server's own disk and run inside it",
            hint="serve the system under test over HTTP and use a `target.http` (or a "
            "`target.model` for a model API), or enable allow_python_targets in "
            "evalsi.yaml on a trusted server",
        )


def check_tools(spec: RunSpec, config: ServerConfig) -> None:
    """Refuse what would run code of the client's choosing on this server unless
    ``allow_python_targets``: an agent's function tools, started MCP servers, Python
    checkers, and harnesses other than the built-in loop (a Python class, a started process,
    or a local socket or port that reaches inward). An MCP server reached at a URL is only a
    network call, which the egress policy checks; sandbox tools and exit-code checkers run
    in the sandbox."""
    if config.allow_python_targets:
        return
    agent = spec.target.agent
    if agent is not None and agent.harness is not None:
        raise UserError(
            "spec.target.agent.harness: refused by this server: it would run or reach code "
            "of the request's choosing on the server",
            hint="run the agent with the built-in loop (target.agent.model), or enable "
            "allow_python_targets in evalsi.yaml on a trusted server",
        )
    if agent is not None and agent.mcp is not None and agent.mcp.command:
        raise UserError(
            "spec.target.agent.mcp.command: refused by this server: it would start a process "
            "of the request's choosing on the server",
            hint="reach the agent's MCP server over HTTP (mcp.url), or enable "
            "allow_python_targets in evalsi.yaml on a trusted server",
        )
    if spec.environment is None:
        return
    if spec.environment.repository is not None:
        raise UserError(
            "spec.environment.repository: refused by this server: it would read a git "
            "repository of the request's choosing from the server's disk",
            hint="give the task's files as fixtures, or enable allow_python_targets in "
            "evalsi.yaml on a trusted server",
        )
    for i, checker in enumerate(spec.environment.checkers):
        if checker.kind == "python":
            raise UserError(
                f"spec.environment.checkers[{i}].python: refused by this server: it would "
                "run code of the request's choosing on the server",
                hint="check with exitCode or jsonFile (they run in the sandbox), or enable "
                "allow_python_targets in evalsi.yaml on a trusted server",
            )
    for i, tool in enumerate(spec.environment.tools):
        if tool.function or tool.command:
            what = "function" if tool.function else "mcp.command"
            raise UserError(
                f"spec.environment.tools[{i}].{what}: refused by this server: it would run "
                "code of the request's choosing on the server",
                hint="reach the tools as MCP servers over HTTP (mcp.url), or enable "
                "allow_python_targets in evalsi.yaml on a trusted server",
            )


def servable(config: ServerConfig, spec: RunSpec) -> RunSpec:
    """``spec`` as this server runs it (its target and tools allowed here); naming no judges,
    it gets the server's (``evalsi.yaml`` ``judges``)."""
    check_target(spec.target.kind, config)
    check_tools(spec, config)
    if spec.judges or not config.judges:
        return spec
    return dataclasses.replace(spec, judges=dict(config.judges))


__all__ = ["check_target", "check_tools", "servable"]
