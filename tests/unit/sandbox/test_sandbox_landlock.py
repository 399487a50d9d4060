"""The landlock rung against the real kernel: real Landlock, real seccomp, real rlimits.

Every confinement claim is checked by a program that tries, and every "denied" case has a
control showing the same action works without the confinement (same uid, same DAC), so a
test cannot pass just because file permissions already forbade the action."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evalsi.sandbox import _capture, _cgroup, _profile, _seccomp, _workspace
from evalsi.sandbox import _landlock_launch as ll
from evalsi.sandbox._api import Sandbox
from evalsi.sandbox._ladder import Ladder
from evalsi.sandbox._landlock import LandlockDriver, classify, landlock_rung
from evalsi.sandbox._types import Level, Resources, SandboxSpec, SandboxUnavailable


def _abi() -> int:
    try:
        return ll.landlock_abi()
    except OSError:
        return 0


pytestmark = [
    pytest.mark.skipif(_abi() < 6, reason=f"Landlock ABI {_abi()} < 6 on this kernel"),
    pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="no /usr/bin/python3"),
]
PY = "/usr/bin/python3"
DRIVER = LandlockDriver()
ROOT = os.geteuid() == 0


@pytest.fixture
def ws() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="evalsi-test-ws-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A host dir any uid may read and write (0777) holding a 0644 canary: only Landlock
    keeps the sandbox out of it."""
    path = Path(tempfile.mkdtemp(prefix="evalsi-test-outside-", dir="/tmp"))
    path.chmod(0o777)
    canary = path / "canary"
    canary.write_text("host secret")
    canary.chmod(0o644)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(ws: Path, code: str, spec: SandboxSpec | None = None, **kw: object):  # type: ignore[no-untyped-def]
    return DRIVER.exec(spec or SandboxSpec(), ws, [PY, "-c", code], **kw)  # type: ignore[arg-type]


def _as_nobody(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """The control: the same action by an unconfined unprivileged uid."""
    return subprocess.run(argv, user=65534, group=65534, extra_groups=[], capture_output=True)


def _processes_of(uid: int) -> list[str]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    out.append(entry)
            except OSError:
                continue
    return out


def test_probe_is_available_and_isolation_is_partial() -> None:
    report = DRIVER.probe()
    assert report.available, report.reason
    assert (report.driver, report.level) == ("landlock", Level.CONFINED)
    iso = DRIVER.isolation_for(SandboxSpec()).to_dict()
    assert iso["driver"] == "landlock"
    assert iso["level"] == "confined"
    assert iso["enforcement"] == "partial"
    missing = set(DRIVER.isolation_for(SandboxSpec()).missing)
    assert {"pid-namespace", "mount-namespace", "ipc-namespace", "host-metadata"} <= missing
    # cgroups give the totals where they can be made (root, memory + pids controllers).
    assert ("cgroup-cpu" if _cgroup.available() else "cgroup") in missing
    # Refused outright by the filter, so no host socket is reachable through them.
    assert not missing & {"network", "unix-sockets", "cgroup" if _cgroup.available() else ""}
    assert isinstance(landlock_rung(), LandlockDriver)


def test_true_false_and_missing_command(ws: Path) -> None:
    assert (DRIVER.exec(SandboxSpec(), ws, ["true"]).outcome.kind, 0) == ("exit", 0)
    assert DRIVER.exec(SandboxSpec(), ws, ["true"]).exit_code == 0
    res = DRIVER.exec(SandboxSpec(), ws, ["sh", "-c", "exit 7"])
    assert (res.outcome.kind, res.exit_code) == ("exit", 7)
    res = DRIVER.exec(SandboxSpec(), ws, ["no-such-binary-xyz"])
    assert (res.outcome.kind, res.exit_code) == ("exit", 127)
    assert res.stderr == b"no-such-binary-xyz: command not found\n"


def test_stdin_env_and_fds(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_TEST_SECRET", "hunter2")
    res = run(ws, "import sys; print(sys.stdin.read()[::-1])", stdin=b"abc")
    assert (res.outcome.kind, res.stdout) == ("exit", b"cba\n")
    code = (
        "import os, json; print(json.dumps([dict(os.environ), os.getcwd(),"
        " os.readlink('/proc/self/fd/0'), sorted(os.listdir('/proc/self/fd'))]))"
    )
    fd = os.open("/etc/hostname", os.O_RDONLY)  # inheritable on purpose
    os.set_inheritable(fd, True)
    try:
        res = run(ws, code, SandboxSpec(env={"FOO": "bar", "X": "spec"}), env={"X": "exec"})
    finally:
        os.close(fd)
    assert res.outcome.kind == "exit", res
    env, cwd, stdin, fds = __import__("json").loads(res.stdout)
    tmpdir = env.pop("TMPDIR")
    assert tmpdir.startswith("/tmp/evalsi-landlock-tmp-")
    assert not os.path.exists(tmpdir)  # removed after the exec
    real = str(ws.resolve())
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": real,
        "LANG": "C.UTF-8",
        "FOO": "bar",
        "X": "exec",
    }
    assert (cwd, stdin) == (real, "/dev/null")
    assert fds == ["0", "1", "2", "3"]  # 3 is listdir's own


def test_reads_outside_the_allowed_hierarchies_are_denied(ws: Path, outside: Path) -> None:
    canary = str(outside / "canary")
    assert _as_nobody(["cat", canary]).stdout == b"host secret"  # DAC would allow it
    code = (
        "import os\n"
        "def tryread(p):\n"
        "    try: open(p, 'rb').read(1); return 'ok'\n"
        "    except OSError as e: return e.errno\n"
        f"print(tryread({canary!r}), tryread('/etc/passwd'), tryread('/etc/hostname'),"
        " tryread('/proc/1/cmdline'), tryread('/etc/ld.so.cache'), tryread('/usr/lib/os-release'),"
        " tryread('/dev/urandom'))\n"
        f"print(os.path.exists({canary!r}))\n"  # metadata is not confined (see missing)
    )
    res = run(ws, code)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
    assert res.stdout == b"13 13 13 13 ok ok ok\nTrue\n"  # EACCES from Landlock


def test_writes_only_in_workspace_and_tmpdir(ws: Path, outside: Path) -> None:
    target = str(outside / "new")
    assert _as_nobody(["sh", "-c", f"echo x > {target} && rm {target}"]).returncode == 0
    escape = f"/tmp/evalsi-escape-{os.getpid()}-{time.monotonic_ns()}"  # /tmp is 1777
    code = (
        (
            "import os\n"
            "def trywrite(p):\n"
            "    try: open(p, 'w').write('x'); return 'ok'\n"
            "    except OSError as e: return e.errno\n"
            f"print(trywrite({target!r}), trywrite({escape!r}),"
            " trywrite('out.txt'), trywrite(os.environ['TMPDIR'] + '/t'))\n"
            "os.mkdir('d'); os.rename('out.txt', 'd/moved'); os.symlink('d/moved', 'link')\n"
            f"print(trywrite({str(outside / 'canary')!r}))\n"
            "for src, dst in (({canary!r}, 'stolen'), ('d/moved', {moved!r})):\n"
            "    try: os.rename(src, dst); print('MOVED')\n"
            "    except OSError as e: print(e.errno)\n"
        )
        .replace("{canary!r}", repr(str(outside / "canary")))
        .replace("{moved!r}", repr(str(outside / "moved")))
    )
    try:
        res = run(ws, code)
        escaped = Path(escape).exists()
    finally:
        Path(escape).unlink(missing_ok=True)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
    # renames across the boundary, either way, are refused too (no remove/make right there)
    assert res.stdout == b"13 13 ok ok\n13\n13\n13\n"
    assert not escaped
    assert (ws / "d" / "moved").read_text() == "x"
    assert not Path(target).exists()
    assert (outside / "canary").read_text() == "host secret"


def test_read_only_workspace_and_read_only_paths(ws: Path, outside: Path) -> None:
    (ws / "in.txt").write_text("data")
    spec = SandboxSpec(file_access="read-only", read_only_paths=(outside,))
    code = (
        "import os\n"
        "print(open('in.txt').read(), open('" + str(outside / "canary") + "').read())\n"
        "for p in ('out', '" + str(outside / "new") + "'):\n"
        "    try: open(p, 'w'); print('WROTE')\n"
        "    except OSError as e: print(e.errno)\n"
        "open(os.environ['TMPDIR'] + '/scratch', 'w').write('tmp stays writable')\n"
    )
    res = run(ws, code, spec)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
    assert res.stdout == b"data host secret\n13\n13\n"
    assert not (ws / "out").exists()
    assert not (outside / "new").exists()


class _Listener:
    """A host-side canary server: records whether anything reached it."""

    def __init__(self, family: int, kind: int, address: object) -> None:
        self.sock = socket.socket(family, kind)
        self.sock.bind(address)  # type: ignore[arg-type]
        if kind == socket.SOCK_STREAM:
            self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.hits = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, args=(kind,), daemon=True)
        self._thread.start()

    def _serve(self, kind: int) -> None:
        while not self._stop:
            try:
                if kind == socket.SOCK_STREAM:
                    conn, _ = self.sock.accept()
                    conn.close()
                else:
                    self.sock.recv(100)
                self.hits += 1
            except OSError:
                continue

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


_NET_CODE = (
    "import socket\n"
    "def tcp():\n"
    "    try: s = socket.socket(); s.settimeout(3); s.connect(('127.0.0.1', {tcp})); return 'ok'\n"
    "    except OSError as e: return e.errno\n"
    "def udp():\n"
    "    try:\n"
    "        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "        s.sendto(b'x', ('127.0.0.1', {udp})); return 'ok'\n"
    "    except OSError as e: return e.errno\n"
    "def bind():\n"
    "    try: s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); return 'ok'\n"
    "    except OSError as e: return e.errno\n"
    "print(tcp(), udp(), bind())\n"
)


def test_network_is_denied_by_both_layers(ws: Path) -> None:
    tcp = _Listener(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
    udp = _Listener(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
    try:
        code = _NET_CODE.format(tcp=tcp.sock.getsockname()[1], udp=udp.sock.getsockname()[1])
        # The real profile: seccomp refuses inet sockets outright (EPERM).
        res = run(ws, code)
        assert (res.outcome.kind, res.stdout) == ("exit", b"1 1 1\n"), res
        # Landlock's own layer, with a seccomp filter that allows inet sockets: TCP bind and
        # connect are refused (EACCES) but UDP gets through -- why the socket filter stays.
        inet_ok = LandlockDriver(seccomp_override=_seccomp.filter_bpf("loopback"))
        res = inet_ok.exec(SandboxSpec(), ws, [PY, "-c", code])
        assert (res.outcome.kind, res.stdout) == ("exit", b"13 ok 13\n"), res
        time.sleep(0.3)
        assert (tcp.hits, udp.hits) == (0, 1)
        # loopback mode would need a network namespace: refused, nothing runs.
        with pytest.raises(SandboxUnavailable, match="loopback"):
            run(ws, code, SandboxSpec(network="loopback"))
        time.sleep(0.3)
        assert tcp.hits == 0
    finally:
        tcp.close()
        udp.close()


def test_unix_sockets_are_refused_but_socketpair_works(ws: Path, outside: Path) -> None:
    name = f"\0evalsi-test-{os.getpid()}"
    abstract = _Listener(socket.AF_UNIX, socket.SOCK_STREAM, name)
    path = str(outside / "sock")
    named = _Listener(socket.AF_UNIX, socket.SOCK_STREAM, path)
    os.chmod(path, 0o777)
    try:
        code = (
            "import socket\n"
            f"for addr in ({name!r}, {path!r}):\n"
            "    try: s = socket.socket(socket.AF_UNIX); s.connect(addr); print('connected')\n"
            "    except OSError as e: print(e.errno)\n"
            "a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())\n"
        )
        # The control: an unconfined unprivileged uid reaches both by permission alone.
        control = _as_nobody([PY, "-c", code])
        assert control.stdout == b"connected\nconnected\npair\n", control
        time.sleep(0.3)
        assert (abstract.hits, named.hits) == (1, 1)
        # The real profile: socket(AF_UNIX) itself answers EPERM; socketpair still works.
        res = run(ws, code)
        assert (res.outcome.kind, res.stdout) == ("exit", b"1\n1\npair\n"), res
        # Landlock alone (bwrap's filter, which allows AF_UNIX): the abstract name is scoped
        # away (EPERM), but the pathname socket connects -- why this rung's filter refuses it.
        landlock_only = LandlockDriver(seccomp_override=_seccomp.filter_bpf("deny"))
        res = landlock_only.exec(SandboxSpec(), ws, [PY, "-c", code])
        assert (res.outcome.kind, res.stdout) == ("exit", b"1\nconnected\npair\n"), res
        time.sleep(0.3)
        assert (abstract.hits, named.hits) == (1, 2)
    finally:
        abstract.close()
        named.close()


_IPC_CODE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    ctypes.set_errno(0)
    r = getattr(libc, name)(*args)
    return "ok" if r >= 0 else str(ctypes.get_errno())
key = int(sys.argv[1])
print(call("shmget", key, 0, 0), call("semget", key, 0, 0), call("msgget", key, 0, 0),
      call("mq_open", b"/evalsi-test-none", 0))
"""


def test_sysv_ipc_and_message_queues_are_refused(ws: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x6E000000 + os.getpid() % 0xFFFF
    ids = [libc.shmget(key, 4096, 0o1666), libc.semget(key, 1, 0o1666), libc.msgget(key, 0o1666)]
    assert min(ids) >= 0, ctypes.get_errno()  # IPC_CREAT | 0666: any uid may use them
    try:
        argv = [PY, "-c", _IPC_CODE, str(key)]
        control = _as_nobody(argv)  # found by key; the queue name does not exist (ENOENT)
        assert control.stdout == b"ok ok ok 2\n", control
        res = DRIVER.exec(SandboxSpec(), ws, argv)
        assert (res.outcome.kind, res.stdout) == ("exit", b"1 1 1 1\n"), res  # EPERM
        # Landlock does not cover IPC at all: with bwrap's filter the host's objects are open.
        res = LandlockDriver(seccomp_override=_seccomp.filter_bpf("deny")).exec(
            SandboxSpec(), ws, argv
        )
        assert (res.outcome.kind, res.stdout) == ("exit", b"ok ok ok 2\n"), res
    finally:
        libc.shmctl(ids[0], 0, None)  # IPC_RMID
        libc.semctl(ids[1], 0, 0)
        libc.msgctl(ids[2], 0, None)


_PROC_CODE = """
import os, subprocess, sys, threading
def tryread(p):
    try:
        with open(p, "rb") as f: f.read(1)
        return "ok"
    except OSError as e:
        return str(e.errno)
def trylist(p):
    try: os.listdir(p); return "ok"
    except OSError as e: return str(e.errno)
me = str(os.getpid())
print(*[tryread("/proc/self/" + n) for n in ("status", "stat", "statm", "cmdline", "maps",
      "limits", "auxv", "fdinfo/0")], trylist("/proc/self/fd"))
print(*[tryread(p) for p in ("/proc/self/net/dev", "/proc/net/dev", "/proc/self/mountinfo",
      "/proc/self/mounts", "/proc/self/cgroup", "/proc/self/task/" + me + "/mountinfo",
      "/proc/self/task/" + me + "/net/dev")],
      *[trylist(p) for p in ("/proc/self", "/proc/self/net", "/proc/self/task")])
"""


def test_own_proc_entries_are_chosen_not_wholesale(ws: Path) -> None:
    # The control: the same uid unconfined reads all of it (its net/ and mountinfo are the
    # host's: no namespaces on this rung).
    control = _as_nobody([PY, "-c", _PROC_CODE])
    assert control.stdout == b"ok ok ok ok ok ok ok ok ok\n" + b"ok " * 9 + b"ok\n", control
    res = run(ws, _PROC_CODE)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
    assert res.stdout == b"ok ok ok ok ok ok ok ok ok\n" + b"13 " * 9 + b"13\n", res
    # Runtimes still work: threads, and subprocess with close_fds and pass_fds.
    code = (
        "import os, subprocess, sys, threading\n"
        "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "r, w = os.pipe()\n"
        "out = subprocess.run([sys.executable, '-c', 'import os; os.write(%d, b\"fd\")' % w,],"
        " pass_fds=(w,), capture_output=True, check=True)\n"
        "os.close(w); print(os.read(r, 10).decode(), len(os.listdir('/proc/self/fd')))\n"
        "print(subprocess.check_output(['sh', '-c', 'ls -d . && echo shell'], text=True), end='')\n"
    )
    res = run(ws, code)
    assert (res.outcome.kind, res.stdout) == ("exit", b"thread\nfd 5\n.\nshell\n"), res


@pytest.mark.skipif(not ROOT, reason="a pool uid (root) owns the workspace otherwise")
def test_read_only_workspace_metadata_cannot_change(ws: Path) -> None:
    (ws / "in.txt").write_text("data")
    (ws / "in.txt").chmod(0o600)  # root-only: the hand-over must let the pool uid read it
    (ws / "sub").mkdir(mode=0o700)
    code = (
        "import os\n"
        "print(open('in.txt').read(), os.listdir('sub'))\n"
        "for name, act in (('chmod', lambda: os.chmod('in.txt', 0o777)),"
        " ('utime', lambda: os.utime('in.txt', (0, 0))),"
        " ('chown', lambda: os.chown('in.txt', os.getuid(), -1)),"
        " ('chmod-dir', lambda: os.chmod('.', 0o777))):\n"
        "    try: act(); print(name, 'ok')\n"
        "    except OSError as e: print(name, e.errno)\n"
    )
    res = run(ws, code, SandboxSpec(file_access="read-only"))
    assert (res.outcome.kind, res.stdout) == (
        "exit",
        b"data []\nchmod 1\nutime 1\nchown 1\nchmod-dir 1\n",  # EPERM: not the owner
    ), res
    st = (ws / "in.txt").stat()
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o604)
    assert (ws / "sub").stat().st_mode & 0o7777 == 0o705
    # The control: a writable workspace is the pool uid's, so its program may chmod it.
    res = run(ws, code)
    assert res.stdout == b"data []\nchmod ok\nutime ok\nchown ok\nchmod-dir ok\n", res


def test_hand_over_read_only_never_follows_links(ws: Path, outside: Path) -> None:
    if not ROOT:
        pytest.skip("chown to root needs root")
    target = outside / "target"
    target.write_text("host")
    target.chmod(0o600)
    tool = ws / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o6750)  # setuid + setgid, owner-executable
    os.chown(tool, 12345, 12345)
    (ws / "link").symlink_to(target)
    _profile.hand_over(ws, 2_000_000_000, 2_000_000_000, read_only=True)
    assert (tool.stat().st_uid, tool.stat().st_mode & 0o7777) == (0, 0o755)
    assert target.stat().st_mode & 0o7777 == 0o600  # the link's target is untouched
    assert os.lstat(ws / "link").st_uid == 0


def test_signals_leave_the_sandbox_only_inward(ws: Path) -> None:
    # The launcher (the program's parent) runs under the same uid outside the program's
    # domain: DAC allows the signal, the scope refuses it. A child of the program is inside.
    code = (
        "import os, signal, time\n"
        "child = os.fork()\n"
        "if child == 0: time.sleep(30); os._exit(0)\n"
        "try: os.kill(os.getppid(), signal.SIGKILL); print('killed parent')\n"
        "except OSError as e: print(e.errno)\n"
        "os.kill(child, signal.SIGKILL); print(os.waitpid(child, 0)[1] & 0x7f)\n"
    )
    res = run(ws, code)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
    assert res.stdout == b"1\n9\n"


@pytest.mark.parametrize(
    "code",
    [
        "import ctypes; ctypes.CDLL(None).ptrace(16, 1, 0, 0)",  # PTRACE_ATTACH
        "import ctypes; ctypes.CDLL(None).unshare(0x10000000)",
        "import ctypes; ctypes.CDLL(None).syscall(250, 0, 0, 0, 0, 0)",  # keyctl
        "import ctypes; ctypes.CDLL(None).syscall(425, 8, 0)",  # io_uring_setup
    ],
    ids=["ptrace", "unshare-user", "keyctl", "io_uring"],
)
def test_dangerous_syscalls_are_killed_by_seccomp(ws: Path, code: str) -> None:
    res = run(ws, code)
    assert (res.outcome.kind, res.outcome.detail) == ("denied", "seccomp"), res


def test_timeout_and_exit_leave_no_process(ws: Path) -> None:
    code = (
        "import os, sys, time\n"
        "print(os.getuid(), flush=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0: time.sleep(1000)\n"  # a daemon holding stdout open
        "    os._exit(0)\n"
        "time.sleep(float(sys.argv[1]))\n"
    )
    t0 = time.monotonic()
    res = DRIVER.exec(SandboxSpec(), ws, [PY, "-c", code, "1000"], timeout_seconds=0.5)
    assert res.outcome.kind == "timeout", res
    assert time.monotonic() - t0 < 4
    if ROOT:  # a pool uid owns nothing else
        assert _processes_of(int(res.stdout)) == []
    # Exiting normally: the daemon is killed with it, so the exec does not wait for it.
    t0 = time.monotonic()
    res = DRIVER.exec(SandboxSpec(), ws, [PY, "-c", code, "0"], timeout_seconds=20)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
    assert time.monotonic() - t0 < 4
    if ROOT:  # a pool uid owns nothing else
        assert _processes_of(int(res.stdout)) == []


def test_resource_limits(ws: Path) -> None:
    res = run(ws, "x = bytearray(600 << 20)", SandboxSpec(resources=Resources(memory_mb=256)))
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "memory"), res
    spec = SandboxSpec(resources=Resources(cpu_seconds=1))
    res = run(ws, "while True: pass", spec, timeout_seconds=15)
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "cpu"), res
    spec = SandboxSpec(resources=Resources(output_bytes=1000))
    res = DRIVER.exec(spec, ws, ["yes"], timeout_seconds=10)
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "output")
    spec = SandboxSpec(resources=Resources(disk_mb=1))
    res = DRIVER.exec(spec, ws, ["sh", "-c", "exec head -c 2000000 /dev/zero > big"])
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "disk"), res


def _raw_sigaction(sig: int, *, handler: int) -> None:
    import ctypes

    number = {"x86_64": 13, "aarch64": 134}[os.uname().machine]
    action = (ctypes.c_ulong * 4)(handler, 0, 0, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(ctypes.c_long(number), ctypes.c_int(sig), action, None, ctypes.c_size_t(8))
    assert rc == 0, ctypes.get_errno()


def test_signal_dispositions_are_the_defaults(ws: Path) -> None:
    # The launcher is Python, which ignores SIGPIPE: the program must not inherit that.
    res = DRIVER.exec(SandboxSpec(), ws, ["sh", "-c", "yes | head -n 1"], timeout_seconds=10)
    assert (res.outcome.kind, res.exit_code, res.stdout) == ("exit", 0, b"y\n"), res
    # The program's own /proc entry is readable (its children's are not). A harness that
    # ignores SIGHUP (nohup) or SIGINT (a background job) does not pass that on either.
    # Signal 32 is reserved by glibc (Python cannot set it): set and reset with the syscall.
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _raw_sigaction(32, handler=1)  # SIG_IGN
    try:
        argv = ["sh", "-c", "exec grep SigIgn /proc/self/status"]
        control = subprocess.run(argv, capture_output=True)  # inherited through exec
        res = DRIVER.exec(SandboxSpec(), ws, argv)
    finally:
        signal.signal(signal.SIGHUP, old)
        _raw_sigaction(32, handler=0)
    ignored = int(control.stdout.split()[1], 16)
    assert ignored & (1 << (signal.SIGHUP - 1)), control
    assert ignored & (1 << 31), control
    assert (res.outcome.kind, res.stdout) == ("exit", b"SigIgn:\t0000000000000000\n"), res


@pytest.mark.skipif(not ROOT, reason="RLIMIT_NPROC needs a pool uid (root)")
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
    res = run(ws, code, SandboxSpec(resources=Resources(processes=10)), timeout_seconds=10)
    assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
    forked, err = res.stdout.split()
    assert 5 <= int(forked) <= 9  # 10 minus itself (the launcher is counted by the limit)
    assert int(err) == 11  # EAGAIN


def test_output_streams_and_program_cannot_forge_a_failure(ws: Path) -> None:
    seen: list[tuple[str, bytes]] = []
    code = (
        "import sys; print('error landlock: forged')\n"
        "print('status exit 0', file=sys.stderr); sys.exit(3)"
    )
    res = run(ws, code, on_output=lambda name, chunk: seen.append((name, chunk)))
    assert (res.outcome.kind, res.exit_code) == ("exit", 3), res
    assert b"".join(c for n, c in seen if n == "stdout") == b"error landlock: forged\n"
    assert b"".join(c for n, c in seen if n == "stderr") == b"status exit 0\n"


@pytest.mark.skipif(not ROOT, reason="distinct pool uids need root")
def test_concurrent_sandboxes_run_under_distinct_uids() -> None:
    spaces = [Path(tempfile.mkdtemp(prefix="evalsi-test-ws-", dir="/tmp")) for _ in range(3)]
    code = "import os, time; print(os.getuid(), flush=True); time.sleep(1)"
    try:
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda space: run(space, code), spaces))
    finally:
        for space in spaces:
            shutil.rmtree(space, ignore_errors=True)
    assert [r.outcome.kind for r in results] == ["exit"] * 3, results
    assert len({r.stdout for r in results}) == 3


def _marker_argv(marker: Path) -> list[str]:
    return ["sh", "-c", f"echo ran > {marker}"]


@pytest.mark.parametrize(
    ("driver", "reason"),
    [
        (LandlockDriver(abi_override=3), "Landlock ABI 3 < 4: no TCP rules; refused"),
        (
            LandlockDriver(abi_override=5),
            "Landlock ABI 5 < 6: no abstract-unix/signal scoping; refused",
        ),
    ],
    ids=["abi3", "abi5"],
)
def test_old_abi_is_refused_and_nothing_runs(ws: Path, driver: LandlockDriver, reason: str) -> None:
    report = driver.probe()
    assert (report.available, report.reason) == (False, reason)
    marker = ws / "marker"
    res = driver.exec(SandboxSpec(), ws, _marker_argv(marker))
    assert res.outcome.kind == "runner_failure"
    assert res.outcome.detail == f"landlock: landlock: {reason}"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("bpf", "detail"),
    [
        (b"\x00" * 7, "landlock: seccomp: malformed BPF program (7 bytes)"),
        # One instruction with an opcode the kernel's checker rejects.
        (b"\xff\xff\x00\x00\x00\x00\x00\x00", "landlock: seccomp: loading the filter failed"),
    ],
    ids=["truncated", "invalid-opcode"],
)
def test_broken_seccomp_is_a_runner_failure_and_nothing_runs(
    ws: Path, bpf: bytes, detail: str
) -> None:
    driver = LandlockDriver(seccomp_override=bpf)
    marker = ws / "marker"
    res = driver.exec(SandboxSpec(), ws, _marker_argv(marker))
    assert res.outcome.kind == "runner_failure", res
    assert res.outcome.detail.startswith(detail)
    assert not marker.exists()
    report = driver.probe()
    assert not report.available
    assert "seccomp" in report.reason


def test_missing_read_only_path_and_image_root_fail_closed(ws: Path) -> None:
    marker = ws / "marker"
    spec = SandboxSpec(read_only_paths=(Path("/nonexistent/evalsi-tool"),))
    res = DRIVER.exec(spec, ws, _marker_argv(marker))
    assert res.outcome.kind == "runner_failure"
    assert "/nonexistent/evalsi-tool" in res.outcome.detail
    assert not marker.exists()
    with pytest.raises(SandboxUnavailable, match="image root"):
        DRIVER.exec(SandboxSpec(root=ws), ws, ["true"])


def test_broken_launcher_interpreter_is_a_runner_failure(ws: Path) -> None:
    driver = LandlockDriver(python="/nonexistent/python3")
    res = driver.exec(SandboxSpec(), ws, ["true"])
    assert res.outcome.kind == "runner_failure"
    assert "could not start" in res.outcome.detail
    # An interpreter that starts but is not Python: no status line, never a program result.
    res = LandlockDriver(python="/bin/true").exec(SandboxSpec(), ws, ["true"])
    assert res.outcome.kind == "runner_failure"
    assert res.outcome.detail == "landlock launcher ended without a status (exit 0)"


def test_probe_refuses_without_landlock_or_seccomp(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_landlock() -> int:
        raise OSError(38, "Function not implemented")  # ENOSYS: not built in

    def no_seccomp(network: str, **variant: bool) -> bytes:
        raise _seccomp.SeccompUnavailable("pyseccomp is not usable")

    with monkeypatch.context() as m:
        m.setattr(ll, "landlock_abi", no_landlock)
        report = LandlockDriver().probe()
    assert (report.available, report.reason) == (
        False,
        "Landlock not supported/disabled (not built in)",
    )
    monkeypatch.setattr(_seccomp, "filter_bpf", no_seccomp)
    report = LandlockDriver().probe()
    assert (report.available, report.reason) == (
        False,
        "seccomp filter failed: pyseccomp is not usable",
    )
    res = LandlockDriver().exec(SandboxSpec(), Path("/nonexistent"), ["true"])
    assert (res.outcome.kind, res.outcome.detail) == (
        "runner_failure",
        "seccomp: pyseccomp is not usable",
    )


def test_through_the_sandbox_api_with_a_bounded_workspace() -> None:
    spec = SandboxSpec(min_isolation=Level.CONFINED, resources=Resources(disk_mb=2))
    with Sandbox.create(spec, ladder=Ladder([LandlockDriver()])) as box:
        assert box.isolation.driver == "landlock"
        box.copy_in(b"print(open('in.txt').read().upper())", "main.py")
        box.copy_in(b"hello", "in.txt")
        res = box.exec([PY, "main.py"])
        assert (res.outcome.kind, res.stdout) == ("exit", b"HELLO\n"), res
        code = (
            "import os; open(os.environ['TMPDIR'] + '/keep', 'w').write('x');"
            " print(os.environ['TMPDIR'])"
        )
        res = box.exec([PY, "-c", code])
        assert res.outcome.kind == "exit", res
        tmpdir = res.stdout.decode().strip()
        if _workspace.can_bound():  # the sandbox's own tmp/, kept across execs
            assert tmpdir == str(box.workspace.parent / "tmp")
            res = box.exec(["cat", f"{tmpdir}/keep"])
            assert res.stdout == b"x"
            # The tmpfs bounds the total, which RLIMIT_FSIZE (per file) alone would not.
            fill = "head -c 1500000 /dev/zero > a; head -c 1500000 /dev/zero > b; rm a b"
            res = box.exec(["sh", "-c", fill])
            assert b"No space left on device" in res.stderr, res
        box.copy_in(b"", "out.txt")
        res = box.exec(["sh", "-c", "echo done > out.txt"])
        assert (res.outcome.kind, res.exit_code) == ("exit", 0), res
        assert box.copy_out("out.txt") == b"done\n"


needs_cgroups = pytest.mark.skipif(
    not ROOT or not _cgroup.available(), reason=f"no cgroups: {_cgroup.unavailable_reason()}"
)
_SPREAD = """
import os, select, signal, sys
per, count = int(sys.argv[1]), int(sys.argv[2])
r, w = os.pipe()
kids = []
for _ in range(count):
    pid = os.fork()
    if pid == 0:
        try:
            held = b"x" * (per << 20)
            os.write(w, b"+")
        except MemoryError:
            os.write(w, b"-")
        signal.pause()  # holding it until killed
        os._exit(0)
    kids.append(pid)
os.close(w)
got = b""
# a killed child never writes: five quiet seconds end the wait (a loaded machine is slow to
# allocate 150 MiB four times over)
while len(got) < count and select.select([r], [], [], 5)[0]:
    got += os.read(r, 10)
# Children still alive now, each holding what it allocated (one the OOM killer took after it
# wrote "+" is gone): the bound is on memory held at once, not on allocations over time.
alive = sum(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in kids)
print(min(got.count(b"+"), alive), flush=True)
for pid in kids:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:  # reaped above
        pass
"""


@needs_cgroups
def test_memory_total_is_bounded_by_the_cgroup(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SandboxSpec(resources=Resources(memory_mb=256, processes=16))
    argv = [PY, "-c", _SPREAD, "150", "4"]
    res = DRIVER.exec(spec, ws, argv, timeout_seconds=30)
    assert (res.outcome.kind, res.outcome.detail) == ("resource_exceeded", "memory"), res
    assert int(res.stdout) <= 1, res  # never two 150 MiB children at once under 256 MiB
    assert "cgroup" not in res.isolation.missing
    assert "cgroup-cpu" in res.isolation.missing

    @contextlib.contextmanager
    def no_cgroup(uid: int, res: Resources) -> Iterator[None]:
        yield None

    # The control: rlimits alone (RLIMIT_AS per process) let all four hold 150 MiB, and the
    # report then says so.
    monkeypatch.setattr(_cgroup, "limits", no_cgroup)
    res = DRIVER.exec(spec, ws, argv, timeout_seconds=30)
    assert (res.outcome.kind, res.stdout) == ("exit", b"4\n"), res
    assert "cgroup" in res.isolation.missing


@needs_cgroups
def test_launcher_and_program_are_in_fresh_groups(ws: Path) -> None:
    seen: list[str] = []

    def look(name: str, chunk: bytes) -> None:  # on the host, while the program runs
        if name == "stdout" and not seen:
            seen.append(Path(f"/proc/{int(chunk)}/cgroup").read_text())

    code = "import os, time; print(os.getpid(), flush=True); time.sleep(1)"
    res = run(ws, code, on_output=look)
    assert res.outcome.kind == "exit", res
    lines = dict(line.split(":", 2)[1:] for line in seen[0].splitlines())
    assert lines["memory"].startswith("/evalsi/uid-"), lines
    # Removed after the execution (fresh per execution: nothing charged carries over).
    assert not Path(f"/sys/fs/cgroup/memory{lines['memory']}").exists()
    # Processes are bounded by RLIMIT_NPROC under the pool uid: the fork is refused, and the
    # program's own failing exit is its behaviour.
    code = (
        "import os, sys, time\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0: time.sleep(5); os._exit(0)\n"
        "except OSError: sys.exit(3)\n"
    )
    res = run(ws, code, SandboxSpec(resources=Resources(processes=8)), timeout_seconds=20)
    assert (res.outcome.kind, res.outcome.code) == ("exit", 3), res


@pytest.mark.skipif(not ROOT, reason="cgroups are only used under a pool uid (root)")
def test_failing_to_join_the_cgroup_is_a_runner_failure(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextlib.contextmanager
    def broken(uid: int, res: Resources) -> Iterator[_cgroup.Group]:
        nowhere = Path("/nonexistent/evalsi-cgroup")
        yield _cgroup.Group((str(nowhere / "cgroup.procs"),), nowhere, False)

    monkeypatch.setattr(_cgroup, "limits", broken)
    marker = ws / "marker"
    res = DRIVER.exec(SandboxSpec(), ws, _marker_argv(marker))
    assert res.outcome.kind == "runner_failure", res
    assert res.outcome.detail.startswith("landlock: cgroup: cannot join '/nonexistent/"), res
    assert not marker.exists()

    @contextlib.contextmanager
    def refused(uid: int, res: Resources) -> Iterator[None]:
        raise PermissionError(13, "Permission denied")
        yield None

    monkeypatch.setattr(_cgroup, "limits", refused)
    res = DRIVER.exec(SandboxSpec(), ws, _marker_argv(marker))
    assert (res.outcome.kind, res.outcome.detail) == (
        "runner_failure",
        "cgroup: [Errno 13] Permission denied",
    )
    assert not marker.exists()


class _FakeGroup:
    def __init__(self, oom: bool) -> None:
        self.oom = oom

    def oom_killed(self) -> bool:
        return self.oom


def _collected(cpu: float, returncode: int = 0) -> _capture.Collected:
    return _capture.Collected({}, False, False, returncode, cpu)


@pytest.mark.parametrize(
    ("report", "cpu", "group", "expected"),
    [
        # RLIMIT_CPU's SIGKILL with rusage a little under the 2 s limit: still the CPU limit.
        (b"status signal 9\n", 1.85, None, ("resource_exceeded", "cpu", -9)),
        (b"status signal 9\n", 1.0, None, ("exit", "", -9)),  # killed well before it
        (b"status signal 9\n", 1.95, _FakeGroup(True), ("resource_exceeded", "memory", -9)),
        (b"status exit 0\n", 0.1, _FakeGroup(True), ("resource_exceeded", "memory", 0)),
        (b"status exit 0\n", 0.1, _FakeGroup(False), ("exit", "", 0)),
        (b"status exit 1\n", 0.1, _FakeGroup(False), ("exit", "", 1)),
        (b"", 0.1, _FakeGroup(True), ("resource_exceeded", "memory", None)),  # launcher OOM
        (b"", 0.1, _FakeGroup(False), ("runner_failure", None, None)),
        (
            b"error cgroup: x\n",
            0.1,
            _FakeGroup(True),
            ("runner_failure", "landlock: cgroup: x", None),
        ),
    ],
)
def test_classify(report: bytes, cpu: float, group: _FakeGroup | None, expected: tuple) -> None:  # type: ignore[type-arg]
    out = classify(_collected(cpu, -9), b"", report, 2.0, group=group)  # type: ignore[arg-type]
    kind, detail, code = expected
    assert (out.kind, out.code) == (kind, code), out
    if detail is not None:
        assert out.detail == detail, out
