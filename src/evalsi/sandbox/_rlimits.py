"""Resource limits by rlimits, set in the child between fork and exec.

There is no delegated cgroup v2 here (cgroups are v1), so memory and process counts are
per-process rlimits: RLIMIT_AS bounds each process's address space (not the sandbox's total),
RLIMIT_NPROC the processes of the host uid the sandbox runs under (see ``_uidpool``),
RLIMIT_CPU each process's CPU seconds (soft = hard: SIGKILL at the limit, because the
program is its namespace's pid 1, which ignores SIGXCPU),
RLIMIT_FSIZE the size of any one file written, RLIMIT_NOFILE open fds, RLIMIT_CORE=0.
The ``none`` rung asks for a variant: no RLIMIT_NPROC (it has no uid of its own, so it would
count every process of the host user) and a CPU grace (its program is not pid 1, so SIGXCPU
at the soft limit ends it and says why).
"""

from __future__ import annotations

import math
import resource

from evalsi.sandbox._types import Resources

# bwrap's own process under the same uid: the outer monitor (the program is pid 1 inside).
LAUNCHER_PROCESSES = 1


def limits_for(
    res: Resources, *, nproc: bool = True, cpu_grace: int = 0
) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) triples for ``res``; a ``None`` field is left unlimited.

    ``nproc=False`` leaves RLIMIT_NPROC out; ``cpu_grace`` puts the CPU hard limit (SIGKILL)
    that many seconds after the soft one (SIGXCPU)."""
    out: list[tuple[int, int, int]] = [(resource.RLIMIT_CORE, 0, 0)]
    if res.cpu_seconds is not None:
        soft = max(1, math.ceil(res.cpu_seconds))
        out.append((resource.RLIMIT_CPU, soft, soft + cpu_grace))
    if res.memory_mb is not None:
        size = res.memory_mb << 20
        out.append((resource.RLIMIT_AS, size, size))
    if nproc and res.processes is not None:
        count = res.processes + LAUNCHER_PROCESSES
        out.append((resource.RLIMIT_NPROC, count, count))
    if res.disk_mb is not None:
        size = res.disk_mb << 20
        out.append((resource.RLIMIT_FSIZE, size, size))
    if res.open_files is not None:
        out.append((resource.RLIMIT_NOFILE, res.open_files, res.open_files))
    return out


def apply(limits: list[tuple[int, int, int]], *, clamp: bool = False) -> None:
    """Set the limits in the current process (called in the forked child before exec).

    ``clamp``: never ask for more than the current hard limit (an unprivileged process cannot
    raise it, and setrlimit would fail instead of limiting)."""
    for which, soft, hard in limits:
        if clamp:
            _, current = resource.getrlimit(which)
            if current != resource.RLIM_INFINITY:
                soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(which, (soft, hard))


def cpu_limit(res: Resources) -> float | None:
    """The CPU seconds RLIMIT_CPU enforces for ``res`` (whole seconds), or None."""
    return None if res.cpu_seconds is None else float(max(1, math.ceil(res.cpu_seconds)))
