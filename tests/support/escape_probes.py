"""Escape and abuse probes for the sandbox (driven by ``tests/e2e/test_e2e_escape.py``).

A probe is a small Python program run with ``/usr/bin/python3`` (inside a sandbox, or
unsandboxed as a control). It tries one attack and prints one final JSON line:
``{"probe": name, "hole": bool, "detail": "..."}``. Its context (host canary paths, ports,
pids, a per-run token) arrives as JSON in ``argv[1]``; secrets are passed only as hashes, so a
probe can recognise the host's secret without being told it.

Host-side hooks complete the picture where the probe cannot judge itself: ``prepare`` plants
files in the workspace before the run and adds context; ``evidence`` looks at the host after
the run (a file that appeared, a canary that got a token, a victim that died, a process that
survived) and returns a description of the hole, or None; ``inspect`` checks the sandbox
object itself before it is destroyed (``copy_out`` must refuse planted links).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.escape_canaries import HostCanaries, kill_all, processes_with

# Limits every sandboxed probe runs under (the figures the verdicts compare against).
MEMORY_MB = 256
PROCESSES = 64
DISK_MB = 64
OPEN_FILES = 256
OUTPUT_BYTES = 64 << 10
CPU_SECONDS = 4.0
FILES = 10_000  # Resources.files: files and directories in the writable space

PRELUDE = r'''
import ctypes, errno, hashlib, json, os, signal, socket, stat, struct, subprocess, sys, time
CTX = json.loads(sys.argv[1])
TOKEN = CTX["token"]
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_keep = []


def cstr(value):
    """A NUL-terminated C string kept alive for the whole run; returns its address."""
    buf = ctypes.create_string_buffer(value.encode() if isinstance(value, str) else value)
    _keep.append(buf)
    return ctypes.addressof(buf)


def syscall(nr, *args):
    """A raw system call with integer arguments: (result, errno)."""
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return r, ctypes.get_errno()


def en(code):
    return errno.errorcode.get(code, str(code))


def sha(data):
    return hashlib.sha256(data).hexdigest()


def has_env_secret(blob):
    prefix = (CTX["secret_env"] + "=").encode()
    for entry in blob.split(b"\0"):
        if entry.startswith(prefix) and sha(entry[len(prefix):]) == CTX["secret_env_sha"]:
            return True
    return False


def report(hole, detail):
    line = {"probe": CTX["probe"], "hole": bool(hole), "detail": str(detail)[:1500]}
    print(json.dumps(line), flush=True)


def read_secret(path):
    """(hole, detail) for reading the host's secret file through ``path``."""
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
    except OSError as e:
        return False, "%s: %s" % (path, e.strerror)
    if sha(data) == CTX["secret_sha"]:
        return True, "read the host secret through %s" % path
    return False, "%s: read %d bytes, not the host secret" % (path, len(data))


def status_field(name, pid="self"):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].split()
    return []
'''

EPILOGUE = r"""
try:
    main()
except Exception as exc:
    report(False, "probe error: %s: %s" % (type(exc).__name__, exc))
"""


@dataclass
class RunEnv:
    """One run of one probe: where, with what context, and what to undo afterwards."""

    mode: str  # "control" or the rung's name
    workspace: Path
    host: HostCanaries
    token: str
    ctx: dict[str, Any]
    scratch: Path  # a host temp dir of this run (removed afterwards)
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    pass_fds: tuple[int, ...] = ()
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def control(self) -> bool:
        return self.mode == "control"


Hook = Callable[[RunEnv], None]
Evidence = Callable[[RunEnv], "str | None"]


@dataclass(frozen=True)
class Probe:
    """One attack. ``held`` says what a held sandbox looks like for it."""

    name: str
    theme: str
    held: str
    body: str
    # Outcomes that mean "held" even without a JSON line (a seccomp kill, a limit, the clock).
    held_outcomes: frozenset[str] = frozenset({"denied"})
    # An exit by SIGKILL counts as held (RLIMIT_CPU's hard limit ends a namespace's pid 1
    # with SIGKILL, since it ignores SIGXCPU).
    held_by_sigkill: bool = False
    trust_claim: bool = True  # False: only host evidence can show a hole (the probe cannot know)
    judge: str = "json"  # "json" | "flood" (judged from the captured output sizes)
    prepare: Hook | None = None
    evidence: Evidence | None = None
    control_needs_evidence: bool = True  # the control must also produce host evidence
    evidence_after_destroy: bool = False  # look for evidence only once the sandbox is gone
    inspect: Callable[[RunEnv, Any], str | None] | None = None
    heavy: bool = False  # memory, disk, process counts: run alone, not beside other probes
    spec: Mapping[str, Any] = field(default_factory=dict)  # SandboxSpec overrides
    timeout: float = 20.0  # exec timeout in the sandbox
    control_timeout: float = 30.0
    control_alive_is_hole: bool = False  # control still running at its timeout = the hole
    # A rung that refuses the spec (SandboxUnavailable: nothing ran) holds, e.g. a network
    # mode it cannot confine; host evidence is still checked.
    refusal_holds: bool = False
    extra_ctx: Mapping[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return PRELUDE + self.body + EPILOGUE


PROBES: list[Probe] = []


def _add(probe: Probe) -> Probe:
    assert probe.name not in {p.name for p in PROBES}, probe.name
    PROBES.append(probe)
    return probe


# ============================================================================ host files, secrets

_add(
    Probe(
        "read-host-secret",
        "host files",
        "the host's 0600 secret file cannot be read (absent or EACCES)",
        r"""
def main():
    report(*read_secret(CTX["secret_file"]))
""",
    )
)

_add(
    Probe(
        "read-etc-shadow",
        "host files",
        "/etc/shadow and /etc/gshadow are absent or unreadable",
        r"""
def main():
    notes = []
    for path in ("/etc/shadow", "/etc/gshadow"):
        try:
            with open(path, "rb") as f:
                data = f.read(4096)
        except OSError as e:
            notes.append("%s: %s" % (path, e.strerror))
            continue
        if b"root:" in data:
            return report(True, "%s readable (%d bytes)" % (path, len(data)))
        notes.append("%s: no root entry" % path)
    report(False, "; ".join(notes))
""",
    )
)

_LIST_DIR = r"""
def main():
    path = CTX["dir"]
    try:
        names = os.listdir(path)
    except OSError as e:
        return report(False, "%s: %s" % (path, e.strerror))
    report(len(names) > 0, "%s lists %d entries: %s" % (path, len(names), sorted(names)[:5]))
"""

_add(
    Probe(
        "list-root-home",
        "host files",
        "/root is absent, empty or unlistable",
        _LIST_DIR,
        extra_ctx={"dir": "/root"},
    )
)
_add(
    Probe(
        "list-home",
        "host files",
        "/home is absent, empty or unlistable",
        _LIST_DIR,
        extra_ctx={"dir": "/home"},
    )
)

_add(
    Probe(
        "env-secret",
        "secrets",
        "the harness's environment secret is not in os.environ (the environment is cleared)",
        r"""
def main():
    value = os.environ.get(CTX["secret_env"])
    hole = value is not None and sha(value.encode()) == CTX["secret_env_sha"]
    report(hole, "%s is %s in os.environ" % (CTX["secret_env"], "set" if value else "absent"))
""",
    )
)

_add(
    Probe(
        "proc-self-environ",
        "secrets",
        "/proc/self/environ holds no host secret",
        r"""
def main():
    with open("/proc/self/environ", "rb") as f:
        blob = f.read()
    report(has_env_secret(blob), "/proc/self/environ: %d variables" % blob.count(b"\0"))
""",
    )
)

_add(
    Probe(
        "proc-environ-scan",
        "secrets",
        "no visible process (pid 1, the parent, the host victim) has the host secret in its "
        "environ",
        r"""
def main():
    # Only processes that may carry the harness's secret: never other processes' environments.
    marker = CTX["victim_marker"].encode()
    pids = {"1", str(os.getppid()), str(CTX["victim_pid"])}
    try:
        listed = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        listed = []  # /proc not listable: the known pids are still tried
    for pid in listed:
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if marker in f.read():
                    pids.add(pid)
        except OSError:
            continue
    checked = []
    for pid in sorted(pids, key=int):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                blob = f.read()
        except OSError:
            continue
        checked.append(pid)
        if has_env_secret(blob):
            return report(True, "host secret in /proc/%s/environ" % pid)
    report(False, "checked the environ of pids %s" % checked[:20])
""",
    )
)

_add(
    Probe(
        "proc-pid-root",
        "host files",
        "/proc/1/root and /proc/<host victim>/root lead to the sandbox's own root (or "
        "nowhere), where the host secret is absent",
        r"""
def main():
    notes = []
    for pid in (1, CTX["victim_pid"]):
        hole, detail = read_secret("/proc/%d/root%s" % (pid, CTX["secret_file"]))
        if hole:
            return report(True, detail)
        notes.append(detail)
    report(False, "; ".join(notes))
""",
    )
)


# ============================================================================ writes outside


def _host_file_appeared(env: RunEnv) -> str | None:
    path = env.host.writable / f"written-{env.token}"
    if path.exists():
        return f"{path} appeared on the host"
    return None


_add(
    Probe(
        "write-host-tmp",
        "writes outside the workspace",
        "no file appears in the host's world-writable canary directory",
        r"""
def main():
    path = os.path.join(CTX["writable_dir"], "written-" + TOKEN)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as e:
        return report(False, "%s: %s" % (path, e.strerror))
    os.write(fd, TOKEN.encode())
    os.close(fd)
    report(True, "created " + path)
""",
        evidence=_host_file_appeared,
    )
)

# Opening an existing file for writing is the whole permission check (EROFS, EACCES, Landlock);
# nothing is ever written, so the root control changes nothing on the host.
_OPEN_FOR_WRITE = r"""
def main():
    notes = []
    for path in CTX["paths"]:
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError as e:
            notes.append("%s: %s" % (path, e.strerror))
            continue
        os.close(fd)
        return report(True, "opened %s for writing" % path)
    report(False, "; ".join(notes))
"""

_add(
    Probe(
        "write-usr",
        "writes outside the workspace",
        "files under /usr cannot be opened for writing (EROFS/EACCES)",
        _OPEN_FOR_WRITE,
        extra_ctx={"paths": ["/usr/share/common-licenses/GPL-3", "/usr/bin/python3"]},
    )
)
_add(
    Probe(
        "write-etc",
        "writes outside the workspace",
        "files under /etc cannot be opened for writing",
        _OPEN_FOR_WRITE,
        extra_ctx={"paths": ["/etc/ld.so.cache", "/etc/passwd", "/etc/hostname"]},
    )
)
_add(
    Probe(
        "proc-sys-write",
        "/proc leaks",
        "no /proc/sys file (nor /proc/sysrq-trigger) opens for writing",
        _OPEN_FOR_WRITE,
        extra_ctx={
            "paths": [
                "/proc/sys/vm/drop_caches",
                "/proc/sys/kernel/core_pattern",
                "/proc/sys/vm/swappiness",
                "/proc/sysrq-trigger",
            ]
        },
    )
)
# ============================================================================ links


def _plant_symlink(env: RunEnv) -> None:
    (env.workspace / "leak").symlink_to(env.host.secret_file)


def _copy_out_refuses(names: tuple[str, ...]) -> Callable[[RunEnv, Any], str | None]:
    def check(env: RunEnv, sandbox: Any) -> str | None:
        from evalsi.sandbox import SandboxFileError

        for name in names:
            try:
                data = sandbox.copy_out(name)
            except SandboxFileError:
                continue
            return f"copy_out({name!r}) returned {len(data)} bytes instead of refusing"
        return None

    return check


def _copies_refuse_links(env: RunEnv, sandbox: Any) -> str | None:
    """copy_out refuses what the program planted; copy_in replaces a planted symlink instead
    of writing through it, and refuses a path through a planted directory symlink."""
    from evalsi.sandbox import SandboxFileError

    found = _copy_out_refuses(("planted", "planted-shadow", "planted-dir", "fifo"))(env, sandbox)
    if found:
        return found
    before = env.host.secret_file.read_bytes()
    sandbox.copy_in(b"replaced", "planted")
    if env.host.secret_file.read_bytes() != before:
        return "copy_in wrote through a planted symlink into the host secret"
    try:
        sandbox.copy_in(b"x", f"planted-dir/through-{env.token}")
    except SandboxFileError:
        pass
    else:
        return "copy_in accepted a path through a planted directory symlink"
    if (env.host.writable / f"through-{env.token}").exists():
        return "copy_in wrote into the host through a planted directory symlink"
    return None


_add(
    Probe(
        "symlink-planted",
        "symlinks",
        "a workspace symlink to the host secret does not reach it inside, and copy_out "
        "refuses the symlink",
        r"""
def main():
    report(*read_secret("leak"))
""",
        prepare=_plant_symlink,
        inspect=_copy_out_refuses(("leak",)),
    )
)

_add(
    Probe(
        "symlink-made-inside",
        "symlinks",
        "symlinks the program makes to host files do not reach them; copy_out refuses them "
        "and a FIFO; copy_in replaces a planted symlink and refuses a path through one",
        r"""
def main():
    os.symlink(CTX["secret_file"], "planted")
    os.symlink("/etc/shadow", "planted-shadow")
    os.symlink(CTX["writable_dir"], "planted-dir")
    try:
        os.mkfifo("fifo")
    except OSError:
        pass  # mknod may be refused; copy_out must still refuse the (missing) name
    report(*read_secret("planted"))
""",
        inspect=_copies_refuse_links,
    )
)

_add(
    Probe(
        "hardlink-host-secret",
        "symlinks",
        "the host secret cannot be hard-linked into the workspace",
        r"""
def main():
    try:
        os.link(CTX["secret_file"], "hardlink")
    except OSError as e:
        return report(False, "link: %s" % e.strerror)
    report(*read_secret("hardlink"))
""",
    )
)


# ============================================================================ network


def _received(env: RunEnv) -> str | None:
    if env.host.received(env.token):
        return "a host loopback canary received this run's token"
    return None


_CONNECT = r"""
def main():
    family, address = CTX["family"], CTX["address"]
    if family == "inet":
        sock_family, target = socket.AF_INET, ("127.0.0.1", CTX["tcp_port"])
    elif family == "unix":
        sock_family, target = socket.AF_UNIX, CTX["unix_path"]
    else:
        sock_family, target = socket.AF_UNIX, "\0" + CTX["abstract_name"]
    try:
        sock = socket.socket(sock_family, socket.SOCK_STREAM)
        sock.settimeout(3)
        sock.connect(target)
        sock.sendall(TOKEN.encode() + b"\n")
        sock.close()
    except OSError as e:
        return report(False, "%s %r: %s" % (family, target, e))
    report(True, "connected to the host canary at %r and sent the token" % (target,))
"""

for _name, _family, _spec in (
    ("tcp-loopback", "inet", {}),
    ("tcp-loopback-netmode", "inet", {"network": "loopback"}),
    ("unix-path-socket", "unix", {}),
    ("abstract-unix-socket", "abstract", {}),
):
    _add(
        Probe(
            _name,
            "network",
            "no connection reaches the host's loopback canary (EPERM, ECONNREFUSED, ENOENT) "
            "and the canary never sees the token; a rung without a network namespace refuses "
            "network='loopback' outright (SandboxUnavailable: nothing runs)",
            _CONNECT,
            evidence=_received,
            spec=_spec,
            extra_ctx={"family": _family, "address": _family},
            refusal_holds=bool(_spec),
        )
    )

_add(
    Probe(
        "udp-loopback",
        "network",
        "no datagram reaches the host's UDP canary (no echo back, no token recorded)",
        r"""
def main():
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(2)
        sock.sendto(TOKEN.encode(), ("127.0.0.1", CTX["udp_port"]))
        data = sock.recv(4096)
    except OSError as e:
        return report(False, "udp: %s" % e)
    report(TOKEN.encode() in data, "the host canary echoed %r" % data[:80])
""",
        evidence=_received,
    )
)

_add(
    Probe(
        "netns-interfaces",
        "network",
        "/proc/net/dev shows only loopback (a private network namespace) or is unreadable",
        r"""
def main():
    try:
        with open("/proc/net/dev") as f:
            names = [line.split(":")[0].strip() for line in f.readlines()[2:]]
    except OSError as e:
        return report(False, "/proc/net/dev: %s" % e.strerror)
    others = [n for n in names if n != "lo"]
    report(bool(others), "interfaces: %s" % names)
""",
    )
)


# ============================================================================ ptrace, tty, syscalls

_add(
    Probe(
        "ptrace-traceme",
        "ptrace",
        "PTRACE_TRACEME is killed by seccomp (denied) or fails",
        r"""
def main():
    r, e = syscall(101, 0, 0, 0, 0)  # ptrace(PTRACE_TRACEME)
    report(r == 0, "PTRACE_TRACEME -> %d %s" % (r, en(e)))
""",
    )
)

_add(
    Probe(
        "ptrace-sibling",
        "ptrace",
        "attaching to a sibling process is killed by seccomp or fails",
        r"""
def main():
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    try:
        r, e = syscall(101, 0x4206, pid, 0, 0)  # PTRACE_SEIZE: attaches without stopping it
        report(r == 0, "PTRACE_SEIZE of sibling %d -> %d %s" % (pid, r, en(e)))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
""",
    )
)

_add(
    Probe(
        "process-vm-readv",
        "ptrace",
        "process_vm_readv of a sibling's memory is killed by seccomp or fails",
        r"""
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
def main():
    remote = ctypes.create_string_buffer(b"evalsi-escape-mem" * 2)  # same address in the fork
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    try:
        local = ctypes.create_string_buffer(len(remote))
        liov = IoVec(ctypes.addressof(local), len(remote))
        riov = IoVec(ctypes.addressof(remote), len(remote))
        r, e = syscall(310, pid, ctypes.addressof(liov), 1, ctypes.addressof(riov), 1, 0)
        report(r > 0 and local.raw == remote.raw, "process_vm_readv -> %d %s" % (r, en(e)))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
""",
    )
)

_add(
    Probe(
        "pidfd-getfd",
        "ptrace",
        "pidfd_getfd (stealing another process's descriptor) fails, for the host victim and for "
        "a sibling",
        r"""
def main():
    targets = [CTX["victim_pid"]]
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    targets.append(pid)
    notes = []
    try:
        for target in targets:
            r, e = syscall(434, target, 0)  # pidfd_open
            if r < 0:
                notes.append("pidfd_open(%d): %s" % (target, en(e)))
                continue
            got, e = syscall(438, r, 0, 0)  # pidfd_getfd(pidfd, fd 0)
            notes.append("pidfd_getfd(%d) -> %d %s" % (target, got, en(e)))
            if got >= 0:
                return report(True, "stole fd 0 of pid %d" % target)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    report(False, "; ".join(notes))
""",
    )
)

_add(
    Probe(
        "ptrace-host-process",
        "ptrace",
        "the host victim process cannot be traced (not visible, or denied)",
        r"""
def main():
    pid = CTX["victim_pid"]
    r, e = syscall(101, 0x4206, pid, 0, 0)  # PTRACE_SEIZE; detached again when we exit
    report(r == 0, "PTRACE_SEIZE of host pid %d -> %d %s" % (pid, r, en(e)))
""",
    )
)

_add(
    Probe(
        "proc-victim-maps",
        "/proc leaks",
        "the host victim's /proc/<pid>/maps and mem are not readable",
        r"""
def main():
    pid = CTX["victim_pid"]
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read()
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read()
    except OSError as e:
        return report(False, "/proc/%d: %s" % (pid, e.strerror))
    hole = CTX["victim_marker"].encode() in cmdline and len(maps) > 0
    report(hole, "/proc/%d/maps: %d bytes; cmdline %r" % (pid, len(maps), cmdline[:80]))
""",
    )
)

_add(
    Probe(
        "tiocsti",
        "tty ioctls",
        "TIOCSTI is killed by seccomp (denied) on any descriptor, or fails",
        r"""
import fcntl, termios
def main():
    fds = [0, 1, 2]
    try:
        master, slave = os.openpty()
        fds.append(slave)
    except OSError:
        pass
    notes = []
    for fd in fds:
        try:
            fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        except OSError as e:
            notes.append("fd %d: %s" % (fd, e.strerror))
            continue
        return report(True, "TIOCSTI injected into fd %d" % fd)
    report(False, "; ".join(notes))
""",
    )
)

_add(
    Probe(
        "tioclinux",
        "tty ioctls",
        "TIOCLINUX is killed by seccomp (denied) or fails on every descriptor, /dev/tty0 included",
        r"""
import fcntl
def main():
    fds = [0, 1, 2]
    for path in ("/dev/tty0", "/dev/tty1", "/dev/console"):
        try:
            fds.append(os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK))
        except OSError:
            pass
    notes = []
    for fd in fds:
        arg = bytearray([11, 0, 0, 0])  # TIOCL_GETKMSGREDIRECT: a harmless query
        try:
            fcntl.ioctl(fd, 0x541C, arg)
        except OSError as e:
            notes.append("fd %d: %s" % (fd, e.strerror))
            continue
        target = os.readlink("/proc/self/fd/%d" % fd)
        return report(True, "TIOCLINUX answered on fd %d (%s)" % (fd, target))
    report(False, "; ".join(notes))
""",
    )
)

_add(
    Probe(
        "int80-32bit",
        "32-bit syscalls",
        "a 32-bit int 0x80 syscall kills the process (SIGSYS: denied)",
        r"""
import mmap
def main():
    code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20 (getpid); int 0x80; ret
    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    func = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
    got = func()
    report(got == os.getpid(), "int 0x80 getpid -> %d (pid %d)" % (got, os.getpid()))
""",
    )
)


# ============================================================================ namespaces

_add(
    Probe(
        "unshare-newuser",
        "nested namespaces",
        "unshare(CLONE_NEWUSER) is killed by seccomp or fails",
        r"""
def main():
    r, e = syscall(272, 0x10000000)
    report(r == 0, "unshare(CLONE_NEWUSER) -> %d %s" % (r, en(e)))
""",
    )
)

_CLONE = r"""
def main():
    flags = CTX["flags"] | signal.SIGCHLD
    r, e = syscall(56, flags, 0, 0, 0, 0)  # clone(flags, NULL stack): a fork into new namespaces
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    report(r > 0, "clone(%#x) -> %d %s" % (flags, r, en(e)))
"""

_add(
    Probe(
        "clone-newuser",
        "nested namespaces",
        "clone with CLONE_NEWUSER is killed by seccomp or fails",
        _CLONE,
        extra_ctx={"flags": 0x10000000},
    )
)
_add(
    Probe(
        "clone-newnet",
        "nested namespaces",
        "clone with CLONE_NEWNET is killed by seccomp or fails",
        _CLONE,
        extra_ctx={"flags": 0x40000000},
    )
)

_add(
    Probe(
        "unshare-binary",
        "nested namespaces",
        "util-linux `unshare --user --map-root-user` cannot create a user namespace",
        r"""
def main():
    try:
        proc = subprocess.run(["unshare", "--user", "--map-root-user", "id", "-u"],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return report(False, "unshare: %s" % e)
    hole = proc.returncode == 0 and proc.stdout.strip() == b"0"
    got = (proc.returncode, proc.stdout[:40], proc.stderr[:80])
    report(hole, "unshare -Ur id -u -> rc %d %r %r" % got)
""",
    )
)

_add(
    Probe(
        "setns-host",
        "nested namespaces",
        "setns into the host victim's (or its own) UTS namespace is killed by seccomp or fails",
        r"""
def main():
    path = "/proc/%d/ns/uts" % CTX["victim_pid"]
    if not os.path.exists(path):
        path = "/proc/self/ns/uts"  # the host victim is invisible: the syscall is the attack
    fd = os.open(path, os.O_RDONLY)
    r, e = syscall(308, fd, 0)
    report(r == 0, "setns(%s) -> %d %s" % (path, r, en(e)))
""",
    )
)


_add(
    Probe(
        "posix-shm-host",
        "shared memory",
        "the host's /dev/shm (a world-readable file holding the secret) is not reachable",
        r"""
def main():
    report(*read_secret(CTX["shm_file"]))
""",
    )
)

_add(
    Probe(
        "sysv-shm-host",
        "shared memory",
        "a host SysV shared-memory segment (mode 0666) cannot be attached by its key (a private "
        "IPC namespace)",
        r"""
def main():
    _libc.shmat.restype = ctypes.c_void_p
    shm_id = _libc.shmget(CTX["sysv_key"], 0, 0)
    if shm_id < 0:
        return report(False, "shmget(key): %s" % en(ctypes.get_errno()))
    addr = _libc.shmat(shm_id, None, 0o10000)  # SHM_RDONLY
    if addr in (None, ctypes.c_void_p(-1).value):
        return report(False, "shmat: %s" % en(ctypes.get_errno()))
    data = ctypes.string_at(addr, 4096).split(b"\0")[0]
    detail = "attached host segment %d (%d bytes)" % (shm_id, len(data))
    report(sha(data) == CTX["secret_sha"], detail)
""",
    )
)


# ============================================================================ kernel interfaces

_add(
    Probe(
        "keyctl",
        "keyrings",
        "keyctl is killed by seccomp or fails",
        r"""
def main():
    r, e = syscall(250, 0, -2, 1)  # KEYCTL_GET_KEYRING_ID(KEY_SPEC_PROCESS_KEYRING, create)
    report(r > 0, "keyctl(GET_KEYRING_ID) -> %d %s" % (r, en(e)))
""",
    )
)
_add(
    Probe(
        "add-key",
        "keyrings",
        "add_key is killed by seccomp or fails",
        r"""
def main():
    payload = cstr("x")
    r, e = syscall(248, cstr("user"), cstr("evalsi-escape-" + TOKEN), payload, 1, -2)
    report(r > 0, "add_key(user, process keyring) -> %d %s" % (r, en(e)))
""",
    )
)
_add(
    Probe(
        "io-uring",
        "io_uring",
        "io_uring_setup is killed by seccomp or fails",
        r"""
def main():
    params = ctypes.create_string_buffer(120)
    r, e = syscall(425, 1, ctypes.addressof(params))
    if r >= 0:
        os.close(r)
    report(r >= 0, "io_uring_setup -> %d %s" % (r, en(e)))
""",
    )
)
_add(
    Probe(
        "mount-tmpfs",
        "mount",
        "mount is killed by seccomp or fails",
        r"""
def main():
    target = os.path.abspath("mnt-" + TOKEN)
    os.mkdir(target)
    r, e = syscall(165, cstr("none"), cstr(target), cstr("tmpfs"), 0, cstr("size=1m"))
    if r == 0:
        syscall(166, cstr(target), 2)  # umount2(MNT_DETACH): the root control undoes it
    report(r == 0, "mount tmpfs on %s -> %d %s" % (target, r, en(e)))
""",
    )
)
_add(
    Probe(
        "bpf",
        "bpf",
        "bpf(BPF_MAP_CREATE) is killed by seccomp or fails",
        r"""
def main():
    attr = ctypes.create_string_buffer(128)
    struct.pack_into("IIII", attr, 0, 2, 4, 4, 1)  # an array map: 1 entry of 4 bytes
    r, e = syscall(321, 0, ctypes.addressof(attr), 128)
    if r >= 0:
        os.close(r)
    report(r >= 0, "bpf(BPF_MAP_CREATE) -> %d %s" % (r, en(e)))
""",
    )
)
_add(
    Probe(
        "perf-event-open",
        "perf",
        "perf_event_open is killed by seccomp or fails",
        r"""
def main():
    attr = ctypes.create_string_buffer(128)
    struct.pack_into("IIQ", attr, 0, 1, 128, 0)  # PERF_TYPE_SOFTWARE, CPU clock
    struct.pack_into("Q", attr, 40, 0x61)  # disabled, exclude_kernel, exclude_hv
    r, e = syscall(298, ctypes.addressof(attr), 0, -1, -1, 0)
    if r >= 0:
        os.close(r)
    report(r >= 0, "perf_event_open -> %d %s" % (r, en(e)))
""",
    )
)
_add(
    Probe(
        "module-load",
        "kernel modules",
        "init_module/finit_module/delete_module are killed by seccomp (never reach the "
        "kernel); a kernel without module support answers ENOSYS, which the control reports "
        "as 'reached the kernel'",
        r"""
def main():
    image = ctypes.create_string_buffer(64)
    calls = [
        ("init_module", 175, (ctypes.addressof(image), 64, cstr(""))),
        ("finit_module", 313, (os.open("/dev/null", os.O_RDONLY), cstr(""), 0)),
        ("delete_module", 176, (cstr("evalsi_escape_none"), os.O_NONBLOCK)),
    ]
    notes = []
    for label, nr, args in calls:
        r, e = syscall(nr, *args)
        notes.append("%s -> %d %s" % (label, r, en(e)))
        if r == 0 or e not in (errno.EPERM, errno.EACCES):
            return report(True, "%s reached the kernel: %s" % (label, notes[-1]))
    report(False, "; ".join(notes))
""",
    )
)
_add(
    Probe(
        "reboot",
        "reboot",
        "reboot is killed by seccomp or refused (EPERM); EINVAL for a bad magic means the "
        "caller holds CAP_SYS_BOOT",
        r"""
def main():
    r, e = syscall(169, 0, 0, 0, 0)  # bad magic: the kernel checks CAP_SYS_BOOT, then EINVAL
    report(e == errno.EINVAL or r == 0, "reboot(bad magic) -> %d %s" % (r, en(e)))
""",
    )
)
_add(
    Probe(
        "chroot",
        "chroot",
        "chroot is killed by seccomp or fails",
        r"""
def main():
    r, e = syscall(161, cstr("."))
    report(r == 0, "chroot(.) -> %d %s" % (r, en(e)))
""",
    )
)
_add(
    Probe(
        "userfaultfd",
        "kernel interfaces",
        "userfaultfd is killed by seccomp or fails",
        r"""
def main():
    r, e = syscall(323, os.O_CLOEXEC)
    if r >= 0:
        os.close(r)
    report(r >= 0, "userfaultfd -> %d %s" % (r, en(e)))
""",
    )
)
_add(
    Probe(
        "open-by-handle",
        "kernel interfaces",
        "open_by_handle_at (the 'shocker' escape: a crafted handle for inode 2 of the "
        "filesystem behind /usr) is killed by seccomp or fails",
        r"""
def main():
    mount_fd = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
    handle = ctypes.create_string_buffer(8 + 8)
    struct.pack_into("IiII", handle, 0, 8, 1, 2, 0)  # FILEID_INO32_GEN: inode 2, generation 0
    r, e = syscall(304, mount_fd, ctypes.addressof(handle), os.O_RDONLY | os.O_DIRECTORY)
    if r < 0:
        return report(False, "open_by_handle_at -> %d %s" % (r, en(e)))
    names = sorted(os.listdir(r))
    report(True, "opened the filesystem root behind /usr: %s" % names[:8])
""",
    )
)
_add(
    Probe(
        "mknod-device",
        "/dev access",
        "mknod of a character device in the workspace fails",
        r"""
def main():
    path = "nulldev-" + TOKEN
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as e:
        return report(False, "mknod: %s" % e.strerror)
    report(True, "created character device %s" % path)
""",
    )
)


# ============================================================================ setuid

_add(
    Probe(
        "setuid-binary",
        "setuid binaries",
        "no reachable setuid-root binary runs with euid 0 (no_new_privs, no root mapping)",
        r"""
def main():
    if os.geteuid() == 0:  # the root control drops to nobody first, as an attacker would be
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    names = ("su", "passwd", "mount", "umount", "chsh", "chfn", "gpasswd", "newgrp", "sudo",
             "pkexec")
    candidates = [CTX["suid_probe"]] + ["/usr/bin/" + n for n in names]
    notes = []
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not st.st_mode & stat.S_ISUID or st.st_uid != 0:
            continue
        try:
            proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
        except OSError as e:
            notes.append("%s: %s" % (path, e.strerror))
            continue
        time.sleep(0.15)  # running (or a zombie): its credentials stay readable until reaped
        try:
            uid = status_field("Uid", proc.pid)
        except OSError:
            uid = []
        proc.kill()
        out = proc.communicate()[0]
        euid = int(uid[1]) if len(uid) > 1 else None
        notes.append("%s euid=%s" % (path, euid))
        if euid == 0 or b"euid=0" in out:
            return report(True, "%s ran with euid 0 (as uid %d)" % (path, os.getuid()))
    report(False, "; ".join(notes) or "no setuid-root binary reachable")
""",
    )
)


# ============================================================================ signals


def _victim_for_run(env: RunEnv) -> None:
    victim = env.host.spawn_victim()
    env.state["victim"] = victim
    env.ctx["victim_pid"] = victim.pid


def _victim_died(env: RunEnv) -> str | None:
    victim = env.state["victim"]
    try:
        victim.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        return None
    return f"host victim {victim.pid} died ({victim.returncode})"


_add(
    Probe(
        "kill-host-process",
        "signals",
        "SIGKILL to a host victim's pid does not reach it (ESRCH: not in the pid namespace)",
        r"""
def main():
    pid = CTX["victim_pid"]
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as e:
        return report(False, "kill(%d): %s" % (pid, e.strerror))
    report(True, "SIGKILL sent to host pid %d" % pid)
""",
        prepare=_victim_for_run,
        evidence=_victim_died,
    )
)


def _kill_all_prepare(env: RunEnv) -> None:
    _victim_for_run(env)
    # The control only probes with signal 0: a real kill(-1, SIGKILL) as root would end the host.
    env.ctx["signal"] = 0 if env.control else 9


_add(
    Probe(
        "kill-all",
        "signals",
        "kill(-1, SIGKILL) inside leaves the host victim alive (the control sends signal 0)",
        r"""
def main():
    sig = CTX["signal"]
    try:
        os.kill(-1, sig)
    except OSError as e:
        return report(False, "kill(-1, %d): %s" % (sig, e.strerror))
    try:
        os.kill(CTX["victim_pid"], 0)
    except OSError as e:
        return report(False, "kill(-1, %d) ok; victim: %s" % (sig, e.strerror))
    report(True, "kill(-1, %d) succeeded and the host victim is signalable" % sig)
""",
        trust_claim=False,
        prepare=_kill_all_prepare,
        evidence=_victim_died,
        control_needs_evidence=False,
    )
)

_add(
    Probe(
        "signal-harness",
        "signals",
        "the test harness's pid cannot be signalled (signal 0: a permission check only)",
        r"""
def main():
    pid = CTX["harness_pid"]
    try:
        os.kill(pid, 0)
    except OSError as e:
        return report(False, "kill(%d, 0): %s" % (pid, e.strerror))
    report(True, "the harness pid %d is signalable" % pid)
""",
    )
)


# ============================================================================ /proc and /sys

_add(
    Probe(
        "proc-host-processes",
        "/proc leaks",
        "no host process (the victim, by its marker) is visible in /proc",
        r"""
def main():
    marker = CTX["victim_marker"].encode()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in [str(CTX["victim_pid"])] + pids:
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read()
                # This run's own processes carry the marker in their context argument.
                if marker in cmdline and TOKEN.encode() not in cmdline:
                    detail = "host victim visible as /proc/%s (%d pids)" % (pid, len(pids))
                    return report(True, detail)
        except OSError:
            continue
    report(False, "%d pids visible, no host victim" % len(pids))
""",
    )
)

_add(
    Probe(
        "proc-host-mounts",
        "/proc leaks",
        "/proc/self/mountinfo lists none of the host's own mount points or is unreadable",
        r"""
def main():
    try:
        with open("/proc/self/mountinfo") as f:
            points = {line.split()[4].replace("\\040", " ") for line in f}
    except OSError as e:
        return report(False, "/proc/self/mountinfo: %s" % e.strerror)
    leaked = sorted(points & set(CTX["host_mounts"]))
    report(bool(leaked), "host mounts visible: %s (of %d mounts)" % (leaked[:8], len(points)))
""",
    )
)

_add(
    Probe(
        "proc-kernel-memory",
        "/proc leaks",
        "/proc/kcore is absent or unreadable and /proc/kallsyms shows no real kernel address",
        r"""
def main():
    notes = []
    try:
        with open("/proc/kcore", "rb") as f:
            data = f.read(64)
        if data:
            return report(True, "/proc/kcore read %d bytes" % len(data))
    except OSError as e:
        notes.append("/proc/kcore: %s" % e.strerror)
    try:
        with open("/proc/kallsyms") as f:
            lines = [f.readline() for _ in range(50)]
    except OSError as e:
        return report(False, "; ".join(notes + ["/proc/kallsyms: %s" % e.strerror]))
    real = [l.split()[0] for l in lines if l and int(l.split()[0], 16) != 0]
    report(bool(real), "; ".join(notes + ["kallsyms addresses: %s" % (real[:2] or "all zero")]))
""",
    )
)

_add(
    Probe(
        "sysfs-visible",
        "/proc leaks",
        "/sys is absent (no host devices or cgroups to read)",
        r"""
def main():
    try:
        names = os.listdir("/sys/class/net")
    except OSError as e:
        return report(False, "/sys/class/net: %s" % e.strerror)
    report(len(names) > 0, "/sys/class/net lists %s" % names[:8])
""",
    )
)


# ============================================================================ /dev

_add(
    Probe(
        "dev-raw-disk",
        "/dev access",
        "no block device opens (raw disks, loop, zram)",
        r"""
def main():
    notes = []
    try:
        names = sorted(os.listdir("/dev"))
    except OSError as e:
        notes.append("/dev: %s" % e.strerror)
        names = []
    known = ["vda", "vdb", "sda", "sdb", "xvda", "nvme0n1", "hda", "mmcblk0", "loop0", "zram0"]
    for name in known + names:
        path = "/dev/" + name
        try:
            if not stat.S_ISBLK(os.stat(path).st_mode):
                continue
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            notes.append("%s: %s" % (path, e.strerror))
            continue
        try:
            data = os.read(fd, 512)
        except OSError as e:
            data = ("read: %s" % e.strerror).encode()
        finally:
            os.close(fd)
        return report(True, "opened block device %s (first read: %d bytes)" % (path, len(data)))
    report(False, "; ".join(notes) or "no block devices in /dev")
""",
    )
)

_add(
    Probe(
        "dev-kvm",
        "/dev access",
        "/dev/kvm is absent or unusable",
        r"""
import fcntl
def main():
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError as e:
        return report(False, "/dev/kvm: %s" % e.strerror)
    try:
        version = fcntl.ioctl(fd, 0xAE00)  # KVM_GET_API_VERSION
    except OSError as e:
        return report(False, "KVM_GET_API_VERSION: %s" % e.strerror)
    report(True, "/dev/kvm answered API version %d" % version)
""",
    )
)

_add(
    Probe(
        "dev-nodes",
        "/dev access",
        "/dev holds only the harmless nodes (null, zero, full, random, urandom, tty, ptmx)",
        r"""
SAFE = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "console"}
KNOWN = ["kmsg", "mem", "kmem", "port", "vsock", "fuse", "userfaultfd", "loop-control",
         "tty0", "tty1", "vcs", "vcsa", "hwrng", "cpu_dma_latency", "autofs", "vga_arbiter"]
def main():
    notes = []
    try:
        names = sorted(os.listdir("/dev"))
    except OSError as e:
        notes.append("/dev: %s" % e.strerror)
        names = []
    for name in names + KNOWN:
        path = "/dev/" + name
        if name in SAFE or "watchdog" in name:  # opening a watchdog would arm it: never
            continue
        try:
            if not stat.S_ISCHR(os.lstat(path).st_mode):  # /dev/stdin & co. are symlinks
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as e:
            notes.append("%s: %s" % (path, e.strerror))
            continue
        os.close(fd)
        return report(True, "opened device %s" % path)
    report(False, "; ".join(notes[:10]) or "no other character devices")
""",
    )
)


# ============================================================================ hostname


def _hostname_prepare(env: RunEnv) -> None:
    # The control sets the host's own name again (no change); the sandbox tries a new one.
    env.ctx["hostname"] = env.host.hostname if env.control else f"evalsi-pwned-{env.token[:8]}"


def _hostname_changed(env: RunEnv) -> str | None:
    now = socket.gethostname()
    if now != env.host.hostname:
        with contextlib.suppress(OSError):
            socket.sethostname(env.host.hostname)
        return f"the host's hostname changed to {now!r} (restored)"
    return None


_add(
    Probe(
        "sethostname",
        "hostname",
        "sethostname fails (seccomp EPERM), and the host's hostname is unchanged",
        r"""
def main():
    name = CTX["hostname"].encode()
    r, e = syscall(170, cstr(name), len(name))
    report(r == 0, "sethostname(%r) -> %d %s" % (name, r, en(e)))
""",
        prepare=_hostname_prepare,
        evidence=_hostname_changed,
        control_needs_evidence=False,
    )
)


# ============================================================================ workspaces


def _plant_existing(env: RunEnv) -> None:
    existing = env.workspace / "existing.txt"
    existing.write_text("original\n")
    existing.chmod(0o644)


def _readonly_touched(env: RunEnv) -> str | None:
    existing = env.workspace / "existing.txt"
    if not existing.exists() or existing.read_text() != "original\n":
        return "existing.txt was changed or removed"
    if existing.stat().st_mode & 0o7777 != 0o644:
        return f"existing.txt mode changed to {existing.stat().st_mode & 0o7777:o}"
    extra = sorted(
        p.name for p in env.workspace.iterdir() if p.name not in {"existing.txt", "probe.py"}
    )
    if extra:
        return f"new entries in the read-only workspace: {extra}"
    return None


_add(
    Probe(
        "readonly-workspace",
        "read-only workspace",
        "with file_access=read-only nothing in the workspace can be created, changed or removed",
        r"""
def main():
    done = []
    attempts = [
        ("append", lambda: open("existing.txt", "a").write("tampered\n")),
        ("create", lambda: open("new-" + TOKEN, "x").write("x")),
        ("mkdir", lambda: os.mkdir("dir-" + TOKEN)),
        ("chmod", lambda: os.chmod("existing.txt", 0o777)),
        ("unlink", lambda: os.unlink("existing.txt")),
    ]
    notes = []
    for label, attempt in attempts:
        try:
            attempt()
        except OSError as e:
            notes.append("%s: %s" % (label, e.strerror))
            continue
        done.append(label)
    report(bool(done), "succeeded: %s; refused: %s" % (done, notes))
""",
        prepare=_plant_existing,
        evidence=_readonly_touched,
        spec={"file_access": "read-only"},
    )
)


def _other_workspace(env: RunEnv) -> None:
    """A second workspace holding a secret: a live sandbox on the same rung (its workspace
    handed to its own pool uid by a concurrent exec), or for the control a plain 0700 dir."""
    secret = f"OTHER-{env.token}"
    env.ctx["other_sha"] = _sha(secret)
    if env.control:
        other = Path(tempfile.mkdtemp(prefix="evalsi-sandbox-"))
        (other / "secret.txt").write_text(secret)
        env.cleanups.append(lambda: shutil.rmtree(other, ignore_errors=True))
        env.ctx["other_ws"] = str(other)
        return
    opener = env.state["open_sandbox"]
    sandbox = opener()
    env.cleanups.append(sandbox.destroy)
    sandbox.copy_in(secret.encode(), "secret.txt")
    env.ctx["other_ws"] = str(sandbox.workspace)
    # Keep it running while the probe looks (distinct pool uids for concurrent sandboxes).
    import threading

    thread = threading.Thread(target=sandbox.exec, args=(["sleep", "4"],), daemon=True)
    thread.start()
    env.cleanups.append(lambda: thread.join(timeout=15))


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


_add(
    Probe(
        "other-sandbox-workspace",
        "cross-sandbox",
        "another live sandbox's workspace (its host path, or any /tmp/evalsi-sandbox-*) is "
        "not readable",
        r"""
import glob
def main():
    paths = [os.path.join(CTX["other_ws"], "secret.txt")]
    paths += glob.glob("/tmp/evalsi-sandbox-*/secret.txt")
    paths += glob.glob("/tmp/evalsi-sandbox-*/*/secret.txt")
    notes = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read(4096)
        except OSError as e:
            notes.append("%s: %s" % (path, e.strerror))
            continue
        if sha(data) == CTX["other_sha"]:
            return report(True, "read the other sandbox's secret at %s" % path)
    report(False, "; ".join(notes))
""",
        prepare=_other_workspace,
    )
)


# ============================================================================ leftovers


def _daemon_survived(env: RunEnv) -> str | None:
    # The token: the daemon after its exec, or still the probe's copy before it.
    pids = processes_with(env.token)
    if not pids:
        return None
    kill_all(pids)
    return f"daemonised child survived the run: host pids {pids} (killed now)"


_add(
    Probe(
        "leftover-daemon",
        "leftovers",
        "a double-forked, setsid daemon does not outlive the execution (no host process "
        "carries its marker afterwards)",
        r"""
def main():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            argv = ["/usr/bin/python3", "-c", "import time; time.sleep(20)",
                    "evalsi-escape-daemon-" + TOKEN]
            os.execv(argv[0], argv)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.3)  # let the daemon exec
    report(True, "daemon started (whether it survives is judged on the host)")
""",
        trust_claim=False,
        evidence=_daemon_survived,
        evidence_after_destroy=True,
    )
)


def _leftover_prepare(env: RunEnv) -> None:
    # Inside a sandbox /tmp is private; the control writes into a directory the test owns.
    env.ctx["tmp_root"] = str(env.scratch) if env.control else None


def _tmp_entries_with(token: str) -> list[str]:
    """Entries of the host's /tmp, and of its subdirectories (a rung's private temp dir
    lives there), whose name contains ``token``."""
    found = []
    with contextlib.suppress(OSError), os.scandir("/tmp") as top:
        for entry in top:
            if token in entry.name:
                found.append(entry.path)
            elif entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError), os.scandir(entry.path) as inner:
                    found += [e.path for e in inner if token in e.name]
    return found


def _leftover_files(env: RunEnv) -> str | None:
    found = []
    if env.control:
        found += [str(p) for p in env.scratch.iterdir() if env.token in p.name]
    else:
        # The workspace, and the per-sandbox directory holding it (and its mount) if any.
        places = [env.workspace]
        if env.workspace.parent.name.startswith("evalsi-sandbox-"):
            places.append(env.workspace.parent)
        found += [f"{p} still exists after destroy" for p in places if p.exists()]
        found += _tmp_entries_with(env.token)
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            mounts = f.read().splitlines()
        found += [f"mount: {m}" for m in mounts for p in places if f" {p} " in f"{m} "]
    return "; ".join(found) or None


_add(
    Probe(
        "leftover-files",
        "leftovers",
        "after destroy the workspace is gone (even read-only dirs and FIFOs in it), nothing "
        "written to /tmp inside shows up on the host, no mount refers to the workspace",
        r"""
def main():
    root = CTX["tmp_root"] or os.environ.get("TMPDIR") or "/tmp"
    left = os.path.join(root, "evalsi-escape-left-" + TOKEN)
    steps = [
        lambda: os.makedirs(left),
        lambda: open(os.path.join(left, "file"), "w").write("left behind"),
        lambda: os.makedirs("locked/inner"),
        lambda: open("locked/inner/file", "w").write("x"),
        lambda: os.mkfifo("locked/fifo"),
        lambda: os.chmod("locked/inner", 0o500),
        lambda: os.chmod("locked", 0o500),
    ]
    failed = []
    for index, step in enumerate(steps):
        try:
            step()
        except OSError as e:
            failed.append("step %d: %s" % (index, e.strerror))
    report(True, "left %s and a read-only tree in the workspace; failed: %s" % (left, failed))
""",
        trust_claim=False,
        prepare=_leftover_prepare,
        evidence=_leftover_files,
        evidence_after_destroy=True,
    )
)


# ============================================================================ privileges

_add(
    Probe(
        "capabilities",
        "privileges",
        "no capability is effective, permitted or ambient",
        r"""
def main():
    caps = {name: int(status_field(name)[0], 16) for name in ("CapEff", "CapPrm", "CapAmb")}
    report(any(caps.values()), "capabilities: %s" % {k: hex(v) for k, v in caps.items()})
""",
    )
)
_add(
    Probe(
        "no-new-privs",
        "privileges",
        "no_new_privs is set (setuid bits and file capabilities cannot raise privileges)",
        r"""
def main():
    value = status_field("NoNewPrivs")
    report(value != ["1"], "NoNewPrivs: %s" % value)
""",
    )
)
_add(
    Probe(
        "seccomp-mode",
        "privileges",
        "a seccomp filter is active (Seccomp: 2)",
        r"""
def main():
    value = status_field("Seccomp")
    report(value != ["2"], "Seccomp: %s" % value)
""",
    )
)


def _leak_fd(env: RunEnv) -> None:
    if env.control:  # the control's launcher leaks a descriptor, to prove the probe sees it
        fd = os.open(env.host.secret_file, os.O_RDONLY)
        env.pass_fds = (fd,)
        env.cleanups.append(lambda: os.close(fd))


_add(
    Probe(
        "inherited-fds",
        "descriptors",
        "the program inherits no descriptor beyond 0, 1 and 2 (no launcher pipe, no seccomp "
        "memfd, no host file)",
        r"""
def main():
    extra = {}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        try:
            target = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue  # the descriptor of the listing itself, closed by now
        if target.startswith("/proc/") and target.endswith("/fd"):
            continue
        extra[fd] = target
    report(bool(extra), "descriptors beyond 0-2: %s" % extra)
""",
        prepare=_leak_fd,
    )
)


# ============================================================================ resources

_RESOURCE = frozenset({"denied", "resource_exceeded", "timeout"})

_add(
    Probe(
        "fork-bomb",
        "resources",
        f"at most {PROCESSES} processes can exist (RLIMIT_NPROC under a pool uid)",
        r"""
def main():
    limit, cap = CTX["limit"], CTX["max"]
    r, w = os.pipe()
    kids, stop = [], ""
    try:
        for _ in range(cap):
            try:
                pid = os.fork()
            except OSError as e:
                stop = e.strerror
                break
            if pid == 0:
                os.close(w)
                try:
                    os.read(r, 1)  # EOF once the parent closes w
                finally:
                    os._exit(0)
            kids.append(pid)
    finally:
        os.close(w)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    why = "; stopped by " + stop if stop else ""
    report(len(kids) > limit, "forked %d processes (limit %d)%s" % (len(kids), limit, why))
""",
        held_outcomes=_RESOURCE,
        heavy=True,
        extra_ctx={"limit": PROCESSES, "max": 200},
    )
)

_add(
    Probe(
        "thread-bomb",
        "resources",
        f"at most {PROCESSES} threads can exist (threads count against RLIMIT_NPROC)",
        r"""
import threading
def main():
    limit, cap = CTX["limit"], CTX["max"]
    threading.stack_size(256 * 1024)
    gate = threading.Event()
    threads, stop = [], ""
    for _ in range(cap):
        t = threading.Thread(target=gate.wait, daemon=True)
        try:
            t.start()
        except RuntimeError as e:
            stop = str(e)
            break
        threads.append(t)
    gate.set()
    for t in threads:
        t.join()
    why = "; stopped by " + stop if stop else ""
    report(len(threads) > limit, "started %d threads (limit %d)%s" % (len(threads), limit, why))
""",
        held_outcomes=_RESOURCE,
        heavy=True,
        extra_ctx={"limit": PROCESSES, "max": 200},
    )
)

_add(
    Probe(
        "memory-bomb",
        "resources",
        f"one process cannot touch more than {MEMORY_MB} MiB (RLIMIT_AS: MemoryError)",
        r"""
def main():
    chunks, got, stop = [], 0, ""
    step = 32 << 20
    while got < CTX["max_mb"] << 20:
        try:
            chunks.append(b"\x01" * step)  # written, so the pages are really touched
        except MemoryError:
            stop = "MemoryError"
            break
        got += step
    del chunks
    why = "; " + stop if stop else ""
    detail = "allocated %d MiB (limit %d MiB)%s" % (got >> 20, CTX["limit_mb"], why)
    report(got >> 20 > CTX["limit_mb"], detail)
""",
        held_outcomes=_RESOURCE,
        heavy=True,
        extra_ctx={"limit_mb": MEMORY_MB, "max_mb": 1024},
    )
)

_add(
    Probe(
        "memory-spread",
        "resources",
        f"the sandbox as a whole cannot hold more than {MEMORY_MB} MiB, even spread over "
        "several processes each under the per-process limit",
        r"""
import select
def main():
    per, count = CTX["per_mb"], CTX["procs"]
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    kids = []
    for _ in range(count):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os.close(r)
            os.close(go_w)
            try:
                held = b"\x01" * (per << 20)
                os.write(w, b"+%d\n" % os.getpid())
            except MemoryError:
                os.write(w, b"-%d\n" % os.getpid())
            os.read(go_r, 1)  # hold the memory until the parent has counted everyone
            os._exit(0)
        kids.append(pid)
    os.close(w)
    os.close(go_r)
    # Every child either reports (holding or not) or dies (a cgroup's OOM killer may take
    # one that already holds its share, to let another allocate).
    holding, answered, dead, buf = set(), set(), set(), b""
    deadline = time.time() + 30
    while len(answered | dead) < len(kids) and time.time() < deadline:
        ready, _, _ = select.select([r], [], [], 0.2)
        if ready:
            data = os.read(r, 4096)
            *lines, buf = (buf + data).split(b"\n")
            for line in lines:
                answered.add(int(line[1:]))
                if line[:1] == b"+":
                    holding.add(int(line[1:]))
        for pid in kids:
            if pid not in dead and os.waitpid(pid, os.WNOHANG)[0] == pid:
                dead.add(pid)
    # Nobody allocates any more: the holders alive now hold their share at the same time.
    for pid in holding - dead:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            dead.add(pid)
    held = len(holding - dead)
    os.close(go_w)
    for pid in set(kids) - dead:
        os.waitpid(pid, 0)
    total = held * per
    detail = "%d processes held %d MiB each at once: %d MiB in all (limit %d MiB)" % (
        held, per, total, CTX["limit_mb"])
    detail += "; %d of %d children died" % (len(dead), len(kids))
    report(total > CTX["limit_mb"], detail)
""",
        held_outcomes=_RESOURCE,
        heavy=True,
        extra_ctx={"limit_mb": MEMORY_MB, "per_mb": 192, "procs": 6},
    )
)

_FILL = r"""
def main():
    where = CTX["fill_dir"] or os.environ.get("TMPDIR") or "/tmp"
    block = b"\x01" * (1 << 20)
    total, index, stop = 0, 0, ""
    while total < CTX["max_mb"] << 20:
        path = os.path.join(where, "fill-%s-%d" % (TOKEN, index))
        index += 1
        try:
            with open(path, "wb") as f:
                for _ in range(8):
                    f.write(block)
        except OSError as e:
            stop = e.strerror
            break
        total += 8 << 20
    why = "; stopped by " + stop if stop else ""
    detail = "wrote %d MiB into %s in 8 MiB files (limit %d MiB)%s" % (
        total >> 20, where, CTX["limit_mb"], why)
    report(total >> 20 > CTX["limit_mb"], detail)
"""


def _fill_in(where: str, *, fast_control: bool = False) -> Hook:
    def prepare(env: RunEnv) -> None:
        if fast_control and env.control and os.path.isdir("/dev/shm"):
            # Creating ~20000 files on this disk takes seconds; the control only has to show
            # that nothing stops it, so it counts them in a tmpfs directory the test owns.
            shm = Path(tempfile.mkdtemp(prefix="evalsi-escape-", dir="/dev/shm"))
            env.cleanups.append(lambda: shutil.rmtree(shm, ignore_errors=True))
            env.ctx["fill_dir"] = str(shm)
        elif where == "workspace":
            env.ctx["fill_dir"] = "."
        else:  # the control fills a directory the test owns, never the host's /tmp itself;
            # inside, the sandbox's temp dir ($TMPDIR where the rung sets one, else /tmp)
            env.ctx["fill_dir"] = str(env.scratch) if env.control else None

    return prepare


_INODES = r"""
def main():
    where = CTX["fill_dir"] or os.environ.get("TMPDIR") or "/tmp"
    made, stop = 0, ""
    for index in range(CTX["max_files"]):
        try:
            path = os.path.join(where, "i%s-%d" % (TOKEN[:6], index))
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except OSError as e:
            stop = e.strerror
            break
        made += 1
    why = "; stopped by " + stop if stop else ""
    detail = "created %d empty files in %s (budget %d)%s" % (made, where, CTX["limit"], why)
    report(made > CTX["limit"], detail)
"""

for _where in ("workspace", "tmp"):
    _add(
        Probe(
            f"disk-fill-{_where}",
            "resources",
            f"no more than {DISK_MB} MiB can be written in total to the {_where} ($TMPDIR or /tmp) "
            "(many files, each under RLIMIT_FSIZE)",
            _FILL,
            held_outcomes=_RESOURCE,
            heavy=True,
            prepare=_fill_in(_where),
            extra_ctx={"limit_mb": DISK_MB, "max_mb": 160},
        )
    )
    _add(
        Probe(
            f"inode-fill-{_where}",
            "resources",
            f"no more than {FILES} files (Resources.files) can be created in the {_where}",
            _INODES,
            held_outcomes=_RESOURCE,
            heavy=True,
            prepare=_fill_in(_where, fast_control=True),
            extra_ctx={"limit": FILES, "max_files": FILES + 4000},
        )
    )

_FLOOD = r"""
def main():
    fd, left = CTX["fd"], CTX["max_bytes"]
    chunk = b"A" * 65536
    try:
        while left > 0:
            left -= os.write(fd, chunk[:left])
    except OSError:
        pass
"""

for _stream, _fd in (("stdout", 1), ("stderr", 2)):
    _add(
        Probe(
            f"output-flood-{_stream}",
            "resources",
            f"{_stream} is capped at the spec's output_bytes and the flood is reported "
            "(resource_exceeded or truncated)",
            _FLOOD,
            judge="flood",
            held_outcomes=_RESOURCE,
            extra_ctx={"fd": _fd, "max_bytes": 16 << 20},
        )
    )

_add(
    Probe(
        "fd-exhaustion",
        "resources",
        f"no more than {OPEN_FILES} descriptors can be open (RLIMIT_NOFILE)",
        r"""
def main():
    fds, stop = [], ""
    for _ in range(CTX["max"]):
        try:
            fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            stop = e.strerror
            break
    for fd in fds:
        os.close(fd)
    why = "; stopped by " + stop if stop else ""
    detail = "opened %d descriptors (limit %d)%s" % (len(fds), CTX["limit"], why)
    report(len(fds) > CTX["limit"], detail)
""",
        held_outcomes=_RESOURCE,
        extra_ctx={"limit": OPEN_FILES, "max": 4096},
    )
)


def _no_process_left(env: RunEnv) -> str | None:
    pids = processes_with(env.token)
    if not pids:
        return None
    kill_all(pids)
    return f"processes of this run still alive after it ended: {pids} (killed now)"


_add(
    Probe(
        "sleep-forever",
        "resources",
        "the wall clock ends it (timeout) and no process of it is left on the host",
        r"""
def main():
    time.sleep(3600)
    report(False, "woke up")
""",
        held_outcomes=frozenset({"timeout"}),
        evidence=_no_process_left,
        control_needs_evidence=False,
        timeout=3.0,
        control_timeout=1.5,
        control_alive_is_hole=True,
    )
)

_add(
    Probe(
        "cpu-spin",
        "resources",
        f"a busy loop is ended by the CPU limit ({CPU_SECONDS:g} s: resource_exceeded) or the "
        "wall clock, and nothing is left running",
        r"""
def main():
    while True:
        pass
""",
        held_outcomes=_RESOURCE,
        held_by_sigkill=True,
        evidence=_no_process_left,
        control_needs_evidence=False,
        timeout=15.0,
        control_timeout=1.5,
        control_alive_is_hole=True,
    )
)

THEMES = sorted({p.theme for p in PROBES})
BY_NAME = {p.name: p for p in PROBES}
