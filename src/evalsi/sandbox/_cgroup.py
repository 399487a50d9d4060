"""Per-execution memory totals through a cgroup, where this process may make one.

rlimits bound each process on its own: six processes of 200 MB each pass a 256 MB
RLIMIT_AS. A memory cgroup bounds their sum. Each execution gets a fresh group under
``evalsi/`` (fresh, so nothing an earlier execution left charged, such as tmpfs pages,
counts against it) with memory + swap = ``Resources.memory_mb``; its ``cgroup.procs`` is
handed to the pool uid, so a process already running as that uid (bwrap's shim inside the
sandbox, the Landlock launcher) moves itself in just before the program starts (everything the
program forks stays in). After the execution the
group's OOM-kill counter says whether the limit struck, and the group is removed.

Only the memory controller: processes are already bounded per sandbox by RLIMIT_NPROC under
the execution's own pool uid, and each controller a process joins costs a cgroup v1
migration (about 3 ms of RCU synchronisation here) on every execution.

Where it works: as root, with a cgroup v1 memory controller mounted at
``/sys/fs/cgroup/memory`` (this machine), or a cgroup v2 tree at ``/sys/fs/cgroup`` with the
memory controller available (written from the cgroup v2 documentation; this machine has no
delegated v2 tree, so that path is untested here). Anywhere else ``limits`` yields None and
the isolation report keeps ``missing: ["cgroup"]``: the rlimits remain, never silently less.
CPU time stays a per-process rlimit (``cgroup-cpu`` in the report): the wall-clock timeout
bounds the total.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evalsi.sandbox._config import current_config
from evalsi.sandbox._types import Resources

ROOT = Path("/sys/fs/cgroup")
_GROUP = "evalsi"


@dataclass(frozen=True, slots=True)
class Group:
    """One sandbox's cgroups: ``procs`` are the files the launcher writes its own pid into."""

    procs: tuple[str, ...]
    memory: Path
    v2: bool

    def oom_killed(self) -> bool:
        return _oom_kills(self.memory, self.v2) > 0  # a fresh group: any kill is this run's


def missing(group: Group | None) -> tuple[str, ...]:
    """What the isolation report names as not enforced with or without a group."""
    return ("cgroup",) if group is None else ("cgroup-cpu",)


def missing_here() -> tuple[str, ...]:
    """``missing`` for the group an execution here will get, said before it runs."""
    return ("cgroup-cpu",) if available() else ("cgroup",)


@functools.cache
def unavailable_reason() -> str | None:
    """None when per-sandbox groups can be made here; else why not (probed once)."""
    if os.geteuid() != 0:
        return "not root: cgroups cannot be created"
    layout = _layout()
    if layout is None:
        return "no memory cgroup controller found under /sys/fs/cgroup"
    try:
        base = _base(layout)
        base.mkdir(exist_ok=True)
        if layout == "v2":  # let our subtree's groups use the controller
            _write(ROOT / "cgroup.subtree_control", "+memory")
            _write(base / "cgroup.subtree_control", "+memory")
        probe = base / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError as e:
        return f"cannot create cgroups: {e.strerror or e}"
    return None


def available() -> bool:
    """Whether executions get a memory cgroup: possible here, and not turned off
    (``sandbox.cgroups: false``)."""
    return unavailable_reason() is None and current_config().cgroups


@contextlib.contextmanager
def limits(uid: int | None, res: Resources) -> Iterator[Group | None]:
    """A fresh group for one execution under pool uid ``uid`` with ``res`` applied, removed
    afterwards (None: cgroups are unavailable here, or there is no pool uid to hand it to)."""
    if uid is None or not available():
        yield None
        return
    layout = _layout()
    assert layout is not None
    v2 = layout == "v2"
    name = f"uid-{uid}-{os.getpid()}-{next(_serial)}"
    memory = _base(layout) / name
    memory.mkdir()
    try:
        _set_limits(memory, res, v2)
        procs = (str(memory / "cgroup.procs"),)
        os.chown(procs[0], uid, -1)
        yield Group(procs, memory, v2)
    finally:
        _remove(memory)


_serial = itertools.count(1)  # next() is atomic under the GIL


def _remove(group: Path) -> None:
    """rmdir a group once its last process is gone (charges move to the parent)."""
    for _ in range(200):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY: a process is still exiting
            time.sleep(0.005)


def _set_limits(memory: Path, res: Resources, v2: bool) -> None:
    mem = str(res.memory_mb << 20) if res.memory_mb is not None else "max"
    if v2:
        _write(memory / "memory.max", mem)
        with contextlib.suppress(FileNotFoundError):
            _write(memory / "memory.swap.max", "0")
        return
    value = mem if mem != "max" else "-1"
    # memsw (memory + swap) may only be >= memory.limit: lift it first, then set both.
    memsw = memory / "memory.memsw.limit_in_bytes"
    has_memsw = memsw.exists()
    if has_memsw:
        _write(memsw, "-1")
    _write(memory / "memory.limit_in_bytes", value)
    if has_memsw:
        _write(memsw, value)


def _oom_kills(memory: Path, v2: bool) -> int:
    events = memory / ("memory.events" if v2 else "memory.oom_control")
    try:
        for line in events.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _layout() -> str | None:
    if (ROOT / "memory" / "memory.limit_in_bytes").exists():
        return "v1"
    controllers = ROOT / "cgroup.controllers"
    if controllers.exists() and "memory" in controllers.read_text().split():
        return "v2"
    return None


def _base(layout: str) -> Path:
    return ROOT / "memory" / _GROUP if layout == "v1" else ROOT / _GROUP
