"""Per-execution cgroups: the memory total of a sandbox, which rlimits (per process) cannot
bound, on the real kernel; and the report when cgroups are unavailable."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.sandbox import _cgroup
from evalsi.sandbox._bwrap import BwrapDriver
from evalsi.sandbox._types import Resources, SandboxSpec

pytestmark = [
    pytest.mark.skipif(not _cgroup.available(), reason=f"{_cgroup.unavailable_reason()}"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed"),
]
PY = "/usr/bin/python3"
DRIVER = BwrapDriver()

# Six children each hold 100 MB: every one is far under RLIMIT_AS, together over 256 MB.
SPREAD = textwrap.dedent(
    """
    import os, time
    kids = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:
            block = bytearray(100 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(3)
            os._exit(0)
        kids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids]
    print(codes)
    raise SystemExit(1 if any(codes) else 0)
    """
)


@pytest.fixture
def ws() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="evalsi-test-ws-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _groups() -> set[str]:
    found: set[str] = set()
    base = _cgroup.ROOT / "memory" / "evalsi"
    if base.is_dir():
        found |= {p.name for p in base.iterdir() if p.is_dir()}
    return found


def test_memory_spread_over_processes_is_bounded_by_the_group(ws: Path) -> None:
    spec = SandboxSpec(resources=Resources(memory_mb=256, cpu_seconds=20), timeout_seconds=30)
    res = DRIVER.exec(spec, ws, [PY, "-c", SPREAD])
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "memory"), res


def test_the_same_program_runs_under_a_larger_limit(ws: Path) -> None:
    """The control: with room for all six, nothing is killed."""
    spec = SandboxSpec(resources=Resources(memory_mb=1024, cpu_seconds=20), timeout_seconds=30)
    res = DRIVER.exec(spec, ws, [PY, "-c", SPREAD])
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res


def test_each_execution_gets_a_fresh_group_that_is_removed(ws: Path) -> None:
    before = _groups()
    code = "print(open('/proc/self/cgroup').read())"
    res = DRIVER.exec(SandboxSpec(), ws, [PY, "-c", code])
    assert res.exit_code == 0, res
    assert _groups() == before  # no group left behind
    # inside, the cgroup namespace hides the path; outside we saw it was ours while it ran
    assert DRIVER.isolation.missing == ("cgroup-cpu",)


def test_unavailable_cgroups_are_reported_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    _cgroup.unavailable_reason.cache_clear()
    monkeypatch.setattr(_cgroup, "ROOT", Path("/nonexistent-cgroup-root"))
    try:
        assert _cgroup.unavailable_reason() == (
            "no memory cgroup controller found under /sys/fs/cgroup"
        )
        assert BwrapDriver().isolation.missing[0] == "cgroup"
        with _cgroup.limits(os.getuid(), Resources()) as group:
            assert group is None
        assert _cgroup.missing(None) == ("cgroup",)
    finally:
        _cgroup.unavailable_reason.cache_clear()
