"""The ``sandbox`` section of ``evalsi.yaml``: which rungs may be used, the floor no spec can go
below, and how many sandboxes run at once on this machine.

    sandbox:
      drivers: [firecracker, bwrap, landlock]   # rungs allowed, any order (default: all)
      minIsolation: namespaced                  # the floor: a spec asking less gets this
      concurrency: 4                            # sandboxes at once (default: CPU count)
      cgroups: true                             # a memory cgroup per execution, where possible
      firecracker: {binary: ..., kernel: ..., rootfs: ...}

``configure`` installs a config for the process: the default ladder is rebuilt from it on next
use. The floor only ever raises a spec's ``min_isolation`` (a server can refuse ``none`` for
every request); it never lowers one.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalsi.sandbox._types import Level

DRIVERS = ("firecracker", "bwrap", "landlock", "none")
"""Every rung the default ladder knows, strongest first."""
CONCURRENCY_ENV = "EVALSI_SANDBOX_CONCURRENCY"
_KEYS = ("drivers", "minIsolation", "concurrency", "cgroups", "firecracker")


class SandboxConfigError(ValueError):
    """Bad ``sandbox`` settings; ``problems`` holds (field, message) pairs, fields dotted
    from ``sandbox`` (``sandbox.drivers[1]``)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{where}: {why}" for where, why in problems))


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """``drivers`` None means every rung; ``firecracker`` is the driver's own config object
    (``_firecracker.FirecrackerConfig``) or None when no microVM is configured."""

    drivers: tuple[str, ...] | None = None
    min_isolation: Level = Level.NONE
    concurrency: int | None = None
    firecracker: Any = field(default=None)
    # A memory cgroup per execution bounds the sandbox's total (not only each process's);
    # it costs a cgroup migration (~5-10 ms) per execution on cgroup v1. False: rlimits only.
    cgroups: bool = True

    def allows(self, driver: str) -> bool:
        return self.drivers is None or driver in self.drivers


def parse_config(value: Any, where: str = "sandbox") -> SandboxConfig:
    """Validate the ``sandbox`` mapping (None: the defaults); raises ``SandboxConfigError``
    naming every bad field and what was expected."""
    if value is None:
        return SandboxConfig()
    if not isinstance(value, Mapping):
        raise SandboxConfigError([(where, f"expected a mapping, got {_show(value)}")])
    problems: list[tuple[str, str]] = []
    for key in value:
        if key not in _KEYS:
            problems.append((f"{where}.{key}", f"unknown key (expected one of {', '.join(_KEYS)})"))
    drivers = _drivers(value.get("drivers"), f"{where}.drivers", problems)
    floor = Level.NONE
    raw_floor = value.get("minIsolation")
    if raw_floor is not None:
        try:
            if not isinstance(raw_floor, str):
                raise ValueError(f"expected a level name, got {_show(raw_floor)}")
            floor = Level.parse(raw_floor)
        except ValueError as e:
            problems.append((f"{where}.minIsolation", str(e)))
    concurrency = value.get("concurrency")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or not concurrency >= 1
    ):
        problems.append(
            (f"{where}.concurrency", f"expected an integer >= 1, got {_show(concurrency)}")
        )
        concurrency = None
    cgroups = value.get("cgroups", True)
    if not isinstance(cgroups, bool):
        problems.append((f"{where}.cgroups", f"expected true or false, got {_show(cgroups)}"))
        cgroups = True
    firecracker = None
    raw_fc = value.get("firecracker")
    if raw_fc is not None:
        try:
            # Imported here: the firecracker rung's module is only loaded when configured.
            fc = importlib.import_module("evalsi.sandbox._firecracker")
            firecracker = fc.FirecrackerConfig.from_mapping(raw_fc, f"{where}.firecracker")
        except ValueError as e:  # "<where>.firecracker.<key>: <why>"
            field_name, sep, why = str(e).partition(": ")
            problems.append((field_name, why) if sep else (f"{where}.firecracker", str(e)))
    if problems:
        raise SandboxConfigError(problems)
    return SandboxConfig(drivers, floor, concurrency, firecracker, cgroups)


def _drivers(value: Any, where: str, problems: list[tuple[str, str]]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        problems.append((where, f"expected a non-empty list of rung names, got {_show(value)}"))
        return None
    out: list[str] = []
    for i, name in enumerate(value):
        if name not in DRIVERS:
            problems.append(
                (f"{where}[{i}]", f"unknown rung {_show(name)} (known: {', '.join(DRIVERS)})")
            )
        else:
            out.append(name)
    return tuple(dict.fromkeys(out))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_lock = threading.Lock()
_current = SandboxConfig()
_generation = 0


def configure(config: SandboxConfig | None) -> None:
    """Install ``config`` for this process (None: back to the defaults); the default ladder
    is rebuilt, and re-probed, on its next use."""
    global _current, _generation
    with _lock:
        _current = config or SandboxConfig()
        _generation += 1


def current_config() -> SandboxConfig:
    with _lock:
        return _current


def config_generation() -> int:
    """Bumped by every ``configure``: the default ladder rebuilds when it changes."""
    with _lock:
        return _generation


def local_concurrency() -> int:
    """How many sandboxes may run at once here: ``EVALSI_SANDBOX_CONCURRENCY``, else the
    configured ``concurrency``, else the CPU count. A bad variable is an error, not ignored."""
    raw = os.environ.get(CONCURRENCY_ENV)
    if raw is not None:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"{CONCURRENCY_ENV}: expected an integer >= 1, got {raw!r}")
        return value
    configured = current_config().concurrency
    return configured if configured is not None else max(os.cpu_count() or 1, 1)
