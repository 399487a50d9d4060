"""What a sandbox driver provides: probe itself once, then start executions in a workspace.

A driver turns a ``SandboxSpec`` and a command into a confined child process. It never
weakens what the spec asks silently: what it cannot enforce it reports in ``Isolation``
(``enforcement="partial"`` and ``missing``), and a driver that cannot confine at its level at
all reports itself unavailable from ``probe`` (the ladder then skips it, and fails closed when
no rung is left).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from evalsi.sandbox._types import (
    ExecResult,
    Isolation,
    Level,
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
