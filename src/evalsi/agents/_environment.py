"""The environment the harness owns: every tool call of an agent passes through it, and it
records what happened as trajectory steps — so the trajectory is evidence, not the agent's
own account.

A call goes: tool policy (``_policy``; a block is a ``policy_block`` step and a refusal the
agent can recover from) → the approval gate for irreversible tools (an ``approval`` step with
the decision; with no human in the loop the spec's rule decides, deny by default) → a scheduled
fault, if one is due (a ``fault`` step: ``timeout`` and ``error`` answer without calling the
tool, ``latency`` delays it, ``malformed`` garbles its result) → the tool → an injected payload,
if one is due (a ``fault`` step of kind ``injection``; the payload rides in the result) → the
``tool_call`` step with the arguments, the result or the error. When the task's sandbox stopped
the tool (``SandboxDenied``), a ``sandbox_denial`` step with the detail comes before it.

A tool that raises ``InfraError`` (its server died) is not the agent's doing: the error goes up
and the task is lost to infrastructure, never graded.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from evalsi.agents._cassette import exchange
from evalsi.agents._policy import Decision, ToolPolicy
from evalsi.agents._tools import SandboxDenied, Tool, ToolFailed, ToolSpec
from evalsi.connectors import InfraError
from evalsi.core import JsonValue, Step, ToolCall, UserError

FaultKind = Literal["timeout", "error", "malformed", "latency"]

MAX_RESULT_BYTES = 256 * 1024
"""A tool result larger than this (as JSON) reaches the model and the trajectory cut short:
one task's tool must not fill memory, the store, and every later model call."""
MAX_ERROR_CHARS = 2000
MAX_PARALLEL = 16
"""Tool calls of one task running at once; more wait their turn (their timeout starts then)."""


def bounded(content: Any) -> JsonValue:
    """A tool's value as JSON the harness can store and send: values JSON cannot hold become
    their ``repr``, and a result over ``MAX_RESULT_BYTES`` becomes its text cut short."""
    try:
        data = orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:
        data = orjson.dumps(content, default=repr)
        content = orjson.loads(data)
    if len(data) <= MAX_RESULT_BYTES:
        return content
    text = content if isinstance(content, str) else data.decode("utf-8", "replace")
    cut = text.encode("utf-8")[:MAX_RESULT_BYTES].decode("utf-8", "ignore")
    return f"{cut}\n[... cut by the harness: the result was {len(data):,} bytes]"


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault scheduled on the ``call``-th call of ``tool`` (1-based; ``None``: every call)."""

    tool: str
    kind: FaultKind
    call: int | None = None
    latency_ms: float = 0.0
    message: str = ""

    def due(self, tool: str, n: int) -> bool:
        return tool == self.tool and (self.call is None or self.call == n)


@dataclass(frozen=True, slots=True)
class Injection:
    """A payload (a prompt injection, say) placed in the result of the ``call``-th call of
    ``tool`` (``None``: every call)."""

    tool: str
    payload: str
    call: int | None = None

    def due(self, tool: str, n: int) -> bool:
        return tool == self.tool and (self.call is None or self.call == n)


@dataclass(frozen=True, slots=True)
class Approvals:
    """The approval gate on irreversible tools. No human is in the loop, so the rule decides:
    ``mode`` (``deny``, the default, or ``allow``), except for the tools in ``allow``, which
    are approved."""

    mode: Literal["deny", "allow"] = "deny"
    allow: frozenset[str] = frozenset()

    def decide(self, tool: str) -> bool:
        return self.mode == "allow" or tool in self.allow


@dataclass(slots=True)
class ToolResult:
    """What the agent gets back (``content``, or ``error`` when the call failed or was refused)
    and the steps the environment recorded for the call, in order."""

    content: JsonValue
    error: str = ""
    steps: list[Step] = field(default_factory=list)

    def for_model(self) -> str:
        """The result as a tool message's text."""
        if self.error:
            return f"error: {self.error}"
        if isinstance(self.content, str):
            return self.content
        return orjson.dumps(self.content).decode()


class Environment:
    """Tools behind policy, approvals, faults and injections, with every call recorded.

    Args:
        tools: the tools (names must be unique).
        policy: which calls reach a tool.
        approvals: the gate on irreversible tools.
        faults: faults to inject, each on its scheduled call.
        injections: payloads to place in results.
        timeout_s: a tool call that takes longer fails with a timeout (the agent's to handle).
        clock: nanoseconds, for step times.
    """

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        policy: ToolPolicy | None = None,
        approvals: Approvals | None = None,
        faults: Sequence[Fault] = (),
        injections: Sequence[Injection] = (),
        timeout_s: float = 30.0,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.spec.name in self.tools:
                raise UserError(f"spec.environment.tools: two tools are named {tool.spec.name!r}")
            self.tools[tool.spec.name] = tool
        self.policy = policy or ToolPolicy()
        self.policy.check_names(self.tools)
        scheduled: list[tuple[str, str]] = [("faults", f.tool) for f in faults]
        scheduled += [("injections", i.tool) for i in injections]
        for what, name in scheduled:
            if name not in self.tools:
                raise UserError(
                    f"spec.environment.{what}: no tool named {name!r}",
                    hint=f"the tools are: {', '.join(sorted(self.tools)) or '(none)'}",
                )
        self.approvals = approvals or Approvals()
        unknown = sorted(self.approvals.allow - self.tools.keys())
        if unknown:
            raise UserError(
                f"spec.environment.policy.approvals.allow: no tool named {', '.join(unknown)}",
                hint=f"the tools are: {', '.join(sorted(self.tools)) or '(none)'}",
            )
        self.faults = tuple(faults)
        self.injections = tuple(injections)
        self.timeout_s = timeout_s
        self.clock = clock
        self.calls: Counter[str] = Counter()  # attempts per tool, blocked ones included
        self._slots = asyncio.Semaphore(MAX_PARALLEL)
        self._decisions: dict[str, Decision] = {}

    def specs(self) -> list[ToolSpec]:
        """What the agent is offered: every tool (a blocked one too: trying it is behaviour)."""
        return [t.spec for t in self.tools.values()]

    async def call(self, call: ToolCall) -> ToolResult:
        """Run one call of the agent through the environment."""
        tool = self.tools.get(call.name)
        started = self.clock()
        if tool is None:
            error = f"no tool named {call.name!r}" if call.name else "the call names no tool"
            return ToolResult(None, error, [self._step(call, None, error, started)])
        if not isinstance(call.arguments, dict):  # never run a tool on arguments it was not sent
            error = f"the arguments of {call.name} are not a JSON object"
            return ToolResult(None, error, [self._step(call, None, error, started)])
        args = call.arguments
        self.calls[call.name] += 1
        n = self.calls[call.name]
        steps: list[Step] = []
        decision = self._decisions.get(call.name)
        if decision is None:  # a tool's spec and the policy stay put for the task
            decision = self._decisions[call.name] = self.policy.decide(tool.spec)
        if not decision.allowed:
            steps.append(
                Step(
                    "policy_block",
                    call.name,
                    input=args,
                    output={"rule": decision.rule, "reason": decision.reason},
                    start_time_unix_nano=started,
                    end_time_unix_nano=started,
                )
            )
            return ToolResult(None, f"blocked by policy: {decision.reason}", steps)
        if tool.spec.effective() == "irreversible":
            approved = self.approvals.decide(call.name)
            steps.append(
                Step(
                    "approval",
                    call.name,
                    input=args,
                    output={"decision": "approved" if approved else "denied", "by": "policy"},
                    start_time_unix_nano=started,
                    end_time_unix_nano=self.clock(),
                )
            )
            if not approved:
                return ToolResult(None, f"{call.name} needs an approval, and it was denied", steps)
        fault = next((f for f in self.faults if f.due(call.name, n)), None) if self.faults else None
        if fault is not None:
            now = self.clock()
            step = Step(
                "fault",
                call.name,
                output={"kind": fault.kind, "call": n},
                start_time_unix_nano=now,
                end_time_unix_nano=now,
            )
            steps.append(step)
            if fault.kind in ("timeout", "error"):
                error = fault.message or (
                    f"{call.name} timed out" if fault.kind == "timeout" else f"{call.name} failed"
                )
                steps.append(self._step(call, None, error, started))
                return ToolResult(None, error, steps)
            if fault.kind == "latency":
                await asyncio.sleep(fault.latency_ms / 1000)
                step.end_time_unix_nano = self.clock()  # the delay it injected
        content, error = await self._run(tool, args, steps)
        if fault is not None and fault.kind == "malformed" and not error:
            content = orjson.dumps(content).decode()[: max(1, len(orjson.dumps(content)) // 2)]
        injection = (
            next((i for i in self.injections if i.due(call.name, n)), None)
            if self.injections
            else None
        )
        if injection is not None and not error:
            now = self.clock()
            steps.append(
                Step(
                    "fault",
                    call.name,
                    output={"kind": "injection", "payload": injection.payload},
                    start_time_unix_nano=now,
                    end_time_unix_nano=now,
                )
            )
            content = (
                f"{content}\n\n{injection.payload}"
                if isinstance(content, str)
                else {"result": content, "note": injection.payload}
            )
        steps.append(self._step(call, content, error, started))
        return ToolResult(content, error, steps)

    async def _run(
        self, tool: Tool, args: Mapping[str, Any], steps: list[Step]
    ) -> tuple[JsonValue, str]:
        name = tool.spec.name
        outcome = await exchange(
            f"tool:{name}", {"tool": name, "arguments": args}, lambda: self._call(tool, args)
        )
        denial = outcome.get("denial")
        if denial is not None:
            now = self.clock()
            steps.append(
                Step(
                    "sandbox_denial",
                    name,
                    input=dict(args),
                    output={"detail": denial},
                    start_time_unix_nano=now,
                    end_time_unix_nano=now,
                )
            )
        if "error" in outcome:
            return None, str(outcome["error"])
        return outcome.get("content"), ""

    async def _call(self, tool: Tool, args: Mapping[str, Any]) -> dict[str, JsonValue]:
        """The tool's answer as the cassette keeps it: ``{"content"}``, or ``{"error"}`` with
        the sandbox's ``denial`` when it stopped the tool (a replayed call never gets here)."""
        try:
            async with self._slots, asyncio.timeout(self.timeout_s):  # over the cap: wait first
                content = await tool.call(args)
        except InfraError:
            raise
        except TimeoutError:
            return {"error": f"{tool.spec.name} did not answer within {self.timeout_s:g}s"}
        except SandboxDenied as e:
            return {"error": str(e)[:MAX_ERROR_CHARS], "denial": e.detail[:MAX_ERROR_CHARS]}
        except ToolFailed as e:
            return {"error": str(e)[:MAX_ERROR_CHARS]}
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the run is being stopped
            return {"error": "CancelledError raised by the tool"}
        except (Exception, SystemExit, KeyboardInterrupt) as e:  # noqa: BLE001 - the tool's own
            return {"error": f"{type(e).__name__}: {e}"[:MAX_ERROR_CHARS]}
        return {"content": bounded(content)}

    def _step(self, call: ToolCall, content: JsonValue, error: str, started: int) -> Step:
        return Step(
            "tool_call",
            call.name,
            output=content,
            tool_call=call,
            error=error,
            start_time_unix_nano=started,
            end_time_unix_nano=self.clock(),
        )
