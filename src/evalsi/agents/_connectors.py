"""Agents that exist already, driven as harnesses: ``spec.target.agent.kind`` names one, and
its section configures it.

| kind | module | the agent |
|---|---|---|
| ``a2a`` | ``_a2a`` | an Agent2Agent server (``a2a-sdk``): tasks, streamed updates, artifacts |
| ``mcp`` | ``_mcp_agent`` | an MCP server whose tool (or prompt) is the agent |
| ``responses`` | ``_responses`` | an OpenAI Responses-compatible endpoint |
| ``http`` | ``_http_agent`` | any HTTP API: a body template in, JSONPaths out |
| ``cli`` | ``_cli_agent`` | a command-line agent run in the task's sandbox on its workspace |

Each module's ``connect(section, context)`` is an async context manager giving a ``Harness``;
everything a connector sends its agent goes through ``_cassette.exchange``, so its runs record a
cassette and replay from it like the built-in loop's.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalsi.agents._environment import Environment
from evalsi.agents._harness import Harness
from evalsi.connectors import EgressPolicy, Resilience
from evalsi.core import UserError
from evalsi.specs import AgentSpec, EnvironmentSpec

MODULES = {
    "a2a": "_a2a",
    "mcp": "_mcp_agent",
    "responses": "_responses",
    "http": "_http_agent",
    "cli": "_cli_agent",
}


@dataclass(frozen=True, slots=True)
class ConnectorContext:
    """What a connector may use besides its section: the run's agent and environment specs,
    a fresh ``Environment`` per task (for an agent that asks evalsi to run its tools), the
    server's egress policy (``None`` in the embedded CLI), where its section is (for
    errors), and whether every call of the run is replayed from cassettes (then the connector
    must not reach its agent when it connects: the agent may be gone)."""

    agent: AgentSpec
    environment_spec: EnvironmentSpec
    environment: Callable[[], Environment]
    egress: EgressPolicy | None
    where: str
    replaying: bool = False
    resilience: Resilience | None = None  # the run's retries, breakers and limits


def connect(
    context: ConnectorContext,
) -> contextlib.AbstractAsyncContextManager[Harness]:
    """The harness for ``context.agent.kind``."""
    kind = context.agent.kind
    section: Any = getattr(context.agent, kind, None)
    if kind not in MODULES or section is None:
        raise UserError(f"{context.where}: unknown agent kind {kind!r}")
    module = importlib.import_module(f"evalsi.agents.{MODULES[kind]}")
    result: contextlib.AbstractAsyncContextManager[Harness] = module.connect(section, context)
    return result
