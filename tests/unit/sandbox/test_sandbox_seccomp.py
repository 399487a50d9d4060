"""The seccomp allow-list: built once per network variant, and enforced inside bwrap against
real syscalls (foreign-arch and x32 calls, namespace clones, unlisted syscalls, sockets)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.sandbox import _seccomp
from evalsi.sandbox._bwrap import BwrapDriver
from evalsi.sandbox._types import SandboxSpec

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or not os.path.exists("/usr/bin/python3"),
    reason="bubblewrap (bwrap) or /usr/bin/python3 not installed",
)
DRIVER = BwrapDriver()


@pytest.fixture
def ws() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="evalsi-test-ws-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def py(ws: Path, code: str, network: str = "deny"):  # type: ignore[no-untyped-def]
    spec = SandboxSpec(network=network)  # type: ignore[arg-type]
    return DRIVER.exec(spec, ws, ["/usr/bin/python3", "-c", code])


def test_filter_is_cached_per_network_variant() -> None:
    deny, loop = _seccomp.filter_bpf("deny"), _seccomp.filter_bpf("loopback")
    assert deny is _seccomp.filter_bpf("deny")
    assert deny != loop
    assert len(deny) % 8 == 0
    assert len(deny) > 8 * 100


def test_confined_variants_are_cached_and_leave_the_default_alone() -> None:
    default = _seccomp.filter_bpf("deny")
    # bwrap's filter (the defaults) is the same program whether the flags are spelled or not.
    assert _seccomp.filter_bpf("deny", unix_sockets=True, ipc=True) == default
    narrow = _seccomp.filter_bpf("deny", unix_sockets=False, ipc=False)
    assert narrow is _seccomp.filter_bpf("deny", unix_sockets=False, ipc=False)
    no_unix = _seccomp.filter_bpf("deny", unix_sockets=False)
    no_ipc = _seccomp.filter_bpf("deny", ipc=False)
    assert len({default, narrow, no_unix, no_ipc}) == 4
    # Fewer rules: the IPC calls fall to the default action (EPERM) instead of being listed.
    assert len(no_ipc) < len(default)
    assert _seccomp._IPC.issubset(_seccomp._ALLOW)


def test_filter_fd_holds_the_program() -> None:
    fd = _seccomp.filter_fd("deny")
    try:
        assert os.read(fd, 1 << 20) == _seccomp.filter_bpf("deny")
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


_INT80_GETPID = (
    "import ctypes, mmap\n"
    "code = bytes.fromhex('b814000000cd80c3')  # mov eax,20 (i386 getpid); int 0x80; ret\n"
    "m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
    "m.write(code)\n"
    "addr = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
    "print('got', ctypes.CFUNCTYPE(ctypes.c_long)(addr)())\n"
)


@needs_bwrap
@pytest.mark.parametrize(
    "code",
    [
        _INT80_GETPID,
        "import ctypes; print(ctypes.CDLL(None).syscall(0x40000000 + 39))",  # x32 getpid
        "import ctypes; ctypes.CDLL(None).syscall(56, 0x10000000 | 17, 0, 0, 0, 0)",  # clone
        "import ctypes; ctypes.CDLL(None).syscall(56, 0x40000000 | 17, 0, 0, 0, 0)",
        "import ctypes; ctypes.CDLL(None).syscall(321, 0, 0, 0)",  # bpf
        "import ctypes; ctypes.CDLL(None).syscall(298, 0, 0, -1, -1, 0)",  # perf_event_open
        "import ctypes; ctypes.CDLL(None).syscall(165, 0, 0, 0, 0, 0)",  # mount
        "import fcntl; fcntl.ioctl(0, 0x541C, b'x')",  # TIOCLINUX
    ],
    ids=["int80", "x32", "clone-newuser", "clone-newnet", "bpf", "perf", "mount", "tioclinux"],
)
def test_killed_syscalls(ws: Path, code: str) -> None:
    res = py(ws, code)
    assert (res.outcome.kind, res.outcome.detail) == ("denied", "seccomp"), res
    assert b"got" not in res.stdout


@needs_bwrap
def test_unlisted_syscall_is_eperm_and_clone3_is_enosys(ws: Path) -> None:
    code = (
        "import ctypes, threading, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "r = libc.syscall(135, 0xffffffff); print('personality', r, ctypes.get_errno())\n"
        "r = libc.syscall(435, 0, 0); print('clone3', r, ctypes.get_errno())\n"
        "t = threading.Thread(target=print, args=('thread ok',)); t.start(); t.join()\n"
        "print(subprocess.run(['echo', 'spawn ok'], capture_output=True).stdout.decode(), end='')\n"
    )
    res = py(ws, code)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res.stderr
    assert res.stdout == b"personality -1 1\nclone3 -1 38\nthread ok\nspawn ok\n"


@needs_bwrap
def test_socket_families_follow_the_network_mode(ws: Path) -> None:
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for fam in (1, 2, 10, 16, 0x100000002):\n"
        "    r = libc.syscall(41, ctypes.c_long(fam), 1, 0)\n"
        "    print(fam, 'ok' if r >= 0 else ctypes.get_errno())\n"
    )
    deny = py(ws, code)
    assert deny.outcome.kind == "exit", deny.stderr
    assert deny.stdout == b"1 ok\n2 1\n10 1\n16 1\n4294967298 1\n"
    loop = py(ws, code, "loopback")
    assert loop.stdout == b"1 ok\n2 ok\n10 ok\n16 1\n4294967298 ok\n"


@needs_bwrap
def test_coreutils_and_a_shell_pipeline_work(ws: Path) -> None:
    (ws / "a.txt").write_text("b\na\nc\n")
    res = DRIVER.exec(
        SandboxSpec(), ws, ["sh", "-c", "sort a.txt | tee s.txt | wc -l; cp s.txt t.txt; cat t.txt"]
    )
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res.stderr
    assert res.stdout == b"3\na\nb\nc\n"
