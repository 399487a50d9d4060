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
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.sandbox._config import SandboxConfig, config_generation, current_config
from evalsi.sandbox._driver import Driver
from evalsi.sandbox._types import (
    ExecResult,
    Isolation,
    Level,
    RungReport,
    SandboxSpec,
    SandboxUnavailable,
)


@dataclass(eq=False)
class UnavailableDriver:
    """A rung that is known not to work here; ``exec`` refuses (the ladder never picks it)."""

    name: str
    level: Level
    reason: str

    def probe(self) -> RungReport:
        return RungReport(self.name, self.level, False, self.reason)

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        return Isolation(self.name, self.level, "partial", ("unavailable",))

    def exec(self, *_: Any, **__: Any) -> ExecResult:
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


_RUNGS: tuple[tuple[str, Level, str, str], ...] = (
    # name, level, module, factory: each imported lazily (a missing module or a factory that
    # raises is an unavailable rung, never a crash of the ladder).
    ("firecracker", Level.VM, "evalsi.sandbox._firecracker", "firecracker_rung"),
    ("bwrap", Level.NAMESPACED, "evalsi.sandbox._bwrap", "BwrapDriver"),
    ("landlock", Level.CONFINED, "evalsi.sandbox._landlock", "landlock_rung"),
    ("none", Level.NONE, "evalsi.sandbox._none", "NoneDriver"),
)


def _rung(name: str, level: Level, module_name: str, factory_name: str, config: Any) -> Driver:
    # importlib rather than a from-import, so type checking passes with or without the module.
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
    except (ImportError, AttributeError, OSError):  # OSError: a ctypes library at import
        return UnavailableDriver(name, level, "driver not built")
    try:
        driver: Driver = factory(config) if name == "firecracker" else factory()
    except Exception as e:  # noqa: BLE001 - a driver that cannot start is an unavailable rung
        return UnavailableDriver(name, level, f"driver could not start: {e}")
    return driver


def build_default_ladder(config: SandboxConfig | None = None) -> Ladder:
    """firecracker (vm) → bwrap (namespaced) → landlock (confined) → none, minus the rungs
    ``config.drivers`` leaves out (reported as turned off). Default: the process's config."""
    config = config or current_config()
    drivers: list[Driver] = []
    for name, level, module_name, factory_name in _RUNGS:
        if not config.allows(name):
            drivers.append(UnavailableDriver(name, level, "turned off (sandbox.drivers)"))
        else:
            drivers.append(_rung(name, level, module_name, factory_name, config.firecracker))
    return Ladder(drivers)


_default: tuple[int, Ladder] | None = None
_default_lock = threading.Lock()


def default_ladder() -> Ladder:
    """The process-wide ladder: built and probed once per configuration, then reused."""
    global _default
    generation = config_generation()
    with _default_lock:
        if _default is None or _default[0] != generation:
            _default = (generation, build_default_ladder())
        return _default[1]
