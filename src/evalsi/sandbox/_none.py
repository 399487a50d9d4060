"""The ``none`` rung: a plain subprocess, for specs that explicitly accept no isolation.

It still does what a plain process can: a cleared environment (only the spec's variables),
rlimits (CPU time, address space, open files, file size, no core dumps), the workspace as the
working directory, its own session (so a timeout kills the whole process group), stdin from a
pipe or /dev/null, no inherited descriptors beyond 0-2, and capped output. It cannot hide host
files, deny the network or filter syscalls, so it always reports ``enforcement="partial"``
with what is missing — and the ladder only ever picks it for ``min_isolation: none``.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from evalsi.sandbox._types import (
    ExecResult,
    Isolation,
    Level,
    Outcome,
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
    ) -> ExecResult:
        isolation = self.isolation_for(spec)
        timeout = spec.timeout_seconds if timeout_seconds is None else timeout_seconds
        cap = spec.resources.output_bytes
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=workspace,
                env=dict(spec.env),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,
                preexec_fn=_limiter(spec),  # only setrlimit calls
            )
        except FileNotFoundError as e:
            # What a shell answers for a missing command: the program's problem, not ours.
            return ExecResult(
                Outcome("exit", 127),
                b"",
                f"{argv[0]}: command not found ({e.strerror})\n".encode(),
                _ms(start),
                isolation,
            )
        except OSError as e:
            return ExecResult(
                Outcome("runner_failure", detail=f"none: spawn failed: {e}"),
                b"",
                b"",
                _ms(start),
                isolation,
            )
        assert proc.stdout is not None
        assert proc.stderr is not None
        out, err = _Reader(proc.stdout, cap), _Reader(proc.stderr, cap)
        if stdin is not None:
            threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            proc.wait()
        # Whatever the program left running in its session goes with it.
        _kill_group(proc.pid)
        out.join()
        err.join()
        return ExecResult(
            _outcome(proc.returncode, timed_out),
            out.data(),
            err.data(),
            _ms(start),
            isolation,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
        )


def _limiter(spec: SandboxSpec) -> Callable[[], None]:
    """rlimits applied in the child before exec (RLIMIT_NPROC is per host uid: not used)."""
    r = spec.resources
    limits: list[tuple[int, int, int]] = [(resource.RLIMIT_CORE, 0, 0)]
    if r.cpu_seconds is not None:
        # SIGXCPU at the soft limit (reported as cpu exceeded), SIGKILL one second later.
        cpu = max(1, math.ceil(r.cpu_seconds))
        limits.append((resource.RLIMIT_CPU, cpu, cpu + 1))
    if r.memory_mb is not None:
        limits.append((resource.RLIMIT_AS, r.memory_mb << 20, r.memory_mb << 20))
    if r.open_files is not None:
        limits.append((resource.RLIMIT_NOFILE, r.open_files, r.open_files))
    if r.disk_mb is not None:
        limits.append((resource.RLIMIT_FSIZE, r.disk_mb << 20, r.disk_mb << 20))

    def apply() -> None:
        for kind, soft, hard in limits:
            _, current = resource.getrlimit(kind)
            if current != resource.RLIM_INFINITY:
                soft, hard = min(soft, current), min(hard, current)
            resource.setrlimit(kind, (soft, hard))

    return apply


def _outcome(returncode: int, timed_out: bool) -> Outcome:
    if timed_out:
        return Outcome("timeout")
    if returncode == -signal.SIGXCPU:
        return Outcome("resource_exceeded", detail="cpu")
    if returncode == -signal.SIGXFSZ:
        return Outcome("resource_exceeded", detail="disk")
    return Outcome("exit", returncode)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    if pipe is None:
        return
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError):
        pass  # the program did not read all its input: its choice
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


def _ms(start: float) -> float:
    return (time.monotonic() - start) * 1000.0


class _Reader:
    """Drains one pipe on a thread, keeping the first ``cap`` bytes (the rest is counted)."""

    def __init__(self, pipe: IO[bytes], cap: int) -> None:
        self._pipe = pipe
        self._cap = cap
        self._chunks: list[bytes] = []
        self._kept = 0
        self.truncated = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = self._pipe.fileno()
        while chunk := os.read(fd, 65536):
            room = self._cap - self._kept
            if len(chunk) > room:
                self.truncated = True
                chunk = chunk[: max(room, 0)]
            if chunk:
                self._chunks.append(chunk)
                self._kept += len(chunk)

    def join(self) -> None:
        # A descendant that escaped the session may hold the pipe open: do not wait forever.
        self._thread.join(timeout=2.0)
        if not self._thread.is_alive():
            self._pipe.close()

    def data(self) -> bytes:
        return b"".join(list(self._chunks))
