"""The sandbox's values: what to run under which confinement (``SandboxSpec``), what happened
(``Outcome``), and how strongly it was confined (``Isolation``).

The isolation levels form a ladder, strongest first: ``vm`` (a microVM) > ``kernel`` (reserved
for a user-space kernel such as gVisor) > ``namespaced`` (bubblewrap: namespaces, seccomp) >
``confined`` (Landlock + seccomp on the host's namespaces) > ``none`` (a plain subprocess, only
when a spec asks for it explicitly). A spec's ``min_isolation`` is the weakest level it
accepts; nothing ever runs below it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Literal

from evalsi.core import RunError


class Level(IntEnum):
    """Isolation levels; a greater value is stronger."""

    NONE = 0
    CONFINED = 1
    NAMESPACED = 2
    KERNEL = 3
    VM = 4

    @classmethod
    def parse(cls, name: str) -> Level:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            known = ", ".join(level.name.lower() for level in sorted(cls, reverse=True))
            raise ValueError(f"unknown isolation level {name!r} (known: {known})") from None

    def __str__(self) -> str:
        return self.name.lower()


FileAccess = Literal["read-only", "workspace-write"]
Network = Literal["deny", "loopback"]


@dataclass(frozen=True, slots=True)
class Resources:
    """Per-execution limits. ``None`` leaves a limit to the driver's default."""

    cpu_seconds: float | None = 10.0
    memory_mb: int | None = 512
    processes: int | None = 64
    disk_mb: int | None = 64  # the writable space: workspace and /tmp together
    files: int | None = 10_000  # files and directories in that space (tmpfs inodes)
    output_bytes: int = 1 << 20  # stdout and stderr, each; the rest is cut and reported
    open_files: int | None = 256


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """What a sandbox may see and use.

    ``root`` is None for the host's system directories read-only (``/usr``, ``/lib``, ``/bin``,
    ``/etc`` minus secrets), or an unpacked image directory. ``read_only_paths`` are further
    host paths made visible read-only at the same place (a toolchain, a linter's directory).
    ``env`` is the whole environment inside (the host's is cleared). ``timeout_seconds`` is
    wall-clock time per ``exec``.
    """

    root: Path | None = None
    file_access: FileAccess = "workspace-write"
    resources: Resources = field(default_factory=Resources)
    timeout_seconds: float = 30.0
    network: Network = "deny"
    env: dict[str, str] = field(default_factory=dict)
    min_isolation: Level = Level.NAMESPACED
    read_only_paths: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        for path in self.read_only_paths:
            text = str(path)
            if not Path(text).is_absolute() or "\0" in text or ".." in Path(text).parts:
                raise ValueError(
                    f"read_only_paths: {text!r} must be an absolute host path without '..'"
                )


OutputCallback = Callable[[str, bytes], None]
"""Streamed output: called with ``"stdout"`` or ``"stderr"`` and each chunk as it arrives
(only bytes within the output cap)."""

OutcomeKind = Literal["exit", "denied", "timeout", "resource_exceeded", "runner_failure"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an execution ended.

    ``exit``: the program ended by itself (``code``; a signal as ``-signal``); ``denied``: the
    confinement stopped an action (``detail`` names the effect: a seccomp kill, …), which is
    the program's behaviour and counts; ``timeout``; ``resource_exceeded`` (``detail``: memory,
    cpu, processes, output, disk); ``runner_failure``: the sandbox itself broke (``detail`` is
    the signature) — an infrastructure error, retried and never scored.
    """

    kind: OutcomeKind
    code: int | None = None
    detail: str = ""

    @property
    def is_infra(self) -> bool:
        return self.kind == "runner_failure"


@dataclass(frozen=True, slots=True)
class Isolation:
    """How an execution was confined: stored in the record's provenance and the manifest.

    ``enforcement`` is ``full`` when every limit the spec asked for was enforced, ``partial``
    when one was not (``missing`` says which, e.g. cgroup memory accounting).
    """

    driver: str
    level: Level
    enforcement: Literal["full", "partial"] = "full"
    missing: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "driver": self.driver,
            "level": str(self.level),
            "enforcement": self.enforcement,
        }
        if self.missing:
            out["missing"] = list(self.missing)
        return out


@dataclass(frozen=True, slots=True)
class ExecResult:
    """One execution: its outcome, output (each stream capped), time and isolation."""

    outcome: Outcome
    stdout: bytes
    stderr: bytes
    duration_ms: float
    isolation: Isolation
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def exit_code(self) -> int | None:
        return self.outcome.code if self.outcome.kind == "exit" else None


@dataclass(frozen=True, slots=True)
class RungReport:
    """One rung of the ladder as probed: available or why not."""

    driver: str
    level: Level
    available: bool
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "level": str(self.level)}


class SandboxUnavailable(RunError):
    """No rung at or above the spec's ``min_isolation`` works here (SANDBOX_UNAVAILABLE)."""

    kind = "sandbox_unavailable"
