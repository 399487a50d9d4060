"""A sandbox's writable space on the host: bounded in bytes and files, and never left behind.

As root (where bwrap runs under pool uids), every sandbox gets its own tmpfs, mounted on a
fresh private directory with ``size`` = ``Resources.disk_mb`` and ``nr_inodes`` =
``Resources.files``. It holds ``workspace/`` (the program's working directory) and ``tmp/``
(its ``/tmp``), so together they cannot exceed the disk limit or the file count, however many
files the program writes, and across every ``exec`` of the sandbox. Without root the workspace
is a plain temporary directory: one file's size is bounded (RLIMIT_FSIZE), the total is not,
which the isolation report names (``workspace-quota``).

A janitor process, started on first use in its own session, holds the list of live sandbox
directories through a pipe. When the harness dies, even by SIGKILL, the pipe closes and the
janitor unmounts and removes whatever is still listed: no mounts or directories are left over.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from evalsi.sandbox._types import Resources

_MS_NOSUID, _MS_NODEV = 0x2, 0x4
_MNT_DETACH = 0x2
_PREFIX = "evalsi-sandbox-"


@dataclass(frozen=True, slots=True)
class Workspace:
    """``path``: the workspace, inside ``base``; beside it ``tmp/``, the sandbox's /tmp on the
    same bounded mount, when there is a mount (else the driver gives /tmp its own tmpfs)."""

    base: Path
    path: Path


def can_bound() -> bool:
    """Whether workspaces get their own sized tmpfs here (mounting needs root)."""
    return os.geteuid() == 0


def create(resources: Resources) -> Workspace:
    """A new private workspace; bounded by a tmpfs when this process may mount one."""
    base = Path(tempfile.mkdtemp(prefix=_PREFIX))  # 0700 until the mount is on it
    _janitor.register(base)
    try:
        if can_bound() and resources.disk_mb is not None:
            _mount_tmpfs(base, resources)
            (base / "tmp").mkdir(mode=0o700)
        else:
            base.chmod(0o711)  # pool uids pass through to their workspace; nobody lists it
        (base / "workspace").mkdir(mode=0o700)
        return Workspace(base, base / "workspace")
    except BaseException:
        remove(base)
        raise


def remove(base: Path) -> None:
    """Unmount (if mounted) and delete ``base``; idempotent."""
    with contextlib.suppress(OSError):
        _umount(base)
    remove_tree(base)
    _janitor.unregister(base)


def private_tmp(workspace: Path) -> Path | None:
    """The ``tmp/`` beside a bounded workspace, which a driver mounts as the sandbox's /tmp."""
    tmp = workspace.parent / "tmp"
    ours = workspace.name == "workspace" and workspace.parent.name.startswith(_PREFIX)
    return tmp if ours and tmp.is_dir() and not tmp.is_symlink() else None


def _mount_tmpfs(target: Path, res: Resources) -> None:
    size = (res.disk_mb or 64) << 20
    options = f"size={size},mode=0711"
    if res.files is not None:  # + 3: the mount's root, workspace/ and tmp/ are ours
        options += f",nr_inodes={max(res.files, 1) + 3}"
    libc = ctypes.CDLL(None, use_errno=True)
    flags = _MS_NOSUID | _MS_NODEV
    if libc.mount(b"tmpfs", os.fsencode(target), b"tmpfs", flags, options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mounting the workspace tmpfs failed: {os.strerror(err)}")


def _umount(target: Path) -> None:
    if not os.path.ismount(target):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(os.fsencode(target), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def remove_tree(root: Path, *, ignore_errors: bool = True) -> None:
    """``rmtree`` that first restores the owner permissions a program removed (never through
    a symlink), so directories it made read-only or unsearchable go too."""
    if not root.exists():
        return
    with contextlib.suppress(OSError):
        os.chmod(root, 0o700)
    stack = [str(root)]  # a loop, not os.walk: 3.11's recurses, and a program can nest deep
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.chmod(entry.path, 0o700)
                stack.append(entry.path)
    try:
        shutil.rmtree(root, ignore_errors=ignore_errors)
    except RecursionError:  # deeper than Python's stack: rm's fts walks it iteratively
        subprocess.run(["rm", "-rf", "--", str(root)], check=not ignore_errors)


# The janitor: a separate process (own session, so a kill of the harness's group spares it)
# that reads "+path" / "-path" lines and, at end of input, cleans every path still listed.
_JANITOR = r"""
import ctypes, os, shutil, sys
live = set()
for line in sys.stdin.buffer:
    path = line[1:].rstrip(b"\n")
    (live.add if line[:1] == b"+" else live.discard)(path)
libc = ctypes.CDLL(None, use_errno=True)
for path in live:
    try:
        if os.path.ismount(path):
            libc.umount2(path, 2)
        for dirpath, dirnames, _ in os.walk(path):
            for name in dirnames:
                p = os.path.join(dirpath, name)
                if not os.path.islink(p):
                    try: os.chmod(p, 0o700)
                    except OSError: pass
        shutil.rmtree(path, ignore_errors=True)
    except Exception:
        pass
"""


class _Janitor:
    """The harness's end of the janitor's pipe. Spawned with ``posix_spawn`` rather than
    ``Popen``: it outlives the harness by design, which a Popen object would warn about."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd = -1
        self._pid = 0
        self._owner = 0

    def register(self, path: Path) -> None:
        self._send(b"+" + os.fsencode(path) + b"\n")

    def unregister(self, path: Path) -> None:
        self._send(b"-" + os.fsencode(path) + b"\n")

    def _send(self, line: bytes) -> None:
        with self._lock:
            for _ in range(2):  # a dead janitor (or one from before a fork) is replaced once
                fd = self._ensure()
                try:
                    os.write(fd, line)  # one short write to a pipe: atomic
                    return
                except OSError:
                    os.close(fd)
                    self._fd = -1

    def _ensure(self) -> int:
        alive = self._fd >= 0 and self._owner == os.getpid()
        if alive:
            with contextlib.suppress(ChildProcessError):
                alive = os.waitpid(self._pid, os.WNOHANG) == (0, 0)
        if not alive:
            read, write = os.pipe2(os.O_CLOEXEC)
            try:
                self._pid = os.posix_spawn(
                    sys.executable,
                    [sys.executable, "-I", "-S", "-c", _JANITOR],
                    {"PATH": os.defpath},
                    file_actions=[
                        (os.POSIX_SPAWN_DUP2, read, 0),
                        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                    ],
                    setsid=True,
                )
            finally:
                os.close(read)
            self._fd, self._owner = write, os.getpid()
        return self._fd


_janitor = _Janitor()
