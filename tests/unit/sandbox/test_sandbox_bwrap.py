"""The bwrap rung against real bubblewrap and a real seccomp filter: each test asserts the
exact outcome kind, and every confinement claim is checked by a program that tries."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.sandbox._bwrap import BwrapDriver
from evalsi.sandbox._types import Level, Resources, SandboxSpec

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed"),
    pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="no /usr/bin/python3"),
]
PY = "/usr/bin/python3"
DRIVER = BwrapDriver()


@pytest.fixture
def ws() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="evalsi-test-ws-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(ws: Path, code: str, spec: SandboxSpec | None = None, **kw: object):  # type: ignore[no-untyped-def]
    return DRIVER.exec(spec or SandboxSpec(), ws, [PY, "-c", code], **kw)  # type: ignore[arg-type]


def test_probe_is_available_and_isolation_is_reported_partial() -> None:
    report = DRIVER.probe()
    assert report.available, report.reason
    assert (report.driver, report.level) == ("bwrap", Level.NAMESPACED)
    iso = DRIVER.isolation.to_dict()
    assert iso == {
        "driver": "bwrap",
        "level": "namespaced",
        "enforcement": "partial",
        "missing": ["cgroup-cpu"],  # memory and processes by cgroup as root
    }


def test_true_and_false_exit_codes(ws: Path) -> None:
    assert DRIVER.exec(SandboxSpec(), ws, ["true"]).outcome.kind == "exit"
    assert DRIVER.exec(SandboxSpec(), ws, ["true"]).exit_code == 0
    res = DRIVER.exec(SandboxSpec(), ws, ["sh", "-c", "exit 7"])
    assert (res.outcome.kind, res.exit_code) == ("exit", 7)


def test_stdin_passes_and_missing_stdin_is_dev_null(ws: Path) -> None:
    res = run(ws, "import sys; print(sys.stdin.read()[::-1])", stdin=b"abc")
    assert (res.outcome.kind, res.stdout) == ("exit", b"cba\n")
    res = run(ws, "import os; print(os.readlink('/proc/self/fd/0'), os.isatty(0))")
    assert res.stdout == b"/dev/null False\n"


def test_env_is_exactly_the_spec(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_TEST_SECRET", "hunter2")
    spec = SandboxSpec(env={"FOO": "bar"})
    res = run(ws, "import os, json; print(json.dumps(dict(os.environ)))", spec)
    assert res.outcome.kind == "exit", res.stderr
    env = __import__("json").loads(res.stdout)
    env.pop("PWD", None)  # set by the sh shim
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/workspace",
        "LANG": "C.UTF-8",
        "FOO": "bar",
    }


def test_host_secrets_are_invisible_and_writes_outside_workspace_fail(ws: Path) -> None:
    code = (
        "import os\n"
        "for p in ('/root', '/etc/shadow', '/home', '/etc/passwd'): print(p, os.path.exists(p))\n"
        "for p in ('/usr/evil', '/etc/evil', '/evil'):\n"
        "    try: open(p, 'w'); print(p, 'WROTE')\n"
        "    except OSError as e: print(p, e.errno)\n"
        "open('/workspace/ok', 'w').write('x'); open('/tmp/ok', 'w').write('y'); print('ok')\n"
    )
    res = run(ws, code)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res.stderr
    out = res.stdout.decode()
    assert "True" not in out
    assert "WROTE" not in out
    assert out.endswith("ok\n")
    assert (ws / "ok").read_text() == "x"


def test_read_only_workspace(ws: Path) -> None:
    (ws / "in.txt").write_text("data")
    spec = SandboxSpec(file_access="read-only")
    res = run(ws, "print(open('in.txt').read()); open('out', 'w')", spec)
    assert (res.outcome.kind, res.exit_code) == ("exit", 1)
    assert res.stdout == b"data\n"
    assert b"Read-only file system" in res.stderr
    assert not (ws / "out").exists()


def test_network_socket_inet_fails_and_only_lo(ws: Path) -> None:
    code = (
        "import socket, os\n"
        "try: socket.socket(socket.AF_INET, socket.SOCK_STREAM); print('INET')\n"
        "except OSError as e: print('inet', e.errno)\n"
        "socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); print('unix ok')\n"
        "print(sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') "
        "else open('/proc/net/dev').read().count(':'))\n"
    )
    res = run(ws, code)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res.stderr
    assert res.stdout == b"inet 1\nunix ok\n1\n"  # EPERM; one interface (lo) in /proc/net/dev


@pytest.mark.parametrize(
    "code",
    [
        "import ctypes; ctypes.CDLL(None).ptrace(16, 1, 0, 0)",  # PTRACE_ATTACH
        "import ctypes; ctypes.CDLL(None).unshare(0x10000000)",
        "import ctypes; ctypes.CDLL(None).syscall(250, 0, 0, 0, 0, 0)",  # keyctl
        "import fcntl; fcntl.ioctl(0, 0x5412, b'x')",  # TIOCSTI
        "import fcntl; fcntl.ioctl(0, 0x1_0000_5412, b'x')",  # TIOCSTI with high bits
        "import ctypes; ctypes.CDLL(None).syscall(425, 8, 0)",  # io_uring_setup
    ],
    ids=["ptrace", "unshare-user", "keyctl", "tiocsti", "tiocsti-high-bits", "io_uring"],
)
def test_dangerous_syscalls_are_killed_by_seccomp(ws: Path, code: str) -> None:
    res = run(ws, code)
    assert (res.outcome.kind, res.outcome.detail) == ("denied", "seccomp"), res


def test_fork_bomb_is_bounded_by_nproc(ws: Path) -> None:
    code = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        pid = os.fork()\n"
        "        if pid == 0: time.sleep(5); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as e: print(n, e.errno)\n"
    )
    spec = SandboxSpec(resources=Resources(processes=10))
    res = run(ws, code, spec, timeout_seconds=10)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
    forked, err = res.stdout.split()
    # itself + at most 9 children (fewer if a zombie of this pool uid lingers); EAGAIN
    assert 5 <= int(forked) <= 9
    assert int(err) == 11


def test_memory_bomb_is_bounded_by_as(ws: Path) -> None:
    res = run(ws, "x = bytearray(600 << 20)", SandboxSpec(resources=Resources(memory_mb=256)))
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "memory"), res


def test_cpu_spin_is_bounded_by_rlimit_cpu(ws: Path) -> None:
    spec = SandboxSpec(resources=Resources(cpu_seconds=1))
    res = run(ws, "while True: pass", spec, timeout_seconds=10)
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "cpu"), res
    assert res.duration_ms < 9000  # well before the 10 s wall clock, even on a loaded machine


def test_timeout_leaves_no_process(ws: Path) -> None:
    code = "import os, time\nif os.fork() == 0: os.setsid(); time.sleep(1000)\ntime.sleep(1000)"
    t0 = time.monotonic()
    res = run(ws, code, timeout_seconds=0.5)
    assert res.outcome.kind == "timeout"
    assert time.monotonic() - t0 < 3
    time.sleep(0.1)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            assert b"time.sleep(1000)" not in cmd, f"leftover process {entry}"


def test_output_flood_is_capped(ws: Path) -> None:
    spec = SandboxSpec(resources=Resources(output_bytes=1000))
    res = DRIVER.exec(spec, ws, ["sh", "-c", "head -c 2000000 /dev/zero; echo done >&2"])
    assert (res.outcome.kind, res.exit_code) == ("exit", 0)
    assert res.stdout == b"\0" * 1000
    assert res.stdout_truncated
    assert res.stderr == b"done\n"
    assert not res.stderr_truncated
    res = DRIVER.exec(spec, ws, ["yes"], timeout_seconds=10)
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "output")


def test_host_fds_are_not_inherited(ws: Path) -> None:
    fd = os.open("/etc/hostname", os.O_RDONLY)  # inheritable on purpose
    os.set_inheritable(fd, True)
    try:
        res = run(ws, "import os; print(sorted(os.listdir('/proc/self/fd')))")
    finally:
        os.close(fd)
    assert res.outcome.kind == "exit", res.stderr
    assert res.stdout == b"['0', '1', '2', '3']\n"  # 3 is listdir's own fd


def test_program_cannot_forge_a_runner_failure(ws: Path) -> None:
    res = DRIVER.exec(SandboxSpec(), ws, ["sh", "-c", "echo 'bwrap: fake' >&2; exit 1"])
    assert (res.outcome.kind, res.exit_code) == ("exit", 1)


def test_broken_profile_is_a_runner_failure(ws: Path) -> None:
    broken = BwrapDriver(extra_args=["--ro-bind", "/nonexistent-evalsi", "/x"])
    res = broken.exec(SandboxSpec(), ws, ["true"])
    assert res.outcome.kind == "runner_failure"
    assert res.outcome.detail.startswith("bwrap: ")
    assert "nonexistent-evalsi" in res.outcome.detail
    report = broken.probe()
    assert not report.available
    assert "nonexistent-evalsi" in report.reason


def test_missing_binary_fails_closed(ws: Path) -> None:
    driver = BwrapDriver(bwrap="/nonexistent/bwrap")
    assert driver.probe().reason == (
        "bubblewrap is not installed: apt-get install bubblewrap (Debian/Ubuntu)"
    )
    assert driver.exec(SandboxSpec(), ws, ["true"]).outcome.kind == "runner_failure"


@pytest.mark.skipif(os.geteuid() != 0, reason="distinct pool uids need root")
def test_concurrent_sandboxes_run_under_distinct_host_uids(ws: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    code = "import time; open('mine', 'w').close(); time.sleep(0.3)"
    ws.chmod(0o711)
    spaces = [ws / str(i) for i in range(3)]  # one workspace per sandbox
    for space in spaces:
        space.mkdir()
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda space: run(space, code), spaces))
    uids = {(space / "mine").stat().st_uid for space in spaces}  # the owner on the host
    assert [r.outcome.kind for r in results] == ["exit"] * 3
    assert len(uids) == 3
    assert min(uids) >= 2_000_000_000


@pytest.mark.skipif(os.geteuid() != 0, reason="reachability matters only for pool uids")
def test_unreachable_workspace_is_refused(tmp_path: Path) -> None:
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    (hidden / "ws").mkdir()
    with pytest.raises(ValueError, match="not reachable by sandbox uids"):
        DRIVER.exec(SandboxSpec(), hidden / "ws", ["true"])


def test_exec_env_merges_over_the_spec_and_output_streams(ws: Path) -> None:
    spec = SandboxSpec(env={"A": "spec", "B": "spec"})
    chunks: list[tuple[str, bytes]] = []
    res = run(
        ws,
        "import os, sys; print(os.environ['A'], os.environ['B']); print('e', file=sys.stderr)",
        spec,
        env={"B": "exec"},
        on_output=lambda s, c: chunks.append((s, c)),
    )
    assert (res.outcome.kind, res.stdout, res.stderr) == ("exit", b"spec exec\n", b"e\n")
    assert sorted(chunks) == [("stderr", b"e\n"), ("stdout", b"spec exec\n")]


def test_read_only_paths_are_visible_but_not_writable(ws: Path) -> None:
    tool = Path(tempfile.mkdtemp(prefix="evalsi-test-tool-", dir="/tmp"))
    try:
        (tool / "version.txt").write_text("tool 1.0\n")
        tool.chmod(0o755)
        (tool / "version.txt").chmod(0o644)
        code = (
            f"import pathlib; p = pathlib.Path('{tool}/version.txt')\n"
            "print(p.read_text(), end='')\n"
            "try:\n    p.write_text('x'); print('wrote')\nexcept OSError as e: print(e.errno)"
        )
        res = run(ws, code, SandboxSpec(read_only_paths=(tool,)))
        assert res.outcome.kind == "exit", res.stderr
        assert res.stdout.splitlines() == [b"tool 1.0", b"30"]  # EROFS
        hidden = run(ws, f"import os; print(os.path.exists('{tool}'))")
        assert hidden.stdout == b"False\n"
    finally:
        shutil.rmtree(tool, ignore_errors=True)
