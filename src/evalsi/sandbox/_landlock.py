"""The ``confined`` rung: Landlock + the seccomp allow-list, on the host's namespaces.

For hosts where bubblewrap cannot run (no unprivileged user namespaces) but the kernel has
Landlock ABI ≥ 6. There is no mount namespace, so the program sees the host's file tree and
Landlock decides what it may open (per inode hierarchy):

- read + execute: ``/usr`` and the top-level ``/bin``, ``/lib*``, ``/sbin`` (merged-usr
  symlinks resolve into ``/usr``), the spec's ``read_only_paths``;
- read: the same few ``/etc`` files the bwrap rung shows (loader cache and config,
  ``alternatives``, ``localtime``, ``nsswitch.conf``, ``mime.types``; no passwd, shadow,
  hosts), ``/dev/{null,zero,full}`` (also write), ``/dev/{random,urandom}``, and chosen
  entries of the program's own ``/proc/<pid>`` (``_PROC_SELF``: stat, status, maps, fd/, ...;
  not ``net/``, ``mountinfo`` or ``mounts``, which describe the host's namespaces; not its
  children's; nothing else under ``/proc``);
- read + write: the workspace at its host path (there is no ``/workspace``: cwd and ``HOME``
  point at it), and a private temp dir given as ``TMPDIR`` (``/tmp`` itself is not
  writable): the sandbox's bounded ``tmp/`` beside its workspace (``_workspace``), else a
  fresh one for this exec. For ``file_access: read-only`` the workspace is read + execute
  only and owned by root, not the pool uid (Landlock has no right for chmod/chown/utime: only
  not owning the files stops those);
- TCP bind/connect denied by Landlock when the network is denied, every other inet socket by
  the seccomp filter (which also kills ptrace, keyctl, io_uring, unshare, mount and any
  foreign-architecture call); abstract-unix connects and signals leaving the sandbox are
  scoped away (ABI 6). With no network or IPC namespace of its own, this rung's filter also
  answers EPERM to ``socket(AF_UNIX)`` (a host's pathname socket would be reachable by its
  permissions alone; ``socketpair`` works) and to SysV IPC and POSIX message queues;
- memory and process totals by the sandbox's own cgroups (``_cgroup``, when root and the
  controllers exist): the launcher joins them before it forks the program.

What it does not give compared to bwrap is listed in ``Isolation.missing``. The program runs
under a pool uid with the same rlimits as bwrap, through ``_landlock_launch`` (a stdlib-only
launcher that confines a child and execs the program; see there). Every failure before
exec is a ``runner_failure``; nothing ever runs less confined than reported.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import marshal
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from evalsi.sandbox import _capture, _cgroup, _profile, _rlimits, _seccomp, _uidpool, _workspace
from evalsi.sandbox import _landlock_launch as ll
from evalsi.sandbox._driver import Call, Rung
from evalsi.sandbox._types import (
    ExecResult,
    Isolation,
    Level,
    Outcome,
    RungReport,
    SandboxSpec,
    SandboxUnavailable,
)

_RX = ll.FS_READ_FILE | ll.FS_READ_DIR | ll.FS_EXECUTE
_RW = (
    _RX | ll.FS_WRITE_FILE | ll.FS_REMOVE_DIR | ll.FS_REMOVE_FILE | ll.FS_MAKE_DIR
    | ll.FS_MAKE_REG | ll.FS_MAKE_SYM | ll.FS_MAKE_FIFO | ll.FS_MAKE_SOCK | ll.FS_REFER
    | ll.FS_TRUNCATE
)  # fmt: skip
_MARSHAL_VERSION = 4  # readable by any Python 3.4+ launcher interpreter
_BACKSTOP = 5.0  # seconds past the deadline before the collector kills the launcher
_DEV_RW = ("/dev/null", "/dev/zero", "/dev/full")
_DEV_RO = ("/dev/random", "/dev/urandom")
# What this rung never gives, whatever the spec (compared with bwrap). Pathname unix
# sockets are no gap: the filter refuses socket(AF_UNIX) here.
_ALWAYS_MISSING = (
    "pid-namespace",  # host pids can be probed (kill(pid, 0) answers EPERM, not ESRCH)
    "mount-namespace",  # the workspace at its host path, no /workspace, no fresh /tmp
    "ipc-namespace",  # the host's; the filter refuses SysV IPC and message queues instead
    "host-metadata",  # stat/readlink of any host path works; only opening is confined
)
# Entries of the program's own /proc/<pid> it may read: what runtimes and tools read about
# themselves (ps-like fields, memory maps, limits, open fds). Directories get their listing
# only through their own rule: a rule on /proc/<pid> itself would also list net/dev_snmp6,
# whose names are the host's interfaces. Never net/, mountinfo, mounts, mountstats, cgroup,
# task/ (each thread's dir has net/ and mountinfo again) or the exe/cwd/root magic links
# (opening those resolves to the target, which its own rules govern).
_PROC_FILE = ll.FS_READ_FILE
_PROC_SELF: tuple[tuple[str, int], ...] = (
    *((name, _PROC_FILE) for name in (
        "stat", "statm", "status", "cmdline", "comm", "environ", "auxv", "maps", "smaps",
        "smaps_rollup", "limits", "io", "oom_score", "oom_score_adj", "sched", "schedstat",
    )),
    ("fd", ll.FS_READ_DIR),  # listing it: subprocess's close_fds, fd counting
    ("fdinfo", ll.FS_READ_DIR | ll.FS_READ_FILE),
)  # fmt: skip
_OOM_SCORE_ADJ = 1000  # in a memory cgroup: the program dies first, not the launcher


class LandlockDriver(Rung):
    """Landlock (ABI ≥ 6) + seccomp allow-list + rlimits under a pool uid."""

    name = "landlock"
    level = Level.CONFINED

    def __init__(
        self,
        *,
        abi_override: int | None = None,
        seccomp_override: bytes | None = None,
        python: str | None = None,
    ) -> None:
        """Test hooks only: ``abi_override`` makes the kernel's ABI look lower (the refusals);
        ``seccomp_override`` replaces the BPF program (a broken one must refuse to run);
        ``python`` picks the launcher's interpreter."""
        self._abi_override = abi_override
        self._bpf_override = seccomp_override
        self._python = python

    @functools.cached_property
    def python(self) -> str | None:
        """An interpreter the pool uids can run (a pyenv under /root is not one)."""
        if self._python is not None:
            return self._python
        root = os.geteuid() == 0
        for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
            if _usable_by_others(candidate) if root else os.access(candidate, os.X_OK):
                return candidate
        return None

    def probe(self) -> RungReport:
        try:
            abi = ll.landlock_abi()
        except OSError as exc:
            why = {errno.ENOSYS: "not built in", errno.EOPNOTSUPP: "disabled at boot"}.get(
                exc.errno or 0, exc.strerror
            )
            return self.report(False, f"Landlock not supported/disabled ({why})")
        if self._abi_override is not None:
            abi = min(abi, self._abi_override)
        refusal = ll.abi_refusal(abi)
        if refusal is not None:
            return self.report(False, refusal)
        try:
            self._bpf("deny")
        except _seccomp.SeccompUnavailable as exc:
            return self.report(False, f"seccomp filter failed: {exc}")
        if self.python is None:
            return self.report(False, "no Python interpreter the sandbox uids can execute")
        try:
            result = self.run_true(SandboxSpec(min_isolation=self.level), tmp="/tmp")
        except (OSError, ValueError) as exc:
            return self.report(False, f"probe could not run: {exc}")
        if result.exit_code == 0:
            return self.report(True)
        detail = result.outcome.detail or result.stderr.decode(errors="replace").strip()
        return self.report(False, f"profile failed on true: {result.outcome.kind} {detail}")

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        return _isolation(self.name, self.level, spec, _cgroup.missing_here())

    def _exec(
        self, spec: SandboxSpec, workspace: Path, argv: Sequence[str], call: Call
    ) -> ExecResult:
        if spec.root is not None:  # never run the host's binaries in place of an image's
            raise SandboxUnavailable(
                "SANDBOX_UNAVAILABLE: landlock: an image root (spec.root) needs a mount "
                "namespace, which the confined rung does not have"
            )
        if spec.network == "loopback":  # never a network wider than the spec asked for
            raise SandboxUnavailable(
                "SANDBOX_UNAVAILABLE: landlock: network 'loopback' cannot be confined to "
                "loopback without a network namespace (it would reach the host's whole "
                "network); the namespaced rung (bwrap) can"
            )
        isolation = self.isolation_for(spec)  # until the cgroups are known
        try:
            bpf = self._bpf(spec.network)
        except _seccomp.SeccompUnavailable as exc:
            return call.failed(isolation, f"seccomp: {exc}")
        if self.python is None:
            return call.failed(isolation, "landlock: no usable Python for the launcher")
        try:
            with _uidpool.acquire(timeout_seconds=max(call.timeout, 10.0)) as slot:
                if slot.switch:  # read-only: root keeps the files (no chmod by their owner)
                    read_only = spec.file_access == "read-only"
                    _profile.hand_over(workspace, slot.uid, slot.gid, read_only=read_only)
                # The sandbox's bounded tmp/ beside its workspace when it has one (it then
                # lasts as long as the sandbox, like bwrap's /tmp); else one for this exec.
                shared_tmp = _workspace.private_tmp(workspace)
                tmp = shared_tmp or Path(
                    tempfile.mkdtemp(prefix="evalsi-landlock-tmp-", dir="/tmp")
                )
                try:
                    if slot.switch:
                        _profile.hand_over(tmp, slot.uid, slot.gid)
                    with contextlib.ExitStack() as stack:
                        limits = _cgroup.limits(slot.own_uid, spec.resources)
                        try:
                            group = stack.enter_context(limits)
                        except OSError as exc:  # never run without the reported totals
                            return call.failed(isolation, f"cgroup: {exc}")
                        isolation = _isolation(self.name, self.level, spec, _cgroup.missing(group))
                        config = self._config(
                            spec, workspace.resolve(), tmp, argv, call, slot, bpf, group
                        )
                        try:
                            return self._run(
                                self.python, config, spec, slot, group, call, isolation
                            )
                        finally:
                            if slot.switch:  # anything that outlived the launcher, before
                                _uidpool.kill_leftovers(slot.uid)  # its cgroups go
                finally:
                    if shared_tmp is None:
                        _workspace.remove_tree(tmp)
        except TimeoutError as exc:  # every pool uid busy: infrastructure, retried
            return call.failed(isolation, f"sandbox busy: {exc}")

    def _bpf(self, network: _seccomp.NetworkMode) -> bytes:
        if self._bpf_override is not None:
            return self._bpf_override
        # The host's namespaces: no AF_UNIX sockets (host pathname sockets), no SysV IPC.
        return _seccomp.filter_bpf(network, unix_sockets=False, ipc=False)

    def _config(
        self,
        spec: SandboxSpec,
        workspace: Path,
        tmp: Path,
        argv: Sequence[str],
        call: Call,
        slot: _uidpool.Slot,
        bpf: bytes,
        group: _cgroup.Group | None,
    ) -> dict[str, object]:
        """What the launcher needs: rules as (path, access, required) triples."""
        rules: list[tuple[str, int, bool]] = []
        seen: set[str] = set()
        for name in ("usr", *_profile.TOP_LEVEL):
            real = os.path.realpath(f"/{name}")
            if real not in seen and os.path.isdir(real):
                seen.add(real)
                rules.append((real, _RX, False))
        rules += [
            (f"/etc/{name}", ll.FS_READ_FILE | ll.FS_READ_DIR, False) for name in _profile.ETC
        ]
        rules += [
            (dev, ll.FS_READ_FILE | ll.FS_WRITE_FILE | ll.FS_TRUNCATE, False) for dev in _DEV_RW
        ]
        rules += [(dev, ll.FS_READ_FILE, False) for dev in _DEV_RO]
        rules += [(str(path), _RX, True) for path in spec.read_only_paths]
        rules.append((str(workspace), _RX if spec.file_access == "read-only" else _RW, True))
        rules.append((str(tmp), _RW, True))
        merged = call.environ(spec, {**_profile.environ(str(workspace)), "TMPDIR": str(tmp)})
        limits = _rlimits.limits_for(spec.resources, nproc=slot.switch, cpu_grace=1)
        return {
            "parent": os.getpid(),
            "argv": list(argv),
            "env": merged,
            "cwd": str(workspace),
            "rules": rules,
            "handled_fs": ll.FS_ALL,
            "handled_net": ll.NET_BIND_TCP | ll.NET_CONNECT_TCP if spec.network == "deny" else 0,
            "scoped": ll.SCOPE_ABSTRACT_UNIX_SOCKET | ll.SCOPE_SIGNAL,
            "proc_self": [(name, access, False) for name, access in _PROC_SELF],
            "cgroup_procs": list(group.procs) if group is not None else [],
            "oom_score_adj": _OOM_SCORE_ADJ if group is not None else None,
            "rlimits": limits,
            "seccomp": bpf,
            "abi_override": self._abi_override,
            "timeout": call.timeout,
        }

    def _run(
        self,
        python: str,
        config: dict[str, object],
        spec: SandboxSpec,
        slot: _uidpool.Slot,
        group: _cgroup.Group | None,
        call: Call,
        isolation: Isolation,
    ) -> ExecResult:
        cfg_fd = os.memfd_create("evalsi-landlock", os.MFD_CLOEXEC)
        try:
            data = memoryview(marshal.dumps(config, _MARSHAL_VERSION))
            while data:
                data = data[os.write(cfg_fd, data) :]
            os.lseek(cfg_fd, 0, os.SEEK_SET)
            pipes = _capture.Pipes(call.stdin, launcher=True)
            report_fd = pipes.launcher_w
            assert report_fd is not None
            cmd = [python, "-I", "-S", "-c", _launcher_source(), str(cfg_fd), str(report_fd)]
            proc = pipes.spawn(
                cmd, pass_fds=(cfg_fd, report_fd), cwd="/", env={}, **slot.popen_user()
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return call.failed(isolation, f"landlock launcher could not start: {exc}")
        finally:
            os.close(cfg_fd)
        # The launcher enforces the deadline (and kills its whole domain); the collector's
        # is the backstop for a launcher that hangs.
        io = pipes.collect(
            proc,
            call.timeout + _BACKSTOP,
            spec.resources.output_bytes,
            pool_uid=slot.own_uid,
            on_output=call.on_output,
        )
        cpu_limit = _rlimits.cpu_limit(spec.resources)
        report = bytes(io.launcher.head)
        outcome = classify(io.got, bytes(io.err.head), report, cpu_limit, group=group)
        return call.result(outcome, isolation, io)


def classify(
    got: _capture.Collected,
    stderr: bytes,
    report: bytes,
    cpu_limit: float | None,
    *,
    group: _cgroup.Group | None = None,
) -> Outcome:
    """Map the launcher's report to an outcome. Only the report pipe (which the program never
    holds) can carry a runner failure or the program's status; ``group`` (the execution's
    cgroups) says whether the memory or process total struck."""
    if (cut := got.cut_short()) is not None:
        return cut
    lines = report.decode(errors="replace").splitlines()
    for line in lines:
        if line.startswith("error "):
            return Outcome("runner_failure", detail=f"landlock: {line[len('error ') :]}")
    status = next((line.split() for line in lines if line.startswith("status ")), None)
    if status is not None and status[1:2] == ["timeout"]:
        return Outcome("timeout")
    oom = group is not None and group.oom_killed()  # the group's total, not one process's
    if status is None or len(status) != 3 or not status[2].lstrip("-").isdigit():
        if oom:  # the OOM killer took the launcher (the program's score is raised, though)
            return Outcome("resource_exceeded", detail="memory")
        detail = f"landlock launcher ended without a status (exit {got.returncode})"
        return Outcome("runner_failure", detail=detail)
    how, number = status[1], int(status[2])
    code = -number if how == "signal" else number
    killed = _profile.killed_by(number) if how == "signal" else None
    if killed is not None:
        return killed
    if oom:  # any process of the program was OOM-killed: the sandbox hit its memory limit
        return Outcome("resource_exceeded", code=code, detail="memory")
    if how == "signal" and _profile.hit_cpu_limit(number, got, cpu_limit):
        return Outcome("resource_exceeded", code=code, detail="cpu")
    if how != "signal" and _profile.out_of_memory(number, stderr):
        return Outcome("resource_exceeded", code=code, detail="memory")
    return Outcome("exit", code=code)


def _isolation(name: str, level: Level, spec: SandboxSpec, cgroups: Sequence[str]) -> Isolation:
    """What this rung does not give for ``spec``, ``cgroups`` being ``_cgroup.missing``'s
    entries for the execution's groups."""
    missing = [*cgroups, *_ALWAYS_MISSING]
    if not _workspace.can_bound():
        missing.append("workspace-quota")  # no sized tmpfs: only RLIMIT_FSIZE per file
    if os.geteuid() != 0:
        missing.append("processes")  # no pool uid: RLIMIT_NPROC left out
        if spec.file_access == "read-only":  # the caller's uid owns the files: chmod works
            missing.append("read-only-metadata")
    return Isolation(name, level, "partial", tuple(missing))


def landlock_rung() -> LandlockDriver:
    """The confined rung for the ladder."""
    return LandlockDriver()


@functools.cache
def _launcher_source() -> str:
    """The launcher runs as ``-c`` source: the pool uid need not reach this package's files."""
    return Path(ll.__file__).read_text(encoding="utf-8")


def _usable_by_others(path: str) -> bool:
    """Whether a uid with no relation to the file can execute it (every ancestor searchable)."""
    real = Path(path).resolve()
    try:
        if not (real.stat().st_mode & stat.S_IXOTH):
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in real.parents)
    except OSError:
        return False
