"""An agent as a Run target: the built-in loop over a model, in an environment built from the
spec's ``environment`` for the run.

Entered (``async with``) before the first task: function tools are imported and MCP servers
started then, so a bad tool, a server that will not start, or a policy naming no tool stops the
run before any task, naming the field. Each task gets a fresh ``Environment`` over the same
tools (its own call counts, so faults and injections land on each task's N-th call).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from types import TracebackType
from typing import Any, cast

from evalsi.agents._environment import Approvals, Environment, Fault, Injection
from evalsi.agents._loop import Budgets, ChatModel, Price, ToolLoop
from evalsi.agents._mcp import McpServer
from evalsi.agents._policy import ToolPolicy
from evalsi.agents._tools import FunctionTool, Tool, ToolSpec
from evalsi.connectors import EgressPolicy, InputLike, TargetOutput, load_callable
from evalsi.core import UserError
from evalsi.specs import AgentSpec, EnvironmentSpec, ToolDeclarationSpec


def _declare(spec: ToolSpec, d: ToolDeclarationSpec | None) -> ToolSpec:
    if d is None:
        return spec
    changes: dict[str, Any] = {
        k: v
        for k, v in (
            ("permission", d.permission),
            ("data_class", d.data_class),
            ("reversible", d.reversible),
            ("exposure", d.exposure),
        )
        if v is not None
    }
    return replace(spec, declared=True, **changes)


async def check_resolved(policy: EgressPolicy, url: str, where: str) -> None:
    """The egress policy on every address ``url``'s host resolves to. The MCP SDK connects
    with its own HTTP client, which the connectors' connect-time check does not reach; a name
    that re-resolves elsewhere between this check and the connection (DNS rebinding) is not
    caught."""
    import socket
    import urllib.parse

    from evalsi.connectors import literal_address

    policy.check_url(url, where=where)
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if not host or literal_address(host) is not None:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise UserError(f"{where}: cannot resolve {host}: {e}") from None
    for info in infos:
        address = literal_address(str(info[4][0]))
        if address is not None:
            try:
                policy.check(host, address, port)
            except UserError as e:
                raise UserError(f"{where}: {e.message}", hint=e.hint) from None


class AgentTarget:
    """The built-in agent over ``model`` with the tools of ``environment``."""

    connector = "agent"
    supports_seed = True

    def __init__(
        self,
        model: ChatModel,
        agent: AgentSpec,
        environment: EnvironmentSpec,
        *,
        price: Price | None = None,
        egress: EgressPolicy | None = None,
    ) -> None:
        self.loop = ToolLoop(
            model,
            Budgets(agent.max_steps, agent.max_tokens, agent.max_usd, agent.max_seconds),
            price=price,
        )
        self.agent = agent
        self.env_spec = environment
        self.egress = egress
        self.tools: list[Tool] = []
        self._where: dict[str, str] = {}  # tool name -> the spec entry it came from
        self._stack: contextlib.AsyncExitStack | None = None

    def describe(self) -> dict[str, Any]:
        model = cast(Any, self.loop.model)
        describe = getattr(model, "describe", None)
        tools = [
            t.function or (t.url or " ".join(t.command)) for t in self.env_spec.tools
        ]  # where the tools come from, not their (server-side) versions
        return {
            "connector": self.connector,
            "model": describe() if callable(describe) else {"model": self.loop.model.model},
            "max_steps": self.agent.max_steps,
            "tools": tools,
        }

    async def __aenter__(self) -> AgentTarget:
        stack = contextlib.AsyncExitStack()
        try:
            for i, entry in enumerate(self.env_spec.tools):
                at = f"spec.environment.tools[{i}]"
                if entry.function:
                    name = entry.function.rpartition(":")[2].rpartition(".")[2]
                    try:
                        tool = FunctionTool(load_callable(entry.function))
                    except UserError as e:
                        message = e.message.replace("python target", "function")
                        raise UserError(f"{at}.function: {message}", hint=e.hint) from None
                    tool.spec = _declare(tool.spec, entry.declared.get(name))
                    self._add(tool, at)
                    continue
                if entry.url and self.egress is not None:
                    await check_resolved(self.egress, entry.url, f"{at}.mcp.url")
                declared = {name: _declare(ToolSpec(name), d) for name, d in entry.declared.items()}
                try:
                    server = McpServer(
                        command=entry.command, url=entry.url, declared=declared, env=entry.env
                    )
                    await stack.enter_async_context(server)
                except UserError as e:
                    raise UserError(f"{at}: {e.message}", hint=e.hint) from None
                for mcp_tool in server.tools:
                    self._add(mcp_tool, at)
            self.environment()  # a policy, fault or injection naming no tool fails here
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    def _add(self, tool: Tool, at: str) -> None:
        where = self._where.get(tool.spec.name)
        if where is not None:
            raise UserError(
                f"{at}: a tool named {tool.spec.name!r} comes from {where} too",
                hint="tool names must be unique across the environment's entries",
            )
        self._where[tool.spec.name] = at
        self.tools.append(tool)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    def environment(self) -> Environment:
        """A fresh environment over the run's tools (one per task)."""
        e = self.env_spec
        return Environment(
            self.tools,
            policy=ToolPolicy(
                allow=e.allow,
                deny=e.deny,
                allow_destructive=e.allow_destructive,
                read_only=e.read_only,
                default="deny" if e.default == "deny" else "allow",
            ),
            approvals=Approvals("allow" if e.approvals_mode == "allow" else "deny", e.approved),
            faults=[Fault(**f) for f in e.faults],
            injections=[Injection(**i) for i in e.injections],
            timeout_s=e.tool_timeout_s,
        )

    async def invoke(self, input: InputLike, *, seed: int | None = None) -> TargetOutput:
        if self._stack is None:
            raise RuntimeError("AgentTarget is used inside `async with` (tools not started)")
        return await self.loop.run(input, self.environment(), seed=seed)
