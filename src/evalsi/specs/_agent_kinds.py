"""The agents that already exist, as ``spec.target.agent`` names them (``kind`` and its section):
plain data, checked by ``_evalrun_agent``; ``evalsi.agents`` builds a harness from each.

Secrets stay references (``env:NAME``, ``file:PATH``): they are read when the run starts, never
stored with the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

AgentKind = Literal["builtin", "a2a", "mcp", "responses", "http", "cli"]
AGENT_KINDS: tuple[AgentKind, ...] = ("builtin", "a2a", "mcp", "responses", "http", "cli")
CONNECTOR_KINDS: tuple[AgentKind, ...] = AGENT_KINDS[1:]


@dataclass(frozen=True, slots=True)
class A2aAgentSpec:
    """An Agent2Agent server at ``url`` (its card at ``/.well-known/agent-card.json``)."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = True


@dataclass(frozen=True, slots=True)
class McpAgentSpec:
    """An agent behind an MCP server (``command`` to start over stdio, or ``url``): the tool
    ``tool`` called with the input in ``input_argument``, or the prompt ``prompt``."""

    command: tuple[str, ...] = ()
    url: str = ""
    tool: str = ""
    prompt: str = ""
    input_argument: str = "input"
    arguments: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""


@dataclass(frozen=True, slots=True)
class ResponsesAgentSpec:
    """An OpenAI Responses-compatible endpoint (``POST {base_url}/responses``)."""

    base_url: str
    model: str
    secret_ref: str = ""
    instructions: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    max_turns: int = 10


@dataclass(frozen=True, slots=True)
class HttpAgentSpec:
    """Any HTTP agent: a Jinja2 body template in; JSONPaths to the answer, the transcript and a
    session id out."""

    url: str
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    output: str = ""
    transcript: str = ""
    session: str = ""


@dataclass(frozen=True, slots=True)
class CliAgentSpec:
    """A command-line agent run in the task's sandbox, on its workspace."""

    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    commands_file: str = ".evalsi/commands.jsonl"
    timeout_s: float = 600.0


@dataclass(frozen=True, slots=True)
class UserSimulatorSpec:
    """A simulated user: its model (``connector``, ``base_url``, ``model``, ``params``,
    ``secret_ref``, as a judge's), who it is and what it wants, how it stops."""

    connector: str
    model: str
    base_url: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    secret_ref: str = ""
    persona: str = ""
    goal: str = ""
    hidden: str = ""
    stop_token: str = "###STOP###"
    max_turns: int = 10
    max_usd: float | None = None
    api_version: str = ""
    region: str = ""
    auth: str = ""


@dataclass(frozen=True, slots=True)
class GitWorkspaceSpec:
    """A repository (``path``, resolved) checked out at ``commit`` as each task's workspace."""

    path: str
    commit: str = "HEAD"
