"""An agent as a Run target: the built-in loop over a model, in an environment built from the
spec's ``environment`` for the run.

Entered (``async with``) before the first task: function tools are imported and MCP servers
started then, so a bad tool, a server that will not start, or a policy naming no tool stops the
run before any task, naming the field. Each task gets a fresh ``Environment`` over the same
tools (its own call counts, so faults and injections land on each task's N-th call).
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Any, cast

from evalsi.agents._environment import Approvals, Environment, Fault, Injection
from evalsi.agents._loop import Budgets, ChatModel, Price, ToolLoop
from evalsi.agents._mcp import McpServer
from evalsi.agents._policy import ToolPolicy
from evalsi.agents._tools import FunctionTool, Tool, ToolSpec
from evalsi.connectors import InputLike, TargetOutput, load_callable
from evalsi.core import UserError
from evalsi.specs import AgentSpec, EnvironmentSpec, ToolDeclarationSpec


def _declare(spec: ToolSpec, d: ToolDeclarationSpec | None) -> ToolSpec:
    if d is None:
        return spec
    from dataclasses import replace

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
    ) -> None:
        self.loop = ToolLoop(
            model,
            Budgets(agent.max_steps, agent.max_tokens, agent.max_usd, agent.max_seconds),
            price=price,
        )
        self.agent = agent
        self.env_spec = environment
        self.tools: list[Tool] = []
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
                    fn = load_callable(entry.function)
                    name = entry.function.rpartition(":")[2].rpartition(".")[2]
                    tool = FunctionTool(fn)
                    tool.spec = _declare(tool.spec, entry.declared.get(name))
                    self.tools.append(tool)
                    continue
                declared = {name: _declare(ToolSpec(name), d) for name, d in entry.declared.items()}
                try:
                    server = McpServer(
                        command=entry.command, url=entry.url, declared=declared, env=entry.env
                    )
                    await stack.enter_async_context(server)
                except UserError as e:
                    raise UserError(f"{at}: {e.message}", hint=e.hint) from None
                self.tools.extend(server.tools)
            self.environment()  # a policy, fault or injection naming no tool fails here
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

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
