"""Running one program in the sandbox for the code pack: the concurrency limit, the spec from
params, and the mapping of a sandbox outcome to "infrastructure failed" vs "the program did it".

Concurrency: at most ``EVALSI_SANDBOX_CONCURRENCY`` sandboxes (default: the CPU count) run at
once in this process, whatever the evaluator concurrency above; an evaluator's
``concurrency`` param picks another process-wide limiter of that size.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import Literal

from evalsi.core import RunError, UserError
from evalsi.sandbox import (
    CONCURRENCY_ENV,
    ExecResult,
    Ladder,
    Level,
    Resources,
    SandboxSpec,
    SandboxUnavailable,
    current_config,
    default_ladder,
    local_concurrency,
    run,
)

IsolationName = Literal["none", "confined", "namespaced", "kernel", "vm"]
ENV_CONCURRENCY = CONCURRENCY_ENV
_PATH = "/usr/local/bin:/usr/bin:/bin"


class SandboxRunnerFailure(RunError):
    """The sandbox machinery broke (an outcome ``runner_failure``): an infrastructure error,
    reported apart from the evaluator's own errors and never scored."""

    kind = "sandbox_runner_failure"


_ladder: ContextVar[Ladder | None] = ContextVar("evalsi_code_ladder", default=None)


@contextlib.contextmanager
def using_ladder(ladder: Ladder) -> Iterator[None]:
    """Run the code pack's sandboxes on ``ladder`` inside this block (tests use a fake
    driver); the choice is carried into the worker threads."""
    token = _ladder.set(ladder)
    try:
        yield
    finally:
        _ladder.reset(token)


_INSTALL = re.compile(r"pip install '[^']+'|apt-get install \S+")


def require_sandbox(min_isolation: str, *, who: str) -> None:
    """Fail before any record when no sandbox rung at or above ``min_isolation`` works here.

    Without one, every record would be tried and lost to infrastructure (a core-only install:
    no pyseccomp; no bubblewrap); the code pack never runs a program unconfined instead. The
    hint is what the rungs' probes say to install (``evalsi sandbox probe`` shows the same).
    """
    try:
        level = Level.parse(min_isolation)
    except ValueError as e:
        raise UserError(f"{who}: min_isolation: {e}") from None
    level = max(level, current_config().min_isolation)  # as the sandbox will (evalsi.yaml)
    ladder = _ladder.get() or default_ladder()
    try:
        ladder.choose(level)
    except SandboxUnavailable:
        reports = ladder.probe_all()
        wanted = [r for r in reports if not r.available and r.level >= level]
        installs = dict.fromkeys(i for r in wanted for i in _INSTALL.findall(r.reason))
        raise UserError(
            f"{who} runs code only in a sandbox at or above {level}, and none works here "
            f"({', '.join(f'{r.driver}: not available' for r in wanted)}; "
            "evalsi sandbox probe says why)",
            hint=" and ".join(installs) if installs else "see evalsi sandbox probe",
        ) from None


def default_concurrency() -> int:
    """``EVALSI_SANDBOX_CONCURRENCY`` when set, else ``sandbox.concurrency`` from evalsi.yaml,
    else the CPU count (``evalsi.sandbox.local_concurrency``)."""
    try:
        return local_concurrency()
    except ValueError as e:
        raise UserError(str(e)) from None


_limiters: dict[int, threading.BoundedSemaphore] = {}
_pools: dict[int, ThreadPoolExecutor] = {}
_limiters_lock = threading.Lock()


def limiter(size: int | None = None) -> threading.BoundedSemaphore:
    """The process-wide semaphore of ``size`` slots (default ``default_concurrency()``)."""
    n = size if size is not None else default_concurrency()
    if n < 1:
        raise UserError(f"sandbox concurrency must be at least 1, got {n}")
    with _limiters_lock:
        sem = _limiters.get(n)
        if sem is None:
            sem = _limiters[n] = threading.BoundedSemaphore(n)
        return sem


def _pool(size: int | None) -> ThreadPoolExecutor:
    n = size if size is not None else default_concurrency()
    with _limiters_lock:
        pool = _pools.get(n)
        if pool is None:
            pool = _pools[n] = ThreadPoolExecutor(n, thread_name_prefix="evalsi-sandbox")
        return pool


def make_spec(
    *,
    min_isolation: str,
    timeout_seconds: float,
    memory_mb: int,
    cpu_seconds: float,
    read_only_paths: tuple[Path, ...] = (),
) -> SandboxSpec:
    """The sandbox spec of the pack's params (network denied, environment cleared)."""
    try:
        level = Level.parse(min_isolation)
    except ValueError as e:
        raise UserError(f"min_isolation: {e}") from None
    if timeout_seconds <= 0 or memory_mb < 16:
        raise UserError(
            f"timeout_seconds must be positive and memory_mb at least 16, got "
            f"{timeout_seconds} and {memory_mb}"
        )
    return SandboxSpec(
        resources=Resources(cpu_seconds=cpu_seconds, memory_mb=memory_mb),
        timeout_seconds=timeout_seconds,
        env={"PATH": _PATH, "PYTHONDONTWRITEBYTECODE": "1"},
        min_isolation=level,
        read_only_paths=read_only_paths,
    )


RUNNER_ATTEMPTS = 3
"""Executions of one program before a broken sandbox is reported as an infra error."""


async def run_program_async(
    files: dict[str, bytes],
    argv: list[str],
    spec: SandboxSpec,
    *,
    stdin: bytes | None = None,
    timeout: float | None = None,
    concurrency: int | None = None,
) -> ExecResult:
    """Run ``argv`` in a fresh sandbox holding ``files``, under the concurrency limit, on a
    worker thread, so many records' sandboxes overlap (the pool has as many threads as the
    limit allows sandboxes, so the limit, not the pool, decides).

    A runner failure (the sandbox itself broke) is retried in a new sandbox, up to
    ``RUNNER_ATTEMPTS`` times in all. Raises ``SandboxUnavailable`` (no rung ≥
    ``min_isolation``) and ``SandboxRunnerFailure`` (every attempt broke): both are
    infrastructure, never a score. Anything else the program did is in the result."""

    def attempts() -> ExecResult:
        for _attempt in range(RUNNER_ATTEMPTS):
            with limiter(concurrency):
                result = run(
                    argv, spec, stdin=stdin, timeout=timeout, files=files, ladder=_ladder.get()
                )
            if result.outcome.kind != "runner_failure":
                return result
        raise SandboxRunnerFailure(
            f"the sandbox failed ({result.isolation.driver}) {RUNNER_ATTEMPTS} times: "
            f"{result.outcome.detail}"
        )

    context = contextvars.copy_context()  # carries using_ladder() into the thread
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(concurrency), context.run, attempts)


def behaviour(result: ExecResult) -> str:
    """A short account of a non-``exit`` outcome: the program's doing, never infrastructure."""
    o = result.outcome
    if o.kind == "timeout":
        return "the program timed out"
    if o.kind == "denied":
        return f"the sandbox denied an action ({o.detail or 'unknown'})"
    if o.kind == "resource_exceeded":
        return f"the program exceeded a resource limit ({o.detail or 'unknown'})"
    return f"the program exited with code {o.code}"


def tail(data: bytes, limit: int = 300) -> str:
    """The last ``limit`` characters of some output, for an explanation."""
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else "…" + text[-limit:]
