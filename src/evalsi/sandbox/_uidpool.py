"""Distinct host uids for concurrent sandboxes, so RLIMIT_NPROC means something.

RLIMIT_NPROC counts processes per host (real) uid, and root's is never enforced (the kernel
exempts the root user). So when the harness runs as root, each execution starts bwrap under
its own unprivileged uid from a pool (``BASE + slot``, unused by any account); a slot is held
with an exclusive ``flock`` on a lock file, which also keeps concurrent harness processes on
one host apart and is released by the kernel if the harness dies. As a non-root user there is
only the user's own uid: one slot, so executions are serialised (concurrency is refused rather
than sharing a process count).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POOL_BASE = 2_000_000_000
POOL_SIZE = 256
_LOCK_DIR = Path("/tmp/evalsi-sandbox-uids")


@dataclass(frozen=True, slots=True)
class Slot:
    """The host uid/gid one execution runs under; ``switch`` is False when not root."""

    uid: int
    gid: int
    switch: bool

    @property
    def own_uid(self) -> int | None:
        """The uid only this execution's processes run as (None: the caller's own)."""
        return self.uid if self.switch else None

    def popen_user(self) -> dict[str, Any]:
        """``Popen``'s arguments that start the child as this slot's uid, without groups."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []} if self.switch else {}


@contextmanager
def acquire(timeout_seconds: float = 60.0) -> Iterator[Slot]:
    """Hold one free slot for the duration of the block."""
    if os.geteuid() != 0:
        lock_dir = Path(f"/tmp/evalsi-sandbox-uids-{os.geteuid()}")
        candidates = [(os.getuid(), os.getgid(), False)]
    else:
        lock_dir = _LOCK_DIR
        candidates = [(POOL_BASE + i, POOL_BASE + i, True) for i in range(POOL_SIZE)]
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    deadline = time.monotonic() + timeout_seconds
    while True:
        for uid, gid, switch in candidates:
            fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield Slot(uid, gid, switch)
                return
            finally:
                os.close(fd)  # releases the lock
        if time.monotonic() > deadline:
            raise TimeoutError("no free sandbox uid slot")
        time.sleep(0.01)


def kill_leftovers(uid: int, spare: int | None = None) -> None:
    """SIGKILL every process owned by ``uid`` (a pool uid owns nothing else) but ``spare``."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid and int(entry.name) != spare:
                os.kill(int(entry.name), 9)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
