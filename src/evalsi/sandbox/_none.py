"""The ``none`` rung: a plain subprocess, for specs that explicitly accept no isolation.

It still does what a plain process can: a cleared environment (only the spec's variables),
rlimits (CPU time, address space, open files, file size, no core dumps), the workspace as the
working directory, its own session (so a timeout kills the whole process group), stdin from a
pipe or /dev/null, no inherited descriptors beyond 0-2, and capped output. It cannot hide host
files, deny the network or filter syscalls, so it always reports ``enforcement="partial"``
with what is missing — and the ladder only ever picks it for ``min_isolation: none``.
"""

from __future__ import annotations

import errno
import signal
from collections.abc import Sequence
from pathlib import Path

from evalsi.sandbox._capture import Collected, Pipes
from evalsi.sandbox._driver import Call, Rung
from evalsi.sandbox._rlimits import apply as apply_limits
from evalsi.sandbox._rlimits import limits_for
from evalsi.sandbox._types import ExecResult, Isolation, Level, Outcome, RungReport, SandboxSpec

# What a plain subprocess never enforces, whatever the spec says.
_ALWAYS_MISSING = ("namespaces", "seccomp", "network", "host-files", "processes", "disk")


class NoneDriver(Rung):
    """No confinement beyond rlimits; chosen only when ``min_isolation`` is ``none``."""

    name = "none"
    level = Level.NONE

    def probe(self) -> RungReport:
        result = self.run_true(SandboxSpec(min_isolation=Level.NONE))
        ok = result.exit_code == 0
        return self.report(ok, "" if ok else f"`true` did not succeed: {result.outcome}")

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        missing = list(_ALWAYS_MISSING)
        if spec.file_access == "read-only":
            missing.append("read-only-workspace")
        return Isolation(self.name, self.level, "partial", tuple(missing))

    def _exec(
        self, spec: SandboxSpec, workspace: Path, argv: Sequence[str], call: Call
    ) -> ExecResult:
        isolation = self.isolation_for(spec)
        # RLIMIT_NPROC would count every process of the host uid: left out. SIGXCPU at the
        # CPU limit (reported as cpu exceeded), SIGKILL one second later.
        limits = limits_for(spec.resources, nproc=False, cpu_grace=1)
        pipes = Pipes(call.stdin)
        try:
            proc = pipes.spawn(
                argv,
                cwd=workspace,
                env=call.environ(spec, {}),
                preexec_fn=lambda: apply_limits(limits, clamp=True),  # only setrlimit
            )
        except OSError as e:
            if isinstance(e, FileNotFoundError):
                # What a shell answers for a missing command: the program's problem, not ours.
                code, why = 127, f"command not found ({e.strerror})"
            elif isinstance(e, PermissionError) or e.errno == errno.ENOEXEC:
                # Not executable, or not a program: the program's files, as a shell says (126).
                code, why = 126, f"cannot execute: {e.strerror}"
            else:
                # E2BIG (argv and environment over the kernel's limit) and the like: the
                # program never ran, so it is the runner's failure, never scored.
                return call.failed(isolation, f"none: spawn failed: {e}")
            stderr = f"{argv[0]}: {why}\n".encode()
            return ExecResult(Outcome("exit", code), b"", stderr, call.elapsed_ms(), isolation)
        io = pipes.collect(
            proc,
            call.timeout,
            spec.resources.output_bytes,
            end_group_on_exit=True,
            on_output=call.on_output,
        )
        return call.result(_outcome(io.got), isolation, io)


def _outcome(got: Collected) -> Outcome:
    if (cut := got.cut_short()) is not None:
        return cut
    if got.returncode == -signal.SIGXCPU:
        return Outcome("resource_exceeded", detail="cpu")
    if got.returncode == -signal.SIGXFSZ:
        return Outcome("resource_exceeded", detail="disk")
    return Outcome("exit", got.returncode)
