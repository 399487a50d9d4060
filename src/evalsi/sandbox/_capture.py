"""Collect a sandboxed child's output without ever blocking, and enforce the wall clock.

Every stream is read non-blocking through one selector; each keeps its first ``cap`` bytes
and counts the rest (the child is never stalled on a full pipe). A flood far beyond the cap
(``FLOOD_FACTOR`` times) ends the run early instead of draining until the timeout. At the
deadline the whole process group is SIGKILLed (bwrap's ``--die-with-parent`` and the pid
namespace then take every descendant down with it). A launcher that is the program itself
(the ``none`` rung) has no namespace to die with: there the group is killed once it exits.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.sandbox._types import Outcome
from evalsi.sandbox._uidpool import kill_leftovers

FLOOD_FACTOR = 64
LAUNCHER_CAP = 1 << 16  # what a launcher's own pipe may say (its errors, its status)
# After the launcher exited and its group was killed: how long pipes may stay open (held by a
# descendant that left the session) before the rest of the output is given up.
LINGER_SECONDS = 2.0


@dataclass(slots=True)
class Stream:
    cap: int
    head: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def feed(self, data: bytes) -> bytes:
        """Keep what fits under the cap, count the rest; returns the kept part."""
        room = max(self.cap - len(self.head), 0)
        kept = data[:room]
        self.head += kept
        self.dropped += len(data) - len(kept)
        return kept

    @property
    def truncated(self) -> bool:
        return self.dropped > 0


@dataclass(slots=True)
class Collected:
    streams: dict[int, Stream]
    timed_out: bool
    flooded: bool
    returncode: int
    cpu_seconds: float  # user + system time of the launcher and everything it reaped

    def cut_short(self) -> Outcome | None:
        """The outcome when the collector ended the run: the wall clock, or an output flood."""
        if self.timed_out:
            return Outcome("timeout")
        return Outcome("resource_exceeded", detail="output") if self.flooded else None


def collect(
    proc: subprocess.Popen[bytes],
    fds: dict[int, int],
    timeout_seconds: float,
    pool_uid: int | None = None,
    *,
    end_group_on_exit: bool = False,
    on_output: Callable[[int, bytes], None] | None = None,
) -> Collected:
    """Read ``fds`` (fd → cap) until all are at EOF and ``proc`` ended, or the deadline.

    ``pool_uid``: the uid the sandbox runs under, owned by nothing else; on a kill every
    process of it except the launcher is killed first, so the launcher reaps the namespace's
    pid 1 (killing the launcher first would orphan it to the host's init, which here does
    not reap: the zombie would keep counting against the uid's RLIMIT_NPROC).

    ``end_group_on_exit``: once the launcher exits, its process group is SIGKILLed (again
    after reaping) and the pipes get ``LINGER_SECONDS`` to close; what it left behind never
    turns its exit into a timeout.

    ``on_output(fd, chunk)`` sees every kept chunk as it arrives (streaming to a caller); an
    exception it raises is the caller's bug and propagates after the child is stopped."""
    streams = {fd: Stream(cap) for fd, cap in fds.items()}
    deadline = time.monotonic() + timeout_seconds
    timed_out = flooded = exited = False
    # A pidfd wakes the selector when the launcher exits; without one (Linux < 5.3), poll.
    wake = _pidfd(proc) if end_group_on_exit else None
    tick = 0.05 if end_group_on_exit and wake is None else 0.5
    pending = len(fds)
    try:
        with selectors.DefaultSelector() as sel:
            for fd in fds:
                os.set_blocking(fd, False)
                sel.register(fd, selectors.EVENT_READ)
            if wake is not None:
                sel.register(wake, selectors.EVENT_READ)
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = not exited
                    break
                for key, _ in sel.select(min(remaining, tick)):
                    fd = int(key.fd)
                    if fd == wake:
                        continue
                    try:
                        data = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(fd)
                        pending -= 1
                        continue
                    stream = streams[fd]
                    kept = stream.feed(data)
                    if kept and on_output is not None:
                        on_output(fd, kept)
                    if stream.dropped > FLOOD_FACTOR * max(stream.cap, 1 << 16):
                        flooded = True
                if flooded:
                    break
                if end_group_on_exit and not exited and _exited(proc):
                    exited = True
                    if wake is not None:
                        sel.unregister(wake)
                    kill_group(proc)
                    deadline = min(deadline, time.monotonic() + LINGER_SECONDS)
    except BaseException:
        _stop(proc, pool_uid)
        _reap(proc, None)
        raise
    finally:
        if wake is not None:
            os.close(wake)
    if timed_out or flooded:
        _stop(proc, pool_uid)
    rc, cpu = _reap(proc, deadline + 1.0)
    if rc is None:
        timed_out = True
        _stop(proc, pool_uid)
        rc, cpu = _reap(proc, None)
        assert rc is not None
    if end_group_on_exit:  # whatever it left running in its session goes with it
        kill_group(proc)
    return Collected(streams, timed_out, flooded, rc, cpu)


@dataclass(slots=True)
class Captured:
    """What ``Pipes.collect`` read: the program's two streams and the launcher's own."""

    got: Collected
    out: Stream
    err: Stream
    launcher: Stream


class Pipes:
    """One execution's pipes: the program's stdout and stderr, its stdin (a pipe fed with
    ``stdin``, or /dev/null for None) and, with ``launcher``, the launcher's own pipe, which
    the program never holds. The ``*_w`` ends are the child's."""

    def __init__(self, stdin: bytes | None, *, launcher: bool = False) -> None:
        self._input = stdin
        self.out_r, self.out_w = os.pipe()
        self.err_r, self.err_w = os.pipe()
        self.launcher_r, self.launcher_w = _pipe(launcher)
        self.in_r, self.in_w = _pipe(stdin is not None)

    def spawn(self, argv: Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
        """Start ``argv`` in a new session on these pipes, its stderr the program's pipe
        unless ``popen`` says otherwise; every end is closed if it cannot start."""
        popen.setdefault("stderr", self.err_w)
        stdin = self.in_r if self.in_r is not None else subprocess.DEVNULL
        try:
            return subprocess.Popen(
                argv, stdin=stdin, stdout=self.out_w, start_new_session=True, **popen
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close every end: the child never started."""
        close(self.out_w, self.err_w, self.launcher_w, self.in_r)
        close(self.out_r, self.err_r, self.launcher_r, self.in_w)

    def collect(
        self,
        proc: subprocess.Popen[bytes],
        timeout_seconds: float,
        cap: int,
        *,
        err_cap: int | None = None,
        pool_uid: int | None = None,
        end_group_on_exit: bool = False,
        on_output: Callable[[str, bytes], None] | None = None,
    ) -> Captured:
        """Close the child's ends, feed its stdin and ``collect`` (each program stream capped
        at ``cap``, stderr at ``err_cap`` if given); ``on_output`` sees the program's streams
        by name, never the launcher's."""
        close(self.out_w, self.err_w, self.launcher_w, self.in_r)
        if self.in_w is not None:
            feed_stdin(self.in_w, self._input or b"")
        fds = {self.out_r: cap, self.err_r: cap if err_cap is None else err_cap}
        if self.launcher_r is not None:
            fds[self.launcher_r] = LAUNCHER_CAP
        names = {self.out_r: "stdout", self.err_r: "stderr"}

        def forward(fd: int, chunk: bytes) -> None:
            if on_output is not None and fd in names:
                on_output(names[fd], chunk)

        try:
            got = collect(
                proc,
                fds,
                timeout_seconds,
                pool_uid,
                end_group_on_exit=end_group_on_exit,
                on_output=forward,
            )
        finally:
            close(self.out_r, self.err_r, self.launcher_r)
        out, err = got.streams[self.out_r], got.streams[self.err_r]
        launcher = Stream(0) if self.launcher_r is None else got.streams[self.launcher_r]
        return Captured(got, out, err, launcher)


def _pipe(wanted: bool) -> tuple[int | None, int | None]:
    return os.pipe() if wanted else (None, None)


def close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def feed_stdin(fd: int, data: bytes) -> None:
    """Write ``data`` to the child's stdin pipe ``fd`` and close it, never blocking: what the
    pipe takes at once is written here, the rest from a thread (a child that does not read
    cannot stall the collector; one that ends early just loses its input)."""
    try:
        os.set_blocking(fd, False)
        sent = os.write(fd, data) if data else 0
    except BlockingIOError:
        sent = 0
    except OSError:  # the child is gone already
        os.close(fd)
        return
    if sent == len(data):
        os.close(fd)
        return
    os.set_blocking(fd, True)
    threading.Thread(target=_pump, args=(fd, memoryview(data)[sent:]), daemon=True).start()


def _pump(fd: int, view: memoryview) -> None:
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # the program did not read all its input: its choice
    finally:
        os.close(fd)


def _pidfd(proc: subprocess.Popen[bytes]) -> int | None:
    try:
        return os.pidfd_open(proc.pid)
    except (OSError, AttributeError):
        return None


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the launcher has ended (left unreaped: ``_reap`` collects it and its rusage)."""
    info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return info is not None


def _reap(proc: subprocess.Popen[bytes], until: float | None) -> tuple[int | None, float]:
    """wait4 the launcher (its rusage includes the reaped sandboxed program); None if it is
    still running at ``until`` (monotonic)."""
    while True:
        flags = 0 if until is None else os.WNOHANG
        pid, status, usage = os.wait4(proc.pid, flags)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        if until is not None and time.monotonic() > until:
            return None, 0.0
        time.sleep(0.0005)


def _stop(proc: subprocess.Popen[bytes], pool_uid: int | None) -> None:
    if pool_uid is not None:
        kill_leftovers(pool_uid, spare=proc.pid)
        end = time.monotonic() + 2.0
        while time.monotonic() < end:  # the launcher exits once its child is gone
            if _exited(proc):
                return
            time.sleep(0.001)
    kill_group(proc)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the launcher's process group (it was started in a new session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
