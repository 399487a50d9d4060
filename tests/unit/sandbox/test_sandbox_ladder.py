"""The ladder: strongest working rung first, probes cached, and fail closed below the minimum."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from evalsi.sandbox import (
    ExecResult,
    Isolation,
    Ladder,
    Level,
    NoneDriver,
    Outcome,
    RungReport,
    Sandbox,
    SandboxSpec,
    SandboxUnavailable,
    UnavailableDriver,
    build_default_ladder,
    default_ladder,
    run,
)


class CountingDriver:
    """A rung whose probe verdict is fixed and whose probe calls are counted."""

    def __init__(self, name: str, level: Level, available: bool = True) -> None:
        self.name = name
        self.level = level
        self.available = available
        self.probes = 0
        self.execs = 0

    def probe(self) -> RungReport:
        self.probes += 1
        return RungReport(self.name, self.level, self.available, "" if self.available else "no")

    def exec(
        self,
        spec: SandboxSpec,
        workspace: Path,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout_seconds: float | None = None,
    ) -> ExecResult:
        self.execs += 1
        return ExecResult(Outcome("exit", 0), b"", b"", 0.0, Isolation(self.name, self.level))


class CrashingProbe(CountingDriver):
    def probe(self) -> RungReport:
        raise OSError("bwrap: setting up uid map: Permission denied")


def test_strongest_available_rung_wins_whatever_the_given_order() -> None:
    weak = CountingDriver("weak", Level.CONFINED)
    strong = CountingDriver("strong", Level.NAMESPACED)
    broken = CountingDriver("vm", Level.VM, available=False)
    ladder = Ladder([weak, broken, strong])
    assert [d.name for d in ladder.drivers] == ["vm", "strong", "weak"]
    assert ladder.choose(Level.NONE) is strong
    assert ladder.choose(Level.CONFINED) is strong
    assert ladder.choose(Level.NAMESPACED) is strong
    with pytest.raises(SandboxUnavailable) as info:
        ladder.choose(Level.VM)
    message = str(info.value)
    assert message.startswith("SANDBOX_UNAVAILABLE")
    assert "vm (vm): no" in message
    assert "strong (namespaced): works, but namespaced is below the minimum vm" in message
    assert info.value.exit_code == 3


def test_probe_runs_once_per_rung_even_from_many_threads() -> None:
    drivers = [CountingDriver("a", Level.NAMESPACED), CountingDriver("b", Level.NONE)]
    ladder = Ladder(drivers)
    threads = [threading.Thread(target=ladder.probe_all) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = ladder.probe_all()
    ladder.choose(Level.NONE)
    assert ladder.probe_all() is first
    assert [d.probes for d in drivers] == [1, 1]


def test_a_crashing_probe_is_an_unavailable_rung_with_the_reason() -> None:
    ladder = Ladder([CrashingProbe("bwrap", Level.NAMESPACED), NoneDriver()])
    (bwrap, none) = ladder.probe_all()
    assert not bwrap.available
    assert bwrap.reason == "probe failed: bwrap: setting up uid map: Permission denied"
    assert none.available


def test_fail_closed_when_only_the_none_rung_works(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ladder = Ladder(
        [
            UnavailableDriver("bwrap", Level.NAMESPACED, "driver not built"),
            UnavailableDriver("landlock", Level.CONFINED, "not built yet"),
            NoneDriver(),
        ]
    )
    argv = ["sh", "-c", f"touch {marker}"]
    for level in (Level.CONFINED, Level.NAMESPACED, Level.VM):
        with pytest.raises(SandboxUnavailable, match="none \\(none\\): works, but"):
            run(argv, SandboxSpec(min_isolation=level), ladder=ladder)
        with pytest.raises(SandboxUnavailable):
            Sandbox.create(SandboxSpec(min_isolation=level), ladder=ladder)
    assert not marker.exists()
    # the same command does run once the spec explicitly accepts none
    result = run(argv, SandboxSpec(min_isolation=Level.NONE), ladder=ladder)
    assert result.exit_code == 0
    assert marker.exists()
    assert result.isolation.level == Level.NONE


def test_unavailable_driver_refuses_to_exec(tmp_path: Path) -> None:
    rung = UnavailableDriver("landlock", Level.CONFINED, "not built yet")
    with pytest.raises(SandboxUnavailable, match="landlock: not built yet"):
        rung.exec(SandboxSpec(), tmp_path, ["true"])


def test_default_ladder_lists_every_rung_strongest_first() -> None:
    reports = build_default_ladder().probe_all()
    assert [r.driver for r in reports] == ["firecracker", "bwrap", "landlock", "none"]
    assert [r.level for r in reports] == [Level.VM, Level.NAMESPACED, Level.CONFINED, Level.NONE]
    for r in reports:
        assert r.available or r.reason, f"{r.driver} is unavailable without a reason"
    assert not reports[0].available
    assert "firecracker" in reports[0].reason
    assert reports[3].available  # a plain subprocess always works here
    assert default_ladder() is default_ladder()


def test_default_ladder_reports_bwrap_not_built_when_the_module_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    real_import = importlib.import_module

    def fake_import(name: str, package: str | None = None) -> object:
        if name == "evalsi.sandbox._bwrap":
            raise ImportError(name)
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", fake_import)
    bwrap = build_default_ladder().probe_all()[1]
    assert (bwrap.driver, bwrap.available, bwrap.reason) == ("bwrap", False, "driver not built")


def test_an_empty_ladder_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one driver"):
        Ladder([])
