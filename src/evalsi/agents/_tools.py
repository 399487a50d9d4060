"""Tools an agent may call, as the harness declares them: what each may do, to what data, and
whether it can be undone. The declaration, not the tool's own claims, is what tool policy and
the approval gate read (``_policy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from evalsi.core import JsonValue, UserError

Permission = Literal["read", "write", "irreversible"]
PERMISSIONS: tuple[Permission, ...] = ("read", "write", "irreversible")
"""Ordered from harmless to dangerous: a tool's effective permission is the most dangerous of
what the harness declared and what the tool's server hints."""


@dataclass(frozen=True, slots=True)
class ToolHints:
    """What a tool's server says of it (MCP annotations). Untrusted: they may make the
    harness stricter, never more lenient. MCP's defaults apply when unset: a tool that does not
    say it is read-only may write, and one that does not say otherwise may destroy."""

    read_only: bool | None = None
    destructive: bool | None = None

    def permission(self) -> Permission:
        if self.destructive is True:  # read-only *and* destructive reads as destructive
            return "irreversible"
        if self.read_only is True:
            return "read"
        return "write" if self.destructive is False else "irreversible"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the harness declares it.

    Attributes:
        name: what the agent calls it.
        description: what the model is told it does.
        input_schema: the JSON Schema of its arguments (an object).
        permission: ``read``, ``write`` or ``irreversible`` (as declared; see ``effective``).
        data_class: the data it touches (``public``, ``internal``, ``confidential``,
            ``personal``), for evaluators and reports.
        reversible: whether its effect can be undone.
        exposure: ``internal`` (stays in the environment) or ``external`` (reaches outside).
        hints: what the tool's server claims, if it claims anything.
        declared: whether the harness declared ``permission`` (else it comes from the hints).
    """

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    permission: Permission = "read"
    data_class: str = "public"
    reversible: bool = True
    exposure: Literal["internal", "external"] = "internal"
    hints: ToolHints | None = None
    declared: bool = True

    def effective(self) -> Permission:
        """The permission policy reads: the declared one, raised by the server's hints."""
        if self.hints is None:  # most tools: asked for on every call, so kept cheap
            return self.permission if self.declared else "irreversible"
        hinted = self.hints.permission()
        if not self.declared:
            return hinted
        return max(self.permission, hinted, key=PERMISSIONS.index)

    def to_openai(self) -> dict[str, Any]:
        """The tool as an OpenAI-compatible ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.input_schema),
            },
        }


class Tool(Protocol):
    """Anything the environment can call: its declaration and the call itself. A tool that
    fails raises (``ToolFailed`` for a failure the agent should see, anything else counts as the
    tool's failure too); the environment records it and answers the agent with the error."""

    spec: ToolSpec

    async def call(self, arguments: Mapping[str, Any]) -> JsonValue: ...


class ToolFailed(Exception):
    """A tool's failure the agent sees as the call's result (an error it may recover from)."""


class SandboxDenied(ToolFailed):
    """The task's sandbox stopped what a tool tried (a path out of the workspace, a syscall its
    filter kills, a write to a read-only workspace): a refusal the agent sees, which the
    environment also records as a ``sandbox_denial`` step with ``detail``."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"denied by the sandbox: {detail}")
        self.detail = detail


class FunctionTool:
    """A Python function as a tool: its keyword arguments are the tool's arguments; a sync
    function runs in a worker thread.

    Example:
        >>> def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> tool = FunctionTool(add)
        >>> tool.spec.name, tool.spec.description, sorted(tool.spec.input_schema["properties"])
        ('add', 'Add two numbers.', ['a', 'b'])
        >>> asyncio.run(tool.call({"a": 2, "b": 3}))
        5
    """

    def __init__(
        self, fn: Callable[..., Any], spec: ToolSpec | None = None, **declared: Any
    ) -> None:
        self.fn = fn
        self.spec = spec or ToolSpec(
            name=fn.__name__,
            description=inspect.getdoc(fn) or "",
            input_schema=schema_of(fn),
            **declared,
        )
        self._async = inspect.iscoroutinefunction(fn)

    async def call(self, arguments: Mapping[str, Any]) -> JsonValue:
        try:
            inspect.signature(self.fn).bind(**arguments)
        except TypeError as e:
            raise ToolFailed(f"bad arguments for {self.spec.name}: {e}") from None
        if self._async:
            return await self.fn(**arguments)
        return await in_daemon_thread(self.fn, dict(arguments))


async def in_daemon_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)`` in a thread of its own. Not the default pool: a tool that hangs past
    its timeout keeps its thread, and in a shared pool it would starve every other tool and
    block the interpreter's exit (a daemon thread does neither); what it raises, even
    ``SystemExit``, is its failure."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            (future.set_result if ok else future.set_exception)(value)

    context = contextvars.copy_context()  # the task's workspace, as asyncio tasks see it

    def run() -> None:
        try:
            outcome: tuple[bool, Any] = (True, context.run(fn, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            error = e if isinstance(e, Exception) else ToolFailed(f"{type(e).__name__}: {e}")
            outcome = (False, error)
        with contextlib.suppress(RuntimeError):  # the run ended while the tool hung
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name="evalsi-tool", daemon=True).start()
    return await future


_JSON_TYPES: dict[Any, str] = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def schema_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """A JSON Schema of a function's keyword arguments, typed where its annotations are plain
    (``int``, ``str``...); parameters without a default are required."""
    properties: dict[str, Any] = {}
    required = []
    hints = inspect.get_annotations(fn, eval_str=True)
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise UserError(f"tool {fn.__name__}: parameter {name!r} must be passable by keyword")
        kind = _JSON_TYPES.get(hints.get(name))
        properties[name] = {"type": kind} if kind else {}
        if p.default is p.empty:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}
