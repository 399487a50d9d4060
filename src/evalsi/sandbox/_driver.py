"""What a sandbox driver provides: probe itself once, then start executions in a workspace.

A driver turns a ``SandboxSpec`` and a command into a confined child process. It never
weakens what the spec asks silently: what it cannot enforce it reports in ``Isolation``
(``enforcement="partial"`` and ``missing``), and a driver that cannot confine at its level at
all reports itself unavailable from ``probe`` (the ladder then skips it, and fails closed when
no rung is left).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from evalsi.sandbox._capture import Captured
from evalsi.sandbox._types import (
    ExecResult,
    Isolation,
    Level,
    Outcome,
    OutputCallback,
    RungReport,
    SandboxSpec,
)


class Driver(Protocol):
    """One rung of the ladder."""

    name: str
    level: Level

    def probe(self) -> RungReport:
        """Run this driver's real profile against ``true``; available only if that works.

        Called once per process by the ladder (the verdict is cached)."""
        ...

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        """How an execution under ``spec`` will be confined (reported before any exec)."""
        ...

    def exec(
        self,
        spec: SandboxSpec,
        workspace: Path,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        """Run ``argv`` confined by ``spec`` with ``workspace`` as its writable (or read-only)
        working directory, mounted at ``/workspace`` inside (namespaced and vm rungs; the
        confined rung runs it at its host path, with cwd and ``HOME`` there); ``stdin`` or
        /dev/null; no tty.
        ``env`` is merged over ``spec.env`` for this execution; ``on_output`` streams output.

        Returns the outcome; raises nothing for the program's own behaviour (a crash, a
        denial, a timeout are outcomes). A failure of the sandbox machinery itself is
        ``Outcome("runner_failure", detail=<signature>)``."""
        ...


@dataclass(frozen=True, slots=True)
class Call:
    """One ``exec``'s own arguments (the timeout resolved against the spec), its clock
    started when it was made."""

    stdin: bytes | None
    timeout: float
    env: Mapping[str, str] | None
    on_output: OutputCallback | None
    start: float = field(default_factory=time.perf_counter)

    def environ(self, spec: SandboxSpec, defaults: Mapping[str, str]) -> dict[str, str]:
        """The whole environment inside: ``defaults``, then the spec's, then this call's."""
        return {**defaults, **spec.env, **(self.env or {})}

    def result(self, outcome: Outcome, isolation: Isolation, io: Captured) -> ExecResult:
        """The execution's result; a runner failure's stderr starts with what the launcher
        said on its own pipe (the program never holds it)."""
        stderr = bytes(io.err.head)
        if outcome.kind == "runner_failure":
            stderr = bytes(io.launcher.head) + stderr
        return ExecResult(
            outcome,
            bytes(io.out.head),
            stderr,
            self.elapsed_ms(),
            isolation,
            stdout_truncated=io.out.truncated,
            stderr_truncated=io.err.truncated,
        )

    def failed(self, isolation: Isolation, detail: str) -> ExecResult:
        """The sandbox machinery broke before the program ran: no output, never scored."""
        outcome = Outcome("runner_failure", detail=detail)
        return ExecResult(outcome, b"", b"", self.elapsed_ms(), isolation)

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000


class Rung:
    """What the built-in drivers share: ``exec``'s argument checks, the timeout default and
    the clock (subclasses implement ``_exec``), and the probe on ``true``."""

    name: str
    level: Level

    def exec(
        self,
        spec: SandboxSpec,
        workspace: Path,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        if not argv:
            raise ValueError("argv is empty")
        timeout = spec.timeout_seconds if timeout_seconds is None else timeout_seconds
        return self._exec(spec, workspace, argv, Call(stdin, timeout, env, on_output))

    def _exec(
        self, spec: SandboxSpec, workspace: Path, argv: Sequence[str], call: Call
    ) -> ExecResult:
        raise NotImplementedError

    def report(self, available: bool, reason: str = "") -> RungReport:
        return RungReport(self.name, self.level, available, reason)

    def run_true(
        self, spec: SandboxSpec, prefix: str = "evalsi-probe-", tmp: str | None = None
    ) -> ExecResult:
        """``true`` under ``spec`` in a fresh temporary workspace (in ``tmp``, if given)."""
        with tempfile.TemporaryDirectory(prefix=prefix, dir=tmp) as ws:
            return self.exec(spec, Path(ws), ["true"])
