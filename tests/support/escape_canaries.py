"""Host-side canaries for the sandbox escape suite (``tests/e2e/test_e2e_escape.py``).

Everything here lives on the host, outside any sandbox, and records whether a probe reached it:
a 0600 secret file, a world-writable directory, an environment secret, loopback listeners
(TCP, UDP, a unix socket at a host path, an abstract unix socket) that remember every token
they receive, long-lived "victim" processes to be seen, traced or killed, and a setuid-root
copy of ``id`` (which prints ``euid=0`` when the setuid bit takes effect), and the secret
again in POSIX (``/dev/shm``) and SysV shared memory.

All of it is bounded and local: the listeners bind 127.0.0.1 or the abstract namespace only,
every file is under one temporary directory removed by ``close()``, and every process started
here is killed by ``close()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

SECRET_ENV = "EVALSI_ESCAPE_SECRET"
PYTHON = "/usr/bin/python3"

# Mount points the host has that no sandbox needs; seeing one inside means the host's mount
# table leaked. Everything a sandbox legitimately mounts is excluded.
_SANDBOX_MOUNTS = (
    "/",
    "/usr",
    "/bin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/sbin",
    "/etc",
    "/proc",
    "/dev",
    "/dev/pts",
    "/dev/shm",
    "/dev/mqueue",
    "/tmp",
    "/workspace",
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def host_mount_points() -> list[str]:
    """The host's mount points that a sandbox should never show (from our own mountinfo)."""
    points: list[str] = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point in _SANDBOX_MOUNTS or point.startswith(("/etc/", "/proc/", "/mnt/")):
                continue
            points.append(point)
    return sorted(set(points))


class HostCanaries:
    """One set of canaries for a test module; ``close()`` removes every trace of them."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="evalsi-escape-"))
        self.root.chmod(0o755)  # sandbox uids get DAC search rights: only the sandbox stops them
        self.secret = "EVALSI-SECRET-" + secrets.token_hex(16)
        self.secret_file = self.root / "secret.txt"
        self.secret_file.write_text(self.secret)
        self.secret_file.chmod(0o600)
        self.env_secret = "ENV-" + secrets.token_hex(16)
        self.writable = self.root / "writable"
        self.writable.mkdir()
        self.writable.chmod(0o777)
        self._received: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._victims: list[subprocess.Popen[bytes]] = []
        self._shm_path: Path | None = None
        self._shm_id: int | None = None
        self.marker = "evalsi-escape-victim-" + secrets.token_hex(8)
        self.abstract_name = "evalsi-escape-" + secrets.token_hex(8)
        self.unix_path = str(self.root / "canary.sock")
        try:
            self.tcp_port = self._listen_tcp()
            self.udp_port = self._listen_udp()
            self._listen_unix(self.unix_path)
            self._listen_unix("\0" + self.abstract_name)
            self.victim = self.spawn_victim()
            self.suid_probe = self._setuid_id()
            self.shm_file = self._posix_shm()
            self.sysv_key = self._sysv_shm()
            self.host_mounts = host_mount_points()
            self.hostname = socket.gethostname()
        except BaseException:
            self.close()
            raise

    # -- what the probes are told -------------------------------------------------------------

    def context(self) -> dict[str, object]:
        """The host facts every probe gets (paths, ports, pids; hashes, never the secrets)."""
        return {
            "secret_file": str(self.secret_file),
            "secret_sha": sha256(self.secret.encode()),
            "secret_env": SECRET_ENV,
            "secret_env_sha": sha256(self.env_secret.encode()),
            "writable_dir": str(self.writable),
            "tcp_port": self.tcp_port,
            "udp_port": self.udp_port,
            "unix_path": self.unix_path,
            "abstract_name": self.abstract_name,
            "victim_pid": self.victim.pid,
            "victim_marker": self.marker,
            "harness_pid": os.getpid(),
            "suid_probe": self.suid_probe,
            "host_mounts": self.host_mounts,
            "shm_file": self.shm_file,
            "sysv_key": self.sysv_key,
        }

    def received(self, token: str, settle_s: float = 0.5) -> bool:
        """Whether any listener got ``token`` (a probe that connected and sent it). The probe
        may have exited before the listener's thread read what it sent: on a busy machine the
        answer waits up to ``settle_s`` for that read."""
        deadline = time.monotonic() + settle_s
        while True:
            with self._lock:
                if token in self._received:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    # -- victims --------------------------------------------------------------------------------

    def spawn_victim(self) -> subprocess.Popen[bytes]:
        """A sleeping host process with the marker in its argv and the secret in its
        environment; killed by ``close()`` (and it ends by itself after 5 minutes)."""
        env = {"PATH": "/usr/bin:/bin", SECRET_ENV: self.env_secret}
        proc = subprocess.Popen(
            [PYTHON, "-c", "import time; time.sleep(300)", self.marker],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._victims.append(proc)
        return proc

    # -- listeners ------------------------------------------------------------------------------

    def _record(self, data: bytes) -> None:
        with self._lock:
            for word in data.decode(errors="replace").split():
                self._received.add(word)

    def _serve(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _listen_tcp(self) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self._socks.append(sock)
        self._serve(self._accept_loop, sock)
        return int(sock.getsockname()[1])

    def _listen_unix(self, address: str) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(address)
        if not address.startswith("\0"):
            os.chmod(address, 0o777)  # DAC lets anyone connect: only the sandbox may stop it
        sock.listen(64)
        self._socks.append(sock)
        self._serve(self._accept_loop, sock)

    def _accept_loop(self, sock: socket.socket) -> None:
        sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._serve(self._read_conn, conn)

    def _read_conn(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5.0)
            with contextlib.suppress(OSError):
                while data := conn.recv(4096):
                    self._record(data)

    def _listen_udp(self) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        self._socks.append(sock)
        self._serve(self._udp_loop, sock)
        return int(sock.getsockname()[1])

    def _udp_loop(self, sock: socket.socket) -> None:
        sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                data, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self._record(data)
            with contextlib.suppress(OSError):
                sock.sendto(b"echo " + data, peer)  # the probe's proof that it got through

    # -- setuid ---------------------------------------------------------------------------------

    def _setuid_id(self) -> str:
        """A setuid-root copy of ``id`` in the canary directory (it prints ``euid=0`` when the
        bit works), the control's proof that the setuid probe detects an escalation."""
        target = self.root / "suid-id"
        shutil.copy2("/usr/bin/id", target)
        os.chown(target, 0, 0)
        target.chmod(0o4755)
        return str(target)

    # -- shared memory --------------------------------------------------------------------------

    def _posix_shm(self) -> str:
        """The secret in a world-readable file under the host's /dev/shm (POSIX shared
        memory): only the sandbox can keep a program from reading it."""
        if not os.path.isdir("/dev/shm"):
            return "/dev/shm/evalsi-escape-unavailable"
        self._shm_path = Path("/dev/shm") / f"evalsi-escape-{secrets.token_hex(8)}"
        self._shm_path.write_text(self.secret)
        self._shm_path.chmod(0o644)
        return str(self._shm_path)

    def _sysv_shm(self) -> int:
        """The secret in a SysV shared-memory segment (mode 0666) under a random key: reachable
        by key from anything in the host's IPC namespace."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        key = secrets.randbelow(1 << 30) + 1
        shm_id = libc.shmget(key, 4096, 0o1000 | 0o2000 | 0o666)  # IPC_CREAT | IPC_EXCL
        if shm_id < 0:
            raise OSError(ctypes.get_errno(), "shmget failed")
        self._shm_id = shm_id
        addr = libc.shmat(shm_id, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "shmat failed")
        data = self.secret.encode()
        ctypes.memmove(addr, data, len(data))
        libc.shmdt(ctypes.c_void_p(addr))
        return key

    # -- cleanup --------------------------------------------------------------------------------

    def close(self) -> None:
        self._stop.set()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(timeout=2.0)
        for proc in self._victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, 9)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        if self._shm_path is not None:
            self._shm_path.unlink(missing_ok=True)
        if self._shm_id is not None:
            ctypes.CDLL(None).shmctl(self._shm_id, 0, None)  # IPC_RMID
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> HostCanaries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def processes_with(needle: str) -> list[int]:
    """Host pids whose command line contains ``needle`` (zombies have none and are ignored)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if needle.encode() in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 9)
