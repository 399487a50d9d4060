"""The Firecracker rung's host side of one job: the job drive, the serial protocol, write-back.

Job drive: an ext4 image built per exec with ``mke2fs -d`` from a staging directory holding
``workspace/`` (a copy of the host workspace: directories, regular files and symlinks as
symlinks; FIFOs, sockets and devices are left out) and ``.evalsi/`` (mode 0700, root's: the
guest init ``init.py``, ``job.json`` with argv, env, limits and the nonce, and ``stdin``).
The guest mounts it ``nosuid,nodev``.

Serial protocol (the guest side is ``_vmguest``): only lines ``<nonce> <kind> <seq> <b64>``
count; everything else on the console (kernel log, a garbled line) is noise. ``seq`` must run
0, 1, 2, … without a gap; a gap means a record was lost, and the transcript is not trusted.

Threat model of the nonce: the program runs as uid 65534 in the guest and cannot open the
console (devtmpfs makes ``/dev/console`` and ``/dev/ttyS*`` root-only 0600), so it cannot write
records at all; the nonce is defence in depth against text it gets the kernel to print (an
OOM report, a segfault line with its command name). It cannot learn the nonce: it is 128
random bits, never on the kernel command line (``/proc/cmdline`` is world-readable), only in
``.evalsi/job.json`` (root-only directory), which init reads and deletes before the program
starts; the raw block device ``/dev/vdb`` is root-only too, and init's memory is not readable
by another uid. A program that gains root in the guest (a guest kernel exploit) can forge
its result; it still cannot leave the VM, and the host never runs anything from the guest.

Write-back: the host reads the guest's workspace out of the image with ``debugfs`` in
catastrophic (read-only) mode, by inode, never by path: it lists directories (``ls -p``),
dumps regular files to names it chose itself, and rebuilds the tree in a fresh directory
(regular files and directories only; symlinks, FIFOs and devices the program made are not
copied back). A directory whose listing does not parse cleanly (a name with a newline in it)
is not copied back at all, since such a name could forge entries. The image is hostile input
to ``debugfs``; that parser runs on the host (a guest that compromised its kernel could craft
the image). Specs with ``file_access: read-only`` skip write-back entirely.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from evalsi.sandbox._workspace import remove_tree

GUEST_INIT = "init.py"
JOB_DEVICE = "/dev/vdb"  # the second virtio block device: root is vda
_IMAGE_SLACK_MB = 8  # ext4 metadata, lost+found, the control files
_MAX_ENTRIES = 100_000
_MAX_DEPTH = 64
_NOISE_TAIL = 4096  # console lines kept for a runner failure's diagnostics
_ENTRY = re.compile(r"^/(\d+)/([0-7]{6})/(\d+)/(\d+)/(.*)/(\d*)/$")
_RECORD = re.compile(rb"([0-9a-f]{32}) ([SOEXF]) (\d{1,9}) ([A-Za-z0-9+/=]*)\r?$")


class JobImageError(RuntimeError):
    """The job drive could not be built or read back (an infrastructure failure)."""


_SBIN = ("/usr/sbin", "/sbin")  # e2fsprogs live there, often off an ordinary user's PATH


def tool(name: str) -> str | None:
    """The path of an e2fsprogs tool: on PATH, else in the sbin directories."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), *_SBIN])
    return shutil.which(name, path=path)


def tools_missing() -> list[str]:
    """The e2fsprogs tools this rung needs that cannot be found."""
    return [t for t in ("mke2fs", "debugfs") if tool(t) is None]


def guest_init_source() -> bytes:
    return resources.files("evalsi.sandbox").joinpath("_vmguest.py").read_bytes()


def bootstrap(python: str) -> str:
    """The kernel's init arguments: ``init=<python> -- -c <code>``, with the code base64-packed
    so it has no spaces, quotes or ``--`` (the kernel splits its command line on spaces, and
    Firecracker inserts its own parameters before the first ``--``).

    The code mounts devtmpfs, a tmpfs at /run, the job drive at /run/job (nosuid, nodev), and
    runs the init the job drive carries."""
    code = (
        "import ctypes,os\n"
        "l=ctypes.CDLL(None,use_errno=True)\n"
        "l.mount(b'devtmpfs',b'/dev',b'devtmpfs',0,None)\n"
        "if l.mount(b'tmpfs',b'/run',b'tmpfs',6,b'mode=755'):"
        "raise OSError(ctypes.get_errno(),'/run')\n"
        "os.mkdir('/run/job')\n"
        f"if l.mount(b'{JOB_DEVICE}',b'/run/job',b'ext4',6,None):"
        "raise OSError(ctypes.get_errno(),'job drive')\n"
        f"os.execv({python!r},[{python!r},'/run/job/.evalsi/{GUEST_INIT}'])\n"
    )
    packed = base64.b64encode(code.encode()).decode()
    return f"init={python} -- -c exec(__import__('base64').b64decode('{packed}'))"


def job_description(
    *,
    nonce: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    timeout_seconds: float,
    output_bytes: int,
    limits: Mapping[str, int | None],
    network: str,
    read_only: bool,
    has_stdin: bool,
) -> dict[str, Any]:
    return {
        "nonce": nonce,
        "argv": list(argv),
        "env": dict(env),
        "timeout_seconds": timeout_seconds,
        "output_bytes": output_bytes,
        "limits": dict(limits),
        "network": network,
        "read_only": read_only,
        "stdin": has_stdin,
    }


def build_job_image(
    image: Path,
    staging: Path,
    workspace: Path,
    job: Mapping[str, Any],
    stdin: bytes | None,
    disk_mb: int,
) -> None:
    """Write the job drive ``image`` (ext4) from ``workspace`` plus the control files.

    ``staging`` must not exist yet; it is left for the caller to remove. The image is sized
    for the workspace plus ``disk_mb`` of room for the program to write."""
    staging.mkdir(mode=0o700)
    used = _copy_workspace(workspace, staging / "workspace")
    control = staging / ".evalsi"
    control.mkdir(mode=0o700)
    (control / GUEST_INIT).write_bytes(guest_init_source())
    _write_private(control / "job.json", json.dumps(dict(job)).encode())
    if stdin is not None:
        _write_private(control / "stdin", stdin)
        used += len(stdin)
    size_kb = ((used >> 20) + disk_mb + _IMAGE_SLACK_MB) * 1024
    # No journal: the guest unmounts cleanly, or the host does not read the image.
    cmd = ["mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-E", "root_owner=0:0",
           "-L", "evalsi-job", "-d", str(staging), str(image), f"{size_kb}k"]  # fmt: skip
    _run_tool(cmd, "mke2fs")


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _copy_workspace(src: Path, dest: Path) -> int:
    """Copy the (possibly hostile) workspace tree without following symlinks; returns bytes."""
    total = 0
    dest.mkdir(mode=0o755)
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        rel = os.path.relpath(dirpath, src)
        target_dir = dest if rel == "." else dest / rel
        for name in list(dirnames):
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(os.path.join(dirpath, name)), target_dir / name)
                dirnames.remove(name)  # os.walk would not descend, but be explicit
            else:
                (target_dir / name).mkdir(mode=stat.S_IMODE(st.st_mode) | 0o700)
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(path), target_dir / name)
            elif stat.S_ISREG(st.st_mode):
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                fd = os.open(path, flags)
                if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the lstat
                    os.close(fd)
                    continue
                with os.fdopen(fd, "rb") as f_in, open(target_dir / name, "xb") as f_out:
                    shutil.copyfileobj(f_in, f_out)
                    total += f_out.tell()
                os.chmod(target_dir / name, stat.S_IMODE(st.st_mode) & 0o777)
    return total


def _run_tool(cmd: list[str], name: str, timeout: float = 60.0) -> str:
    found = tool(cmd[0])
    if found is None:
        raise JobImageError(f"{name} not found (install e2fsprogs)")
    cmd = [found, *cmd[1:]]
    try:
        done = subprocess.run(
            cmd, capture_output=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise JobImageError(f"{name} not found (install e2fsprogs)") from None
    except subprocess.TimeoutExpired:
        raise JobImageError(f"{name} did not finish within {timeout:.0f} s") from None
    if done.returncode != 0:
        first = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        raise JobImageError(f"{name} exited {done.returncode}: {first[0] if first else ''}")
    return done.stdout.decode(errors="surrogateescape")


# --- serial protocol -------------------------------------------------------------------------


@dataclass(slots=True)
class SerialParser:
    """Incremental parser of the console: nonce-tagged records in, program output out.

    ``on_output(stream, chunk)`` is called for each stdout/stderr chunk as it arrives; each
    stream is capped at ``cap`` bytes here too (the guest caps, the host does not trust it)."""

    nonce: str
    cap: int
    on_output: Callable[[str, bytes], None] | None = None
    started: bool = False
    exit_report: dict[str, Any] | None = None
    init_failure: str | None = None
    corrupt: str | None = None
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    dropped: dict[str, int] = field(default_factory=lambda: {"stdout": 0, "stderr": 0})
    panic: str | None = None
    noise: bytearray = field(default_factory=bytearray)  # the last lines that were no record
    _next_seq: int = 0
    _partial: bytearray = field(default_factory=bytearray)
    _nonce_bytes: bytes = b""

    def __post_init__(self) -> None:
        self._nonce_bytes = self.nonce.encode()

    def feed(self, data: bytes) -> None:
        self._partial += data
        *lines, rest = bytes(self._partial).split(b"\n")
        self._partial = bytearray(rest)
        if len(self._partial) > 1 << 16:  # a line that never ends is noise, not a record
            self._partial.clear()
        for line in lines:
            self._line(line)

    def finish(self) -> None:
        """The console ended. A last line without its newline was cut off (every record ends
        with one): a record there is lost, never half-read (a cut base64 can still decode)."""
        if self._partial:
            line = bytes(self._partial)
            self._partial.clear()
            if self._nonce_bytes in line and self.exit_report is None and self.corrupt is None:
                self.corrupt = f"record {self._next_seq} cut off"
            elif self.panic is None and b"Kernel panic" in line:
                self.panic = line.decode(errors="replace").strip()[:200]

    def _line(self, line: bytes) -> None:
        if self.panic is None and b"Kernel panic" in line:
            self.panic = line.decode(errors="replace").strip()[:200]
        at = line.find(self._nonce_bytes)
        if at < 0:
            self.noise = (self.noise + line + b"\n")[-_NOISE_TAIL:]
            return
        if self.corrupt is not None or self.exit_report is not None:
            return
        m = _RECORD.fullmatch(line[at:])
        if m is None or m.group(1) != self._nonce_bytes:
            self.corrupt = f"record {self._next_seq} garbled"
            return
        seq = int(m.group(3))
        if seq != self._next_seq:
            self.corrupt = f"record {self._next_seq} missing (got {seq})"
            return
        try:
            payload = base64.b64decode(m.group(4), validate=True)
        except binascii.Error:
            self.corrupt = f"record {seq} garbled"
            return
        self._next_seq += 1
        self._record(m.group(2).decode(), payload)

    def _record(self, kind: str, payload: bytes) -> None:
        if kind == "S":
            self.started = True
        elif kind in ("O", "E"):
            name, buf = ("stdout", self.stdout) if kind == "O" else ("stderr", self.stderr)
            room = max(self.cap - len(buf), 0)
            kept = payload[:room]
            buf += kept
            self.dropped[name] += len(payload) - len(kept)
            if kept and self.on_output is not None:
                self.on_output(name, kept)
        elif kind == "X":
            try:
                report = json.loads(payload)
            except ValueError:
                report = None
            if isinstance(report, dict) and isinstance(report.get("code"), int):
                self.exit_report = report
            else:
                self.corrupt = "exit record unreadable"
        elif kind == "F":
            self.init_failure = payload.decode(errors="replace")[:500]


# --- write-back ------------------------------------------------------------------------------


@dataclass(slots=True)
class ReadBack:
    files: int = 0
    directories: int = 0
    skipped: list[str] = field(default_factory=list)


def read_back(image: Path, dest: Path, scratch: Path) -> ReadBack:
    """Rebuild the image's ``/workspace`` as ``dest`` (must not exist) using ``debugfs`` by
    inode; ``scratch`` (must not exist) holds command files and dumps while it works."""
    for p in (dest, scratch):
        if any(c.isspace() or c in "\"'\\" for c in str(p)):
            raise JobImageError(f"path {p} has characters debugfs commands cannot carry")
    scratch.mkdir(mode=0o700)
    dest.mkdir(mode=0o700)
    out = ReadBack()
    root = _lookup(image, scratch, "/workspace")
    # (inode, host directory, path shown in reports), one level at a time
    level: list[tuple[int, Path, str]] = [(root, dest, "")]
    files: list[tuple[int, Path, int]] = []
    depth = 0
    while level:
        depth += 1
        if depth > _MAX_DEPTH:
            out.skipped.append(f"directories deeper than {_MAX_DEPTH}")
            break
        listings = _list_dirs(image, scratch, [ino for ino, _, _ in level])
        following: list[tuple[int, Path, str]] = []
        for (_, host_dir, shown), listing in zip(level, listings, strict=True):
            if listing is None:
                out.skipped.append(shown or "/")
                continue
            for child, mode, name in listing:
                if name in (".", "..") or not _safe_name(name):
                    continue
                if out.files + out.directories >= _MAX_ENTRIES:
                    out.skipped.append(f"entries past {_MAX_ENTRIES}")
                    break
                where = f"{shown}/{name}"
                if stat.S_ISDIR(mode):
                    (host_dir / name).mkdir(mode=0o700)
                    out.directories += 1
                    following.append((child, host_dir / name, where))
                elif stat.S_ISREG(mode):
                    files.append((child, host_dir / name, stat.S_IMODE(mode) & 0o777))
                    out.files += 1
                else:
                    out.skipped.append(where)
        level = following
    _dump_files(image, scratch, files)
    # Directory modes last: a read-only directory would refuse the files put into it.
    for dirpath, dirnames, _ in os.walk(dest):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    return out


def _safe_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\0" not in name and name not in (".", "..")


def _debugfs(image: Path, scratch: Path, commands: Sequence[str]) -> str:
    cmdfile = scratch / "commands"
    cmdfile.write_text("".join(c + "\n" for c in commands))
    return _run_tool(["debugfs", "-c", "-f", str(cmdfile), str(image)], "debugfs")


def _lookup(image: Path, scratch: Path, path: str) -> int:
    text = _debugfs(image, scratch, [f"stat {path}"])
    m = re.search(r"^Inode: (\d+)\s+Type: directory", text, re.MULTILINE)
    if m is None:
        raise JobImageError(f"job image has no directory {path}")
    return int(m.group(1))


def _list_dirs(
    image: Path, scratch: Path, inodes: Sequence[int]
) -> list[list[tuple[int, int, str]] | None]:
    """Each directory's entries (inode, mode, name), or None when its listing is suspect."""
    text = _debugfs(image, scratch, [f"ls -p <{i}>" for i in inodes])
    blocks: dict[int, list[str]] = {}
    current: list[str] | None = None
    expected = iter(inodes)
    want = next(expected, None)
    for line in text.split("\n"):
        if want is not None and line == f"debugfs: ls -p <{want}>":
            current = blocks.setdefault(want, [])
            want = next(expected, None)
        elif current is not None:
            current.append(line)
    result: list[list[tuple[int, int, str]] | None] = []
    for ino in inodes:
        entries: list[tuple[int, int, str]] | None = []
        for line in blocks.get(ino, []):
            if not line:
                continue
            m = _ENTRY.match(line)
            if m is None:
                entries = None  # a name with a newline: it could forge entries; trust none
                break
            assert entries is not None
            entries.append((int(m.group(1)), int(m.group(2), 8), m.group(5)))
        if ino not in blocks:
            entries = None
        result.append(entries)
    return result


def _dump_files(image: Path, scratch: Path, files: Sequence[tuple[int, Path, int]]) -> None:
    if not files:
        return
    blobs = scratch / "blobs"
    blobs.mkdir(mode=0o700)
    _debugfs(
        image, scratch, [f"dump <{ino}> {blobs / str(n)}" for n, (ino, _, _) in enumerate(files)]
    )
    for n, (_, target, mode) in enumerate(files):
        blob = blobs / str(n)
        if not blob.exists():
            blob.touch(mode=0o600)  # debugfs could not read it: an empty file, not a missing one
        os.replace(blob, target)
        os.chmod(target, mode & 0o777 | 0o600)


def replace_tree(workspace: Path, fresh: Path) -> None:
    """Make ``workspace``'s contents those of ``fresh`` (both ours; ``fresh`` is consumed)."""
    for entry in os.scandir(workspace):
        path = os.path.join(workspace, entry.name)
        if entry.is_dir(follow_symlinks=False):
            remove_tree(Path(path), ignore_errors=False)
        else:
            os.unlink(path)
    for entry in os.scandir(fresh):
        shutil.move(os.path.join(fresh, entry.name), os.path.join(workspace, entry.name))
