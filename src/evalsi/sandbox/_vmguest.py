"""The guest's init for the Firecracker rung: it runs as pid 1 inside the microVM.

This file is never imported for its effects on the host: the driver copies its source onto
each job drive, and a tiny bootstrap on the kernel command line (``_vmjob.bootstrap``) mounts
that drive at ``/run/job`` and executes it. Standard library only (the guest has python3).

What it does, in order: mounts ``/proc`` and a sized ``/tmp``; reads the job description
(``/run/job/.evalsi/job.json``, root-only) and deletes it, so the nonce lives only in this
process's memory; gives the workspace to the sandbox uid; starts the program as uid/gid 65534
with no supplementary groups, ``no_new_privs``, rlimits and the job's environment only; relays
its stdout/stderr (each capped) to the serial console as nonce-tagged records; enforces the wall
clock; then kills every process left, unmounts the job drive (so the host reads a consistent
image) and reports the exit record before rebooting the VM (which ends Firecracker).

Record lines: ``<nonce> <kind> <seq> <base64 payload>`` with kinds ``S`` (started), ``O``
(stdout chunk), ``E`` (stderr chunk), ``X`` (exit: a JSON object), ``F`` (init failed: text).
``seq`` counts every record from 0, so the host can tell a lost or garbled line.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

JOB_DIR = "/run/job"
CONTROL = JOB_DIR + "/.evalsi"
SANDBOX_ID = 65534
CHUNK = 768  # raw bytes per record line (1 KiB of base64)
FLOOD_FACTOR = 64
LINGER_SECONDS = 1.0

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND = 1, 2, 4, 32, 4096
_PR_SET_NO_NEW_PRIVS = 38
_RB_AUTOBOOT = 0x01234567
_RLIMITS = (
    ("cpu", resource.RLIMIT_CPU),
    ("nproc", resource.RLIMIT_NPROC),
    ("nofile", resource.RLIMIT_NOFILE),
    ("fsize", resource.RLIMIT_FSIZE),
)


class Console:
    """Writes nonce-tagged records to one fd (the serial console in the guest)."""

    def __init__(self, fd: int, nonce: str) -> None:
        self.fd = fd
        self.nonce = nonce
        self.seq = 0

    def record(self, kind: str, payload: bytes) -> None:
        line = f"{self.nonce} {kind} {self.seq} {base64.b64encode(payload).decode()}\n"
        self.seq += 1
        data = memoryview(line.encode())
        while data:
            data = data[os.write(self.fd, data) :]

    def chunks(self, kind: str, data: bytes) -> None:
        for i in range(0, len(data), CHUNK):
            self.record(kind, data[i : i + CHUNK])


def supervise(
    job: dict[str, Any],
    console: Console,
    child_setup: Callable[[], None],
    stdin_fd: int,
) -> dict[str, Any]:
    """Start ``job["argv"]``, relay its output as records, enforce the wall clock and the
    output caps; returns the exit report (also what the host sees in the ``X`` record)."""
    cap = int(job["output_bytes"])
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    oom_before = _oom_kills()
    # A close-on-exec pipe tells a failed setup (the sandbox's fault) from the program's own
    # exit codes: it closes empty on a successful exec.
    setup_r, setup_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.dup2(stdin_fd, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.dup2(setup_w, 3, inheritable=False)
            os.closerange(4, 1 << 16)
            child_setup()
        except BaseException as e:  # noqa: BLE001 - never return into init
            os.write(3, f"{type(e).__name__}: {e}".encode(errors="replace"))
            os._exit(125)
        try:
            argv = [str(a) for a in job["argv"]]
            os.execvpe(argv[0], argv, {str(k): str(v) for k, v in job["env"].items()})
        except FileNotFoundError:  # what a shell answers: the program's problem, not ours
            os.write(2, f"{job['argv'][0]}: command not found\n".encode())
            os._exit(127)
        except PermissionError:
            os.write(2, f"{job['argv'][0]}: permission denied\n".encode())
            os._exit(126)
        except BaseException as e:  # noqa: BLE001 - never return into init
            os.write(3, f"exec: {type(e).__name__}: {e}".encode(errors="replace"))
            os._exit(125)
    os.close(out_w)
    os.close(err_w)
    os.close(setup_w)
    setup_error = b""
    while chunk := os.read(setup_r, 4096):
        setup_error += chunk
    os.close(setup_r)
    kept = {out_r: 0, err_r: 0}
    dropped = {out_r: 0, err_r: 0}
    tail = b""
    kinds = {out_r: "O", err_r: "E"}
    open_fds = {out_r, err_r}
    deadline = time.monotonic() + float(job["timeout_seconds"])
    timed_out = flooded = False
    status: int | None = None
    while True:
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                _kill_all(pid)  # what it left behind may hold the pipes open
                deadline = min(deadline, time.monotonic() + LINGER_SECONDS)
        if status is not None and not open_fds:
            break
        now = time.monotonic()
        if now >= deadline:
            timed_out = status is None
            break
        # With both pipes closed, only the program's end is awaited: poll it briefly.
        tick = 0.1 if open_fds else 0.02
        ready, _, _ = select.select(list(open_fds), [], [], min(deadline - now, tick))
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if not data:
                open_fds.discard(fd)
                continue
            room = max(cap - kept[fd], 0)
            if room:
                console.chunks(kinds[fd], data[:room])
                kept[fd] += min(room, len(data))
            dropped[fd] += max(len(data) - room, 0)
            if fd == err_r:
                tail = (tail + data)[-4096:]
            if dropped[fd] > FLOOD_FACTOR * max(cap, 1 << 16):
                flooded = True
        if flooded:
            break
    _kill_all(pid)
    if status is None:
        _, status = os.waitpid(pid, 0)
    _reap_all()
    for fd in (out_r, err_r):
        os.close(fd)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = os.waitstatus_to_exitcode(status)
    cpu_limit = job["limits"].get("cpu")
    cpu_used = usage.ru_utime + usage.ru_stime
    return {
        "code": code,
        "timeout": timed_out,
        "flooded": flooded,
        "oom": _oom_kills() > oom_before,
        "cpu": code == -signal.SIGXCPU
        # the kernel kills at the hard limit; rusage can read a little under it
        or (code == -signal.SIGKILL and cpu_limit is not None and cpu_used >= 0.9 * cpu_limit),
        "fsize": code == -signal.SIGXFSZ,
        "nospace": code != 0 and b"No space left on device" in tail,
        "cpu_seconds": round(cpu_used, 3),
        "dropped": [dropped[out_r], dropped[err_r]],
        "setup_error": setup_error.decode(errors="replace")[:500] or None,
    }


def _kill_all(pid: int) -> None:
    """Kill the program's group, then every process but this one (as pid 1 in the guest;
    when exercised on a host as an ordinary process only the group is killed)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if os.getpid() == 1:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)


def _reap_all() -> None:
    if os.getpid() != 1:
        return
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def _oom_kills() -> int:
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def child_setup_for(job: dict[str, Any], cwd: str) -> Callable[[], None]:
    """What the forked child does before exec: its own session, rlimits, the sandbox uid
    without groups, no_new_privs (setuid binaries on the rootfs gain nothing), the workspace."""
    libc = ctypes.CDLL(None, use_errno=True)
    limits = job["limits"]

    def setup() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for key, which in _RLIMITS:
            if limits.get(key) is not None:
                n = int(limits[key])
                resource.setrlimit(which, (n, n))
        if os.getuid() == 0:
            os.setgroups([])
            os.setgid(SANDBOX_ID)
            os.setuid(SANDBOX_ID)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        os.chdir(cwd)

    return setup


def _mount(
    libc: ctypes.CDLL, source: str, target: str, fstype: str | None, flags: int, data: str = ""
) -> None:
    rc = libc.mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        flags,
        data.encode() if data else None,
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _loopback_up() -> None:
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), 0x8913, req))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s.fileno(), 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # IFF_UP


def _give_workspace(path: str) -> None:
    os.lchown(path, SANDBOX_ID, SANDBOX_ID)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), SANDBOX_ID, SANDBOX_ID)


def _drain_console(fd: int) -> None:
    try:
        import termios

        termios.tcdrain(fd)
    except (ImportError, OSError):
        pass


def main() -> None:  # pragma: no cover - runs only as pid 1 inside the microVM
    libc = ctypes.CDLL(None, use_errno=True)
    console_fd = os.open("/dev/console", os.O_WRONLY | os.O_NOCTTY)
    console: Console | None = None
    try:
        with open(CONTROL + "/job.json") as f:
            job = json.load(f)
        os.unlink(CONTROL + "/job.json")  # the nonce now lives in this process only
        console = Console(console_fd, str(job["nonce"]))
        console.record("S", b"")
        _mount(libc, "proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV)
        tmp_size = job["limits"].get("tmp_mb")
        tmp_options = f"mode=1777,size={tmp_size}m" if tmp_size else "mode=1777"
        _mount(libc, "tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, tmp_options)
        work = JOB_DIR + "/workspace"
        _give_workspace(work)
        cwd = "/workspace" if os.path.isdir("/workspace") else work
        if job["env"].get("HOME") == "/workspace":
            job["env"]["HOME"] = cwd
        _mount(libc, work, cwd, None, _MS_BIND)
        if job["read_only"]:
            flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
            _mount(libc, "none", cwd, None, flags)
        if job["network"] == "loopback":
            _loopback_up()
        stdin_path = CONTROL + "/stdin"
        stdin_fd = os.open(stdin_path if job["stdin"] else "/dev/null", os.O_RDONLY)
        if job["stdin"]:
            os.unlink(stdin_path)
        report = supervise(job, console, child_setup_for(job, cwd), stdin_fd)
        os.close(stdin_fd)  # an open file on the job drive would keep it from unmounting
        os.sync()
        for target in dict.fromkeys((cwd, JOB_DIR)):
            libc.umount2(target.encode(), 0)
        report["unmounted"] = not os.path.ismount(JOB_DIR)
        console.record("X", json.dumps(report).encode())
    except BaseException as e:  # noqa: BLE001 - init must report and reboot, never return
        message = f"{type(e).__name__}: {e}".encode(errors="replace")
        if console is not None:
            console.record("F", message)
        else:
            os.write(console_fd, b"evalsi-init: " + message + b"\n")
    _drain_console(console_fd)
    os.sync()
    libc.reboot(_RB_AUTOBOOT)
    sys.exit(1)  # reboot failed: pid 1 exiting panics the kernel, and panic=1 reboots


if __name__ == "__main__" and os.getpid() == 1:
    main()
