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
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from evalsi.sandbox import _capture, _rlimits
from evalsi.sandbox._types import (
    ExecResult,
    Isolation,
    Level,
    Outcome,
    OutputCallback,
    RungReport,
    SandboxSpec,
)

# What a plain subprocess never enforces, whatever the spec says.
_ALWAYS_MISSING = ("namespaces", "seccomp", "network", "host-files", "processes", "disk")


class NoneDriver:
    """No confinement beyond rlimits; chosen only when ``min_isolation`` is ``none``."""

    name = "none"
    level = Level.NONE

    def probe(self) -> RungReport:
        with tempfile.TemporaryDirectory(prefix="evalsi-probe-") as tmp:
            result = self.exec(SandboxSpec(min_isolation=Level.NONE), Path(tmp), ["true"])
        ok = result.outcome.kind == "exit" and result.outcome.code == 0
        reason = "" if ok else f"`true` did not succeed: {result.outcome}"
        return RungReport(self.name, self.level, ok, reason)

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        missing = list(_ALWAYS_MISSING)
        if spec.file_access == "read-only":
            missing.append("read-only-workspace")
        return Isolation(self.name, self.level, "partial", tuple(missing))

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
        isolation = self.isolation_for(spec)
        timeout = spec.timeout_seconds if timeout_seconds is None else timeout_seconds
        cap = spec.resources.output_bytes
        # RLIMIT_NPROC would count every process of the host uid: left out. SIGXCPU at the
        # CPU limit (reported as cpu exceeded), SIGKILL one second later.
        limits = _rlimits.limits_for(spec.resources, nproc=False, cpu_grace=1)
        start = time.monotonic()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if stdin is not None else (None, None)
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=workspace,
                env={**spec.env, **(env or {})},
                stdin=in_r if in_r is not None else subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                close_fds=True,
                start_new_session=True,
                preexec_fn=lambda: _rlimits.apply(limits, clamp=True),  # only setrlimit
            )
        except FileNotFoundError as e:
            _close(out_r, err_r, in_w)
            # What a shell answers for a missing command: the program's problem, not ours.
            return ExecResult(
                Outcome("exit", 127),
                b"",
                f"{argv[0]}: command not found ({e.strerror})\n".encode(),
                _ms(start),
                isolation,
            )
        except OSError as e:
            _close(out_r, err_r, in_w)
            if isinstance(e, PermissionError) or e.errno == errno.ENOEXEC:
                # Not executable, or not a program: the program's files, as a shell says (126).
                return ExecResult(
                    Outcome("exit", 126),
                    b"",
                    f"{argv[0]}: cannot execute: {e.strerror}\n".encode(),
                    _ms(start),
                    isolation,
                )
            # E2BIG (argv and environment over the kernel's limit) and the like: the program
            # never ran, so it is the runner's failure, never scored.
            return ExecResult(
                Outcome("runner_failure", detail=f"none: spawn failed: {e}"),
                b"",
                b"",
                _ms(start),
                isolation,
            )
        finally:
            _close(out_w, err_w, in_r)
        if in_w is not None:
            _capture.feed_stdin(in_w, stdin or b"")
        try:
            stream = _capture.streamer(on_output, {out_r: "stdout", err_r: "stderr"})
            got = _capture.collect(
                proc, {out_r: cap, err_r: cap}, timeout, end_group_on_exit=True, on_output=stream
            )
        finally:
            _close(out_r, err_r)
        out, err = got.streams[out_r], got.streams[err_r]
        return ExecResult(
            _outcome(got),
            bytes(out.head),
            bytes(err.head),
            _ms(start),
            isolation,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
        )


def _outcome(got: _capture.Collected) -> Outcome:
    if got.timed_out:
        return Outcome("timeout")
    if got.flooded:
        return Outcome("resource_exceeded", detail="output")
    if got.returncode == -signal.SIGXCPU:
        return Outcome("resource_exceeded", detail="cpu")
    if got.returncode == -signal.SIGXFSZ:
        return Outcome("resource_exceeded", detail="disk")
    return Outcome("exit", got.returncode)


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _ms(start: float) -> float:
    return (time.monotonic() - start) * 1000.0
