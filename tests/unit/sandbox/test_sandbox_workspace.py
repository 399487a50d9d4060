"""The workspace's own tmpfs (as root): bytes and files bounded across the workspace and /tmp
together, and nothing left behind after destroy or after the harness is SIGKILLed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evalsi.sandbox import Resources, Sandbox, SandboxSpec
from evalsi.sandbox._workspace import can_bound, private_tmp

pytestmark = [
    pytest.mark.skipif(not can_bound(), reason="bounded workspaces need root (mount)"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed"),
]
PY = "/usr/bin/python3"


def _mounts() -> str:
    return Path("/proc/self/mountinfo").read_text()


def test_many_files_cannot_exceed_disk_mb_across_workspace_and_tmp() -> None:
    """Each file is under the per-file limit; together they would be 3x the disk limit."""
    spec = SandboxSpec(resources=Resources(disk_mb=8, cpu_seconds=20), timeout_seconds=30)
    code = textwrap.dedent(
        """
        import os
        total = 0
        try:
            for i in range(12):
                where = "/tmp" if i % 2 else "/workspace"
                with open(f"{where}/f{i}", "wb") as f:
                    f.write(b"x" * (2 << 20))
                total += 2 << 20
        except OSError as e:
            print("stopped", e.errno)
        print(total >> 20)
        """
    )
    with Sandbox.create(spec) as sb:
        result = sb.exec([PY, "-c", code])
        mb = int(result.stdout.split()[-1])
        assert b"stopped 28" in result.stdout, result  # ENOSPC
        assert mb <= 8
        # the bound holds across execs: the space is still full
        again = sb.exec([PY, "-c", "open('/workspace/more', 'wb').write(b'x' * (2 << 20))"])
        assert again.exit_code != 0
        assert b"No space left" in again.stderr


def test_file_count_is_bounded() -> None:
    spec = SandboxSpec(resources=Resources(files=300), timeout_seconds=30)
    code = textwrap.dedent(
        """
        n = 0
        try:
            for i in range(5000):
                open(f"/tmp/f{i}", "w").close()
                n += 1
        except OSError as e:
            print("stopped", e.errno)
        print(n)
        """
    )
    with Sandbox.create(spec) as sb:
        result = sb.exec([PY, "-c", code])
    assert b"stopped 28" in result.stdout, result
    assert int(result.stdout.split()[-1]) <= 300


def test_destroy_unmounts_and_removes_everything() -> None:
    sb = Sandbox.create(SandboxSpec())
    base = sb.workspace.parent
    assert private_tmp(sb.workspace) == base / "tmp"
    assert str(base) in _mounts()
    sb.exec(["sh", "-c", "mkdir -p d/e && touch d/e/f && chmod 0 d/e d"])
    sb.destroy()
    assert not base.exists()
    assert str(base) not in _mounts()


def test_a_killed_harness_leaves_no_mount_or_directory(tmp_path: Path) -> None:
    harness = textwrap.dedent(
        """
        import sys, time
        from evalsi.sandbox import Sandbox, SandboxSpec
        sb = Sandbox.create(SandboxSpec())
        sb.copy_in(b"data", "kept.txt")
        print(sb.workspace.parent, flush=True)
        time.sleep(120)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", harness], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        base = proc.stdout.readline().decode().strip()
        assert base
        assert Path(base, "workspace", "kept.txt").exists()
        assert base in _mounts()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (Path(base).exists() or base in _mounts()):
            time.sleep(0.05)
        assert base not in _mounts()
        assert not Path(base).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
