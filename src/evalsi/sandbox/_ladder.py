"""The isolation ladder: probe every rung once, take the strongest that works, fail closed.

Each rung's probe runs its real profile against ``true`` (an installed binary is no proof that
it works); the verdict is cached for the life of the ladder, and the default ladder lives as
long as the process. ``choose`` takes the strongest available rung and checks it against the
spec's ``min_isolation``: if none qualifies it raises ``SandboxUnavailable`` naming every rung
and why it was passed over. Nothing ever runs below the minimum, so the ``none`` rung is only
chosen when a spec asks for ``none`` explicitly.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from evalsi.sandbox._driver import Driver
from evalsi.sandbox._types import (
    ExecResult,
    Isolation,
    Level,
    OutputCallback,
    RungReport,
    SandboxSpec,
    SandboxUnavailable,
)

_LANDLOCK_REASON = "not built yet (the Landlock driver comes in a later slice of issue 7)"


class UnavailableDriver:
    """A rung that is known not to work here; ``exec`` refuses (the ladder never picks it)."""

    def __init__(self, name: str, level: Level, reason: str) -> None:
        self.name = name
        self.level = level
        self.reason = reason

    def probe(self) -> RungReport:
        return RungReport(self.name, self.level, False, self.reason)

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        return Isolation(self.name, self.level, "partial", ("unavailable",))

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
        raise SandboxUnavailable(f"SANDBOX_UNAVAILABLE: {self.name}: {self.reason}")


class Ladder:
    """Drivers ordered strongest first (re-sorted by level, stable for equal levels)."""

    def __init__(self, drivers: Sequence[Driver]) -> None:
        if not drivers:
            raise ValueError("a ladder needs at least one driver")
        self.drivers: tuple[Driver, ...] = tuple(
            sorted(drivers, key=lambda d: int(d.level), reverse=True)
        )
        self._lock = threading.Lock()
        self._reports: tuple[RungReport, ...] | None = None

    def probe_all(self) -> tuple[RungReport, ...]:
        """Every rung's verdict, probed on the first call only (thread-safe)."""
        with self._lock:
            if self._reports is None:
                self._reports = tuple(_probe(driver) for driver in self.drivers)
            return self._reports

    def choose(self, min_isolation: Level) -> Driver:
        """The strongest available driver at or above ``min_isolation``; else fail closed."""
        reports = self.probe_all()
        for driver, report in zip(self.drivers, reports, strict=True):
            if report.available and driver.level >= min_isolation:
                return driver
        raise SandboxUnavailable(unavailable_message(min_isolation, reports))


def unavailable_message(min_isolation: Level, reports: Sequence[RungReport]) -> str:
    """One line: the minimum asked for, then each rung and why it was not taken."""
    parts = []
    for r in reports:
        if not r.available:
            why = r.reason or "unavailable"
        else:
            why = f"works, but {r.level} is below the minimum {min_isolation}"
        parts.append(f"{r.driver} ({r.level}): {why}")
    return (
        f"SANDBOX_UNAVAILABLE: no sandbox rung at or above {min_isolation} works here; "
        + "; ".join(parts)
    )


def _probe(driver: Driver) -> RungReport:
    try:
        report = driver.probe()
    except Exception as e:  # noqa: BLE001 - a probe that crashes is a rung that does not work
        return RungReport(driver.name, driver.level, False, f"probe failed: {e}")
    if report.level != driver.level or report.driver != driver.name:
        return RungReport(driver.name, driver.level, False, "probe reported another rung")
    return report


def firecracker_rung() -> UnavailableDriver:
    """Not built in this slice; the reason says so and what it would need."""
    kvm = "usable" if os.access("/dev/kvm", os.R_OK | os.W_OK) else "not usable"
    reason = (
        "not built yet (the Firecracker driver comes in a later slice of issue 7); it needs "
        f"a configured firecracker binary and a usable /dev/kvm (here: {kvm})"
    )
    return UnavailableDriver("firecracker", Level.VM, reason)


def bwrap_rung() -> Driver:
    """The bubblewrap driver, imported lazily; a missing module is an unavailable rung."""
    # importlib rather than a from-import, so type checking passes with or without the module.
    try:
        module = importlib.import_module("evalsi.sandbox._bwrap")
        factory = module.BwrapDriver
    except (ImportError, AttributeError):
        return UnavailableDriver("bwrap", Level.NAMESPACED, "driver not built")
    try:
        driver: Driver = factory()
    except Exception as e:  # noqa: BLE001 - a driver that cannot start is an unavailable rung
        return UnavailableDriver("bwrap", Level.NAMESPACED, f"driver could not start: {e}")
    return driver


def build_default_ladder() -> Ladder:
    """firecracker (vm) → bwrap (namespaced) → landlock (confined) → none."""
    from evalsi.sandbox._none import NoneDriver

    return Ladder(
        [
            firecracker_rung(),
            bwrap_rung(),
            UnavailableDriver("landlock", Level.CONFINED, _LANDLOCK_REASON),
            NoneDriver(),
        ]
    )


_default: Ladder | None = None
_default_lock = threading.Lock()


def default_ladder() -> Ladder:
    """The process-wide ladder: built and probed once, then reused."""
    global _default
    with _default_lock:
        if _default is None:
            _default = build_default_ladder()
        return _default
