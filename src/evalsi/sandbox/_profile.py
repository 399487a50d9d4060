"""What the namespaced and confined rungs both show a program of the host, and how both hand
a workspace to a pool uid: one profile, so the two rungs cannot drift apart."""

from __future__ import annotations

import os
import re
import signal
import stat
from pathlib import Path

from evalsi.sandbox._capture import Collected
from evalsi.sandbox._types import Outcome

PATH = "/usr/local/bin:/usr/bin:/bin"
# fmt: off
ETC = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf",
    "mime.types",
)
# fmt: on
TOP_LEVEL = ("bin", "lib", "lib32", "lib64", "libx32", "sbin")
MEMORY = re.compile(rb"\bMemoryError\b|Cannot allocate memory|std::bad_alloc|[Oo]ut of memory")
_RLIMIT: dict[int, str] = {signal.SIGXCPU: "cpu", signal.SIGXFSZ: "disk"}


def killed_by(sig: int) -> Outcome | None:
    """A kill by the seccomp filter (denied) or by a per-process rlimit; None for any other."""
    if sig == signal.SIGSYS:
        return Outcome("denied", code=-sig, detail="seccomp")
    if sig in _RLIMIT:
        return Outcome("resource_exceeded", code=-sig, detail=_RLIMIT[sig])
    return None


def hit_cpu_limit(sig: int, got: Collected, cpu_limit: float | None) -> bool:
    """A SIGKILL at RLIMIT_CPU's hard limit (for a program that ignores SIGXCPU). The rusage
    the collector sees can fall a little short of the limit the kernel counted."""
    return sig == signal.SIGKILL and cpu_limit is not None and got.cpu_seconds >= 0.9 * cpu_limit


def out_of_memory(code: int, stderr: bytes) -> bool:
    """A failing program that reports a memory overrun (rlimits give ENOMEM, not a kill)."""
    return code != 0 and MEMORY.search(stderr[-4096:]) is not None


def environ(home: str) -> dict[str, str]:
    """What every program's environment starts from, before the spec's variables."""
    return {"PATH": PATH, "HOME": home, "LANG": "C.UTF-8"}


def hand_over(workspace: Path, uid: int, gid: int, *, read_only: bool = False) -> None:
    """Give the workspace tree to the slot's uid (never following symlinks), and refuse a
    workspace the slot's uid cannot reach (an ancestor without search permission).

    ``read_only``: the tree goes to root instead, readable (and searchable, executable where
    the owner may execute) by others and with no setuid/setgid bit, so the slot's uid can
    read it but, owning nothing, cannot chmod, chown or utime it either (a confined rung
    without a read-only mount has no other guard on metadata)."""
    path = workspace.resolve()
    for parent in path.parents:
        st = parent.stat()
        if not (st.st_mode & 0o001 or st.st_uid == uid):
            raise ValueError(
                f"workspace {path} is not reachable by sandbox uids: {parent} is not "
                "searchable by others (create workspaces under a world-searchable directory)"
            )
    owner = (0, 0) if read_only else (uid, gid)
    _give(path, *owner, read_only)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            _give(Path(dirpath, name), *owner, read_only)


def _give(path: Path, uid: int, gid: int, read_only: bool) -> None:
    if not read_only:
        os.lchown(path, uid, gid)
        return
    # Through an O_PATH fd of the very inode: a name swapped for a symlink meanwhile is never
    # followed (the chmod and chown of /proc/self/fd/N act on the opened inode itself).
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISLNK(st.st_mode):
            os.lchown(path, uid, gid)  # a link has no mode of its own
            return
        inode = f"/proc/self/fd/{fd}"
        os.chown(inode, uid, gid)  # clears setuid/setgid on files, even when root calls it
        mode = stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID) | stat.S_IROTH
        if stat.S_ISDIR(st.st_mode) or mode & stat.S_IXUSR:
            mode |= stat.S_IXOTH
        os.chmod(inode, mode)
    finally:
        os.close(fd)
