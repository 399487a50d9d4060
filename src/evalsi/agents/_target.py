"""An agent as a Run target: a harness (the built-in loop over a model, a Python class, or a
process speaking the harness protocol) run on each task in an environment built from the spec's
``environment``.

Entered (``async with``) before the first task: function tools are imported, MCP servers
started, checkers loaded, the sandbox ladder probed and the harness connected then, so a bad
tool, a server that will not start, a policy naming no tool or a sandbox this machine cannot
give stops the run before any task, naming the field. Each task then gets its own workspace
(a fresh sandbox, fixtures written), a fresh ``Environment`` over the same tools (its own call
counts, so faults and injections land on each task's N-th call), and, once the agent stops, the
checkers' verdicts and a snapshot of the workspace in its trajectory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from types import TracebackType
from typing import Any, Protocol, cast

from evalsi.agents._cassette import Tape, exchange, taping
from evalsi.agents._checkers import Checker, snapshot, task_fixtures, write_fixtures
from evalsi.agents._connectors import ConnectorContext, connect
from evalsi.agents._egress import check_resolved
from evalsi.agents._environment import Approvals, Environment, Fault, Injection
from evalsi.agents._git_workspace import check_out, checked_out
from evalsi.agents._harness import (
    BuiltinHarness,
    Final,
    Harness,
    MultiTurnHarness,
    PythonHarness,
    TaskSetup,
)
from evalsi.agents._loop import Budgets, ChatModel, Price, ToolLoop
from evalsi.agents._mcp import McpServer
from evalsi.agents._policy import ToolPolicy
from evalsi.agents._sandbox_tools import sandbox_tools
from evalsi.agents._simulator import UserSimulator, converse
from evalsi.agents._tools import FunctionTool, Tool, ToolSpec
from evalsi.agents._workspace import bound
from evalsi.connectors import (
    EgressPolicy,
    InfraError,
    InputLike,
    Resilience,
    TargetError,
    TargetOutput,
    TaskInfo,
    load_callable,
)
from evalsi.core import (
    Cassette,
    Check,
    Content,
    JsonValue,
    Step,
    Trajectory,
    Usage,
    UserError,
)
from evalsi.sandbox import AsyncSandbox, Level, Resources, SandboxSpec, SandboxUnavailable
from evalsi.specs import (
    AgentSpec,
    EnvironmentSpec,
    HarnessSpec,
    SandboxSettingsSpec,
    ToolDeclarationSpec,
)


class Replay(Protocol):
    """Where a replay's tasks find their recorded cassettes: ``cassette(sample_id, trial)``
    (``None``: none recorded), and the branch point (``None``: replay every call)."""

    live_after: int | None

    def cassette(self, sample_id: str, trial: int) -> Cassette | None: ...

    def provenance(self) -> dict[str, Any]:
        """What the replaying run records of where its cassettes came from."""
        ...


RemoteHarness = Callable[[HarnessSpec, str], contextlib.AbstractAsyncContextManager[Harness]]
"""Connects a harness in another process (``grpc`` or ``command``), given the spec and the
field it came from; supplied by the entry point (the gRPC client lives at the edge, ``wire``)."""

DEFAULT_HARNESS_SECONDS = 1800.0
"""A harness's ``Run`` without ``maxDuration`` is stopped (``timeout``) after this long."""

MAX_EVENTS = 100_000
"""Events one task's ``run`` may stream; a harness past it has failed (a loop, or hostile)."""


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


class AgentTarget:
    """An agent over ``environment``: the built-in loop over ``model``, or the harness
    ``agent.harness`` names (a ``grpc`` or ``command`` one through ``remote``)."""

    connector = "agent"
    supports_seed = True
    per_task = True

    def __init__(
        self,
        model: ChatModel | None,
        agent: AgentSpec,
        environment: EnvironmentSpec | None,
        *,
        price: Price | None = None,
        egress: EgressPolicy | None = None,
        remote: RemoteHarness | None = None,
        replay: Replay | None = None,
        resilience: Resilience | None = None,
        user: UserSimulator | None = None,
    ) -> None:
        self.user = user
        self.loop = (
            ToolLoop(
                model,
                Budgets(agent.max_steps, agent.max_tokens, agent.max_usd, agent.max_seconds),
                price=price,
            )
            if model is not None
            else None
        )
        self.agent = agent
        self.env_spec = environment or EnvironmentSpec(tools=())
        self.egress = egress
        self.remote = remote
        self.replay = replay
        self.resilience = resilience
        self.tools: list[Tool] = []
        self.checkers: list[Checker] = []
        self.sandbox_spec: SandboxSpec | None = None
        self.harness: Harness | None = None
        self._where: dict[str, str] = {}  # tool name -> the spec entry it came from
        self._stack: contextlib.AsyncExitStack | None = None

    def describe(self) -> dict[str, Any]:
        h = self.agent.harness
        out: dict[str, Any] = {"connector": self.connector}
        if self.agent.kind != "builtin":
            section = getattr(self.agent, self.agent.kind)
            out["kind"] = self.agent.kind
            out["agent"] = {  # where the agent is, never its headers (they may hold secrets)
                k: getattr(section, k)
                for k in ("url", "base_url", "model", "command", "tool", "prompt")
                if getattr(section, k, "")
            }
        elif h is not None:
            out["harness"] = h.python or h.grpc or " ".join(h.argv)
        else:
            assert self.loop is not None
            model = cast(Any, self.loop.model)
            describe = getattr(model, "describe", None)
            out["model"] = describe() if callable(describe) else {"model": self.loop.model.model}
            out["max_steps"] = self.agent.max_steps
        out["tools"] = [  # where the tools come from, not their (server-side) versions
            t.function or t.url or " ".join(t.command) or "sandbox:" + ",".join(t.sandbox)
            for t in self.env_spec.tools
        ]
        if self.env_spec.checkers:
            out["checkers"] = [c.name for c in self.env_spec.checkers]
        if self.user is not None:
            out["user"] = self.user.describe()
        return out

    async def __aenter__(self) -> AgentTarget:
        kind = self.agent.kind
        if self.env_spec.tools and (
            self.agent.harness is not None or kind not in ("builtin", "responses")
        ):
            who = "harness" if kind == "builtin" else f"{kind} agent"
            raise UserError(
                f"spec.environment.tools: a {who} brings its own tools",
                hint="list tools only for the built-in agent or a responses agent",
            )
        stack = contextlib.AsyncExitStack()
        try:
            await self._tools(stack)
            self.checkers = [
                Checker(c, f"spec.environment.checkers[{i}]")
                for i, c in enumerate(self.env_spec.checkers)
            ]
            if self.env_spec.has_workspace():
                self.sandbox_spec = _sandbox_spec(self.env_spec.sandbox or SandboxSettingsSpec())
                await _probe(self.sandbox_spec)
            self.harness = await self._harness(stack)
            if self.user is not None and not callable(getattr(self.harness, "turn", None)):
                raise UserError(
                    "spec.target.agent.user: this agent cannot hold a conversation over "
                    "several turns (its harness has no `turn`)",
                    hint="a simulated user needs the built-in agent or a Python harness "
                    "with `async def turn(session, message)`",
                )
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def _tools(self, stack: contextlib.AsyncExitStack) -> None:
        for i, entry in enumerate(self.env_spec.tools):
            at = f"spec.environment.tools[{i}]"
            if entry.sandbox:
                for tool in sandbox_tools(entry.sandbox):
                    self._add(tool, at)
                continue
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

    async def _harness(self, stack: contextlib.AsyncExitStack) -> Harness:
        h = self.agent.harness
        at = "spec.target.agent.harness"
        if self.agent.kind != "builtin":
            context = ConnectorContext(
                self.agent,
                self.env_spec,
                self.environment,
                self.egress,
                f"spec.target.agent.{self.agent.kind}",
                replaying=self.replay is not None and self.replay.live_after is None,
                resilience=self.resilience,
            )
            return await stack.enter_async_context(connect(context))
        if h is None:
            assert self.loop is not None
            return BuiltinHarness(self.loop, self.environment)
        if h.python:
            return await stack.enter_async_context(PythonHarness(h.python, f"{at}.python"))
        if self.remote is None:
            raise UserError(f"{at}: this entry point cannot reach a harness in another process")
        where = f"{at}.grpc" if h.grpc else f"{at}.command"
        return await stack.enter_async_context(self.remote(h, where))

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

    async def invoke(
        self, input: InputLike, *, seed: int | None = None, task: TaskInfo | None = None
    ) -> TargetOutput:
        harness = self.harness
        if self._stack is None or harness is None:
            raise RuntimeError("AgentTarget is used inside `async with` (tools not started)")
        sample = task.sample if task is not None else None
        fixtures = task_fixtures(self.env_spec.fixtures, sample)
        sandbox = None
        if self.sandbox_spec is not None:
            try:
                sandbox = await AsyncSandbox.create(self.sandbox_spec)
            except SandboxUnavailable as e:
                raise InfraError("sandbox", f"spec.environment.sandbox: {e}") from None
        checkout = None
        try:
            if sandbox is not None:  # the repository first: fixtures overlay its files
                checkout = await check_out(self.env_spec.repository, sample, sandbox.workspace)
                await write_fixtures(sandbox, fixtures)
            setup = TaskSetup(
                run_id=task.run_id if task is not None else "",
                task_id=task.sample_id if task is not None else "",
                trial=task.trial if task is not None else 0,
                seed=seed,
                input=_content(input),
                fixtures=fixtures,
                workspace=sandbox.workspace if sandbox is not None else None,
                metadata=sample.metadata if sample is not None else {},
            )
            tape = self._tape(setup)
            with bound(sandbox), taping(tape), checked_out(checkout):
                out = await self._task(harness, setup, sandbox, sample)
            if tape is not None and (self.agent.record_cassette or tape.source is not None):
                out = replace(out, cassette=tape.cassette())
            return out
        finally:
            if checkout is not None:
                checkout.close()
            if sandbox is not None:
                await sandbox.destroy()

    def _tape(self, setup: TaskSetup) -> Tape | None:
        """The task's tape: replaying (or branching from) the recorded task's cassette, or
        recording; none when the spec turned recording off."""
        if self.replay is not None:
            source = self.replay.cassette(setup.task_id, setup.trial)
            if source is None:
                raise InfraError(
                    "cassette",
                    f"replay: the recorded run has no cassette for sample {setup.task_id!r} "
                    f"trial {setup.trial} (recorded with cassette.record: false, or lost)",
                )
            return Tape(source, live_after=self.replay.live_after)
        return Tape() if self.agent.record_cassette else None

    async def _task(
        self, harness: Harness, setup: TaskSetup, sandbox: AsyncSandbox | None, sample: Any
    ) -> TargetOutput:
        user = self.user.for_task(setup.task_id, setup.metadata) if self.user else None
        session = await _harness_call("setup", harness.setup(setup))
        try:
            steps, final = await self._run(harness, session)
            if user is not None:
                multi = cast(MultiTurnHarness, harness)

                async def turn(message: Content) -> None:
                    await _harness_call("turn", multi.turn(session, message))

                final = await converse(
                    user, setup, steps, final, turn, lambda: self._run(harness, session)
                )
            checks, end_state = await self._verdicts(harness, session, sandbox, sample)
        finally:
            await _harness_call("teardown", harness.teardown(session))
        trajectory = Trajectory(steps, final.stop_reason, checks, end_state or None)
        return TargetOutput(
            final.output, await _recorded_latency(final.usage), trajectory=trajectory
        )

    async def _verdicts(
        self, harness: Harness, session: str, sandbox: AsyncSandbox | None, sample: Any
    ) -> tuple[list[Check], dict[str, JsonValue]]:
        """The environment's verdicts and its end state. With a workspace they go through the
        task's cassette: a replay made no tool call, so the workspace holds none of their
        effects, and the recorded verdicts stand for the state they saw. A harness that rebuilds
        the workspace on replay (a CLI agent re-applies its diff) is checked live instead."""

        async def live() -> dict[str, JsonValue]:
            result = await _harness_call("check", harness.check(session))
            checks: list[Check] = list(result.checks)
            end_state: dict[str, JsonValue] = {}
            if sandbox is not None:
                for checker in self.checkers:
                    checks.append(await checker.check(sandbox, sample))
                end_state.update(await asyncio.to_thread(snapshot, sandbox.workspace))
            if result.end_state is not None:
                end_state["harness"] = result.end_state
            return {"checks": [c.to_value() for c in checks], "end_state": end_state}

        if sandbox is None or getattr(harness, "restores_workspace", False):
            got = await live()  # no workspace: what the harness reports of its own state
        else:
            names = [c.spec.name for c in self.checkers]
            got = await exchange("check", {"checkers": names}, live)
        checks = [Check(**c) for c in got["checks"]]
        return checks, dict(got["end_state"])

    async def _run(self, harness: Harness, session: str) -> tuple[list[Step], Final]:
        steps: list[Step] = []
        limit = None  # the built-in loop keeps its own clock
        if self.agent.harness is not None or self.agent.kind != "builtin":
            limit = self.agent.max_seconds or DEFAULT_HARNESS_SECONDS
        events = harness.run(session)
        try:
            async with asyncio.timeout(limit):
                async for event in events:
                    if isinstance(event, Final):
                        return steps, event
                    if not isinstance(event, Step):
                        raise InfraError(
                            "harness", f"run yielded {type(event).__name__}, not a Step or Final"
                        )
                    if len(steps) >= MAX_EVENTS:
                        raise InfraError("harness", f"run streamed more than {MAX_EVENTS} steps")
                    steps.append(event)
        except TimeoutError:
            return steps, Final(Content.of_text(""), stop_reason="timeout")
        except (InfraError, TargetError, UserError):
            raise
        except Exception as e:  # noqa: BLE001 - the harness broke, not the agent
            raise InfraError("harness", f"run failed: {type(e).__name__}: {e}") from None
        finally:
            await _close(events)
        raise InfraError("harness", "run ended without a Final (the agent's answer)")


async def _recorded_latency(usage: Usage) -> Usage:
    """The task's latency through the cassette: a replay's own time says nothing of the agent,
    so a replay reports the recorded task's (latency metrics and budgets stay the same)."""
    if usage.latency_ms is None:
        return usage
    measured = usage.latency_ms

    async def live() -> dict[str, JsonValue]:
        return {"latency_ms": measured}

    got = await exchange("latency", None, live)
    return replace(usage, latency_ms=float(got["latency_ms"]))


async def _harness_call(name: str, call: Any) -> Any:
    try:
        return await call
    except (InfraError, TargetError, UserError):
        raise
    except Exception as e:  # noqa: BLE001 - the harness broke, not the agent
        raise InfraError("harness", f"{name} failed: {type(e).__name__}: {e}") from None


async def _close(events: Any) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


def _content(input: InputLike) -> Content:
    if isinstance(input, Content):
        return input
    if isinstance(input, str):
        return Content.of_text(input)
    return Content.of_messages(list(input))


def _sandbox_spec(s: SandboxSettingsSpec) -> SandboxSpec:
    resources = Resources() if s.memory_mb is None else Resources(memory_mb=s.memory_mb)
    return SandboxSpec(
        min_isolation=Level.parse(s.min_isolation),
        network="loopback" if s.network == "loopback" else "deny",
        timeout_seconds=s.timeout_s,
        resources=resources,
    )


async def _probe(spec: SandboxSpec) -> None:
    """Refuse the run before its first task when no rung gives ``spec``."""
    try:
        sandbox = await AsyncSandbox.create(spec)
    except SandboxUnavailable as e:
        raise UserError(
            f"spec.environment.sandbox: {e}",
            hint="`evalsi sandbox probe` shows the rungs this machine has; minIsolation: none "
            "accepts running unconfined",
        ) from None
    await sandbox.destroy()
