"""The harness protocol, in Python: what evalsi asks of anything that runs an agent on a task.

For each task: ``setup`` (the input, fixtures and workspace; returns a session name), ``run``
(the trajectory's steps as they happen, then one ``Final``), ``check`` (the environment's own
verdicts and a snapshot of its state) and ``teardown`` (always, even after a failure);
``describe`` once per run. The same calls are the gRPC service of
``proto/evalsi/harness/v1alpha1/harness.proto``, so a harness in another process or language is
one more implementation (``evalsi.wire`` holds the client and a server for Python classes).

``BuiltinHarness`` is evalsi's own: the tool loop (``_loop``) in a fresh ``Environment`` per
task. A harness raising loses that task to infrastructure (never graded); an agent failing at
the task is a ``Final`` with a ``stop_reason``, graded like any answer.

A task with a simulated user (``_simulator``) is several turns of one session: after each
``Final`` the user's next message is handed over with ``turn(session, message)`` and ``run`` is
called again, continuing the same conversation. ``turn`` is optional (``MultiTurnHarness``): a
harness without it runs single-turn tasks only, and a run that configures a simulated user for
it is refused before its first task.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from evalsi.agents._environment import Environment
from evalsi.agents._loop import ToolLoop
from evalsi.agents._tools import ToolSpec
from evalsi.connectors import load_callable
from evalsi.core import Check, Content, JsonValue, Message, Step, Usage, UserError


@dataclass(frozen=True, slots=True)
class HarnessInfo:
    """What a harness says of itself: name and version (for the manifest), and its tools."""

    name: str
    version: str = ""
    tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskSetup:
    """One task as a harness receives it.

    Attributes:
        run_id: the run.
        task_id: the sample's id (with ``trial``, names the task).
        trial: 0-based trial.
        seed: the task's seed, when the run passes one.
        input: the sample's input.
        fixtures: the task's files, ``{path: text or JSON}``, already written to ``workspace``.
        workspace: the task's workspace directory (its sandbox's), or ``None``.
        metadata: the sample's metadata.
    """

    run_id: str
    task_id: str
    trial: int
    seed: int | None
    input: Content
    fixtures: Mapping[str, JsonValue] = field(default_factory=dict)
    workspace: Path | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Final:
    """The agent's answer: the last event of ``run``."""

    output: Content
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "final_answer"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The environment's verdicts on the state the agent left, and a snapshot of it."""

    checks: tuple[Check, ...] = ()
    end_state: JsonValue = None


@runtime_checkable
class Harness(Protocol):
    """Runs an agent on tasks. ``check`` and ``teardown`` may do nothing."""

    async def describe(self) -> HarnessInfo: ...

    async def setup(self, task: TaskSetup) -> str: ...

    def run(self, session: str) -> AsyncIterator[Step | Final]: ...

    async def check(self, session: str) -> CheckResult: ...

    async def teardown(self, session: str) -> None: ...


@runtime_checkable
class MultiTurnHarness(Harness, Protocol):
    """A harness whose sessions go on over several user turns."""

    async def turn(self, session: str, message: Content) -> None:
        """The user's next message, answered by the next ``run`` of the same session."""
        ...


@dataclass(slots=True)
class _Session:
    """One task of the built-in harness: its conversation so far, its environment, its loop
    and the user message the next ``run`` answers."""

    task: TaskSetup
    loop: ToolLoop
    environment: Environment
    history: list[Message] = field(default_factory=list)
    pending: Content | None = None


class BuiltinHarness:
    """evalsi's reference agent as a harness: the tool loop, in a fresh environment per task
    (``environment()``), the workspace bound by the caller. Multi-turn: a session keeps its
    conversation and its environment (call counts, faults) across the user's turns."""

    def __init__(self, loop: ToolLoop, environment: Callable[[], Environment]) -> None:
        self.loop = loop
        self.environment = environment
        self._tasks: dict[str, _Session] = {}
        self._names = itertools.count()

    async def describe(self) -> HarnessInfo:
        tools = tuple(self.environment().specs())
        return HarnessInfo("evalsi-tool-loop", tools=tools)

    async def setup(self, task: TaskSetup) -> str:
        session = f"{task.task_id}/{task.trial}/{next(self._names)}"
        loop, for_task = self.loop, getattr(self.loop.model, "for_task", None)
        if for_task is not None:  # a per-task model (the scripted one plays the sample's own)
            loop = ToolLoop(for_task(task), loop.budgets, price=loop.price, clock=loop.clock)
        self._tasks[session] = _Session(task, loop, self.environment())
        return session

    async def turn(self, session: str, message: Content) -> None:
        self._tasks[session].pending = message

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        s = self._tasks[session]
        message, s.pending = s.pending or s.task.input, None
        out = await s.loop.run(message, s.environment, seed=s.task.seed, history=s.history)
        trajectory = out.trajectory
        if trajectory is not None:
            for step in trajectory.steps:
                yield step
        stop = trajectory.stop_reason if trajectory is not None else "final_answer"
        yield Final(out.output, out.usage, stop)

    async def check(self, session: str) -> CheckResult:
        return CheckResult()

    async def teardown(self, session: str) -> None:
        self._tasks.pop(session, None)


class PythonHarness:
    """A harness class named ``module:Class`` in the spec: built with no arguments, and
    entered for the run when it is an async context manager (its own resources)."""

    def __init__(self, ref: str, where: str) -> None:
        try:
            cls = load_callable(ref)
        except UserError as e:
            message = e.message.replace("python target", "harness")
            raise UserError(f"{where}: {message}", hint=e.hint) from None
        try:
            harness = cls()
        except Exception as e:  # noqa: BLE001 - the user's constructor
            raise UserError(f"{where}: {ref}() failed: {type(e).__name__}: {e}") from None
        missing = [
            name
            for name in ("describe", "setup", "run", "check", "teardown")
            if not callable(getattr(harness, name, None))
        ]
        if missing:
            raise UserError(
                f"{where}: {ref} is not a harness (missing {', '.join(missing)})",
                hint="implement describe, setup, run, check and teardown (evalsi.agents.Harness)",
            )
        if not inspect.isasyncgenfunction(harness.run):
            raise UserError(f"{where}: {ref}.run must be an async generator (async def + yield)")
        self.harness: Harness = harness
        self._entered = False

    async def __aenter__(self) -> Harness:
        enter = getattr(self.harness, "__aenter__", None)
        if enter is not None:
            await enter()
            self._entered = True
        return self.harness

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._entered:
            with contextlib.suppress(Exception):
                await self.harness.__aexit__(exc_type, exc, tb)  # type: ignore[attr-defined]
