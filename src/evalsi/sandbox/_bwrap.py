"""The ``namespaced`` rung: bubblewrap with a hardened profile and a seccomp allow-list.

Profile: every namespace unshared (user included, nested user namespaces disabled), a new
session (no controlling tty, so TIOCSTI has nothing to inject into), a cleared environment,
no capabilities, uid/gid 65534 inside; the host's ``/usr`` read-only with the merged-usr
symlinks, a handful of ``/etc`` files the loader needs (no passwd, shadow, /root, /home),
fresh ``/proc`` and ``/dev``, a sized tmpfs at ``/tmp``, the workspace at ``/workspace``.
Limits are rlimits (``_rlimits``) under a pool uid (``_uidpool``).

bwrap's own errors and the program's stderr are kept apart: bwrap writes to its own pipe,
and a tiny ``sh`` shim moves the program's stderr onto fd 2 and closes every other fd just
before exec. So "bwrap: …" on the launcher pipe is a runner failure the program cannot forge.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path

from evalsi.sandbox import _capture, _cgroup, _profile, _rlimits, _seccomp, _uidpool, _workspace
from evalsi.sandbox._driver import Call, Rung
from evalsi.sandbox._types import ExecResult, Isolation, Level, Outcome, RungReport, SandboxSpec

_SANDBOX_ID = 65534
# Child fd layout: 0 stdin, 1 stdout, 2 bwrap's own stderr, then these.
_FD_PROG_ERR, _FD_SECCOMP = 3, 4
_SHIM = f'exec 2>&{_FD_PROG_ERR} {_FD_PROG_ERR}>&- {_FD_SECCOMP}>&-; exec "$@"'
# With a memory cgroup, the shim (pid 1 inside, before the program exists) moves itself in
# through the group's cgroup.procs bound at _CGROUP_FILE: bwrap's own namespace setup stays
# outside the group (charging it there costs ~5 ms a run) and everything the program forks is
# inside. A failed join is reported on bwrap's pipe, which the program never holds.
_CGROUP_FILE = "/.evalsi-cgroup"
_SHIM_FAILED = "evalsi-shim:"
_JOIN = (
    f"echo $$ > {_CGROUP_FILE} || "
    f"{{ echo '{_SHIM_FAILED} cannot join the memory cgroup' >&2; exit 1; }}; "
)
_BWRAP_CODE = 1  # bwrap exits 1 on its own setup errors
NOT_INSTALLED = "bubblewrap is not installed: apt-get install bubblewrap (Debian/Ubuntu)"
"""The probe's reason when no ``bwrap`` binary is found (it is a system package, not a pip one)."""


class BwrapDriver(Rung):
    """Bubblewrap namespaces + seccomp allow-list + rlimits under a pool uid."""

    name = "bwrap"
    level = Level.NAMESPACED

    def __init__(self, bwrap: str | None = None, *, extra_args: Sequence[str] = ()) -> None:
        """``bwrap`` overrides the binary; ``extra_args`` are appended to the profile (tests
        use them to break the profile on purpose)."""
        self._binary = bwrap
        self._extra = tuple(extra_args)

    @cached_property
    def binary(self) -> str | None:
        return self._binary if self._binary is not None else shutil.which("bwrap")

    @property
    def isolation(self) -> Isolation:
        missing = _cgroup.missing_here()
        if not _workspace.can_bound():
            missing += ("workspace-quota",)
        return Isolation(self.name, self.level, "partial", missing)

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        """Namespaces and seccomp in full; memory and processes by rlimits only (no cgroup)."""
        return self.isolation

    def probe(self) -> RungReport:
        if self.binary is None or not os.access(self.binary, os.X_OK):
            return self.report(False, NOT_INSTALLED)
        try:
            _seccomp.filter_bpf("deny")
        except _seccomp.SeccompUnavailable as exc:
            return self.report(False, f"seccomp filter failed: {exc}")
        try:
            result = self.run_true(SandboxSpec(timeout_seconds=10.0))
        except (OSError, ValueError) as exc:  # e.g. a temp dir sandbox uids cannot reach
            return self.report(False, f"probe could not run: {exc}")
        if result.exit_code == 0:
            return self.report(True)
        detail = result.outcome.detail or result.stderr.decode(errors="replace").strip()
        if "namespace" in detail or "uid map" in detail or "setting up uid" in detail:
            reason = f"user namespaces disabled: {detail}"
        elif "seccomp" in detail:
            reason = f"seccomp filter failed to load: {detail}"
        else:
            reason = f"profile failed on true: {result.outcome.kind} {detail}".strip()
        return self.report(False, reason)

    def command(
        self,
        spec: SandboxSpec,
        argv: Sequence[str],
        *,
        workspace: str = "/workspace",
        env: Mapping[str, str] | None = None,
        cgroup_procs: str | None = None,
    ) -> list[str]:
        """The full bwrap command line for ``argv`` (the workspace is bound from
        ``workspace``; the seccomp program is expected on fd 4; ``env`` over ``spec.env``)."""
        if self.binary is None:
            raise FileNotFoundError("bwrap not found")
        root = str(spec.root) if spec.root is not None else "/"
        cmd = [
            self.binary, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--as-pid-1", "--clearenv", "--cap-drop", "ALL",
            "--uid", str(_SANDBOX_ID), "--gid", str(_SANDBOX_ID), "--hostname", "sandbox",
            "--ro-bind", os.path.join(root, "usr"), "/usr",
        ]  # fmt: skip
        for name in _profile.TOP_LEVEL:
            host = os.path.join(root, name)
            if os.path.islink(host):
                cmd += ["--symlink", os.readlink(host), f"/{name}"]
            elif os.path.isdir(host):
                cmd += ["--ro-bind", host, f"/{name}"]
        cmd += ["--dir", "/etc"]
        for name in _profile.ETC:
            host = os.path.join(root, "etc", name)
            if os.path.exists(host):
                cmd += ["--ro-bind", host, f"/etc/{name}"]
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        tmp = _workspace.private_tmp(Path(workspace))
        if tmp is not None:  # /tmp shares the workspace's bounded tmpfs
            cmd += ["--bind", str(tmp), "/tmp"]
        else:
            if spec.resources.disk_mb is not None:
                cmd += ["--size", str(spec.resources.disk_mb << 20)]
            cmd += ["--tmpfs", "/tmp"]
        for extra in spec.read_only_paths:  # after /tmp, so a tool under /tmp is not hidden
            cmd += ["--ro-bind", str(extra), str(extra)]
        if cgroup_procs is not None:  # before / turns read-only
            cmd += ["--bind", cgroup_procs, _CGROUP_FILE]
        bind = "--ro-bind" if spec.file_access == "read-only" else "--bind"
        cmd += [bind, workspace, "/workspace", "--remount-ro", "/", "--chdir", "/workspace"]
        merged = {**_profile.environ("/workspace"), **spec.env, **(env or {})}
        for key, value in merged.items():
            cmd += ["--setenv", key, value]
        shim = _SHIM if cgroup_procs is None else _JOIN + _SHIM
        cmd += ["--seccomp", str(_FD_SECCOMP), *self._extra]
        cmd += ["--", "/bin/sh", "-c", shim, "sh", *argv]
        return cmd

    def _exec(
        self, spec: SandboxSpec, workspace: Path, argv: Sequence[str], call: Call
    ) -> ExecResult:
        if self.binary is None:
            return call.failed(self.isolation, "bwrap not found")
        try:
            seccomp_fd = _seccomp.filter_fd(spec.network)
        except (_seccomp.SeccompUnavailable, OSError) as exc:
            return call.failed(self.isolation, f"seccomp: {exc}")
        try:
            with _uidpool.acquire(timeout_seconds=max(call.timeout, 10.0)) as slot:
                if slot.switch:
                    _profile.hand_over(workspace, slot.uid, slot.gid)
                    tmp = _workspace.private_tmp(workspace)
                    if tmp is not None:
                        _profile.hand_over(tmp, slot.uid, slot.gid)
                with _cgroup.limits(slot.own_uid, spec.resources) as group:
                    procs = group.procs[0] if group is not None else None
                    ws = str(workspace.resolve())
                    cmd = self.command(spec, argv, workspace=ws, env=call.env, cgroup_procs=procs)
                    return self._run(spec, cmd, slot, group, seccomp_fd, call)
        except TimeoutError as exc:  # every pool uid busy: infrastructure, retried
            return call.failed(self.isolation, f"sandbox busy: {exc}")
        except OSError as exc:  # the cgroup could not be made: never run without it
            return call.failed(self.isolation, f"cgroup: {exc}")
        finally:
            os.close(seccomp_fd)

    def _run(
        self,
        spec: SandboxSpec,
        cmd: list[str],
        slot: _uidpool.Slot,
        group: _cgroup.Group | None,
        seccomp_fd: int,
        call: Call,
    ) -> ExecResult:
        pipes = _capture.Pipes(call.stdin, launcher=True)
        limits = _rlimits.limits_for(spec.resources)
        _occupy_low_fds()

        def child_setup() -> None:  # runs in the forked child, before exec
            high_err = _dup_high(pipes.err_w)
            high_sec = _dup_high(seccomp_fd)
            os.dup2(high_err, _FD_PROG_ERR)
            os.dup2(high_sec, _FD_SECCOMP)
            _rlimits.apply(limits)

        try:
            proc = pipes.spawn(
                cmd,
                stderr=pipes.launcher_w,
                pass_fds=(_FD_PROG_ERR, _FD_SECCOMP),
                preexec_fn=child_setup,
                cwd="/",
                **slot.popen_user(),
            )
        except (OSError, subprocess.SubprocessError) as exc:  # incl. a failing preexec setup
            return call.failed(self.isolation, f"bwrap could not start: {exc}")
        io = pipes.collect(
            proc,
            call.timeout,
            spec.resources.output_bytes,
            pool_uid=slot.own_uid,
            on_output=call.on_output,
        )
        outcome = _classify(io, _rlimits.cpu_limit(spec.resources))
        if group is not None and outcome.kind in ("exit", "denied") and group.oom_killed():
            # the group's total, which no single process exceeded
            outcome = Outcome("resource_exceeded", code=outcome.code, detail="memory")
        return call.result(outcome, self.isolation, io)


def _classify(io: _capture.Captured, cpu_limit: float | None) -> Outcome:
    """Map bwrap's result to an outcome; bwrap reports a child killed by signal N as 128+N.

    Only bwrap's own pipe can carry a runner failure; the program's stderr is never read for
    one."""
    got = io.got
    if (cut := got.cut_short()) is not None:
        return cut
    rc = got.returncode
    bw = bytes(io.launcher.head).decode(errors="replace").strip()
    if bw.startswith(("bwrap:", _SHIM_FAILED)) and rc == _BWRAP_CODE:
        return Outcome("runner_failure", detail=bw.splitlines()[0])
    if rc < 0:  # bwrap itself was killed
        return Outcome("runner_failure", detail=f"bwrap killed by signal {-rc}")
    if rc > 128:
        sig = rc - 128
        if _profile.hit_cpu_limit(sig, got, cpu_limit):
            return Outcome("resource_exceeded", code=-sig, detail="cpu")
        return _profile.killed_by(sig) or Outcome("exit", code=-sig)
    if _profile.out_of_memory(rc, bytes(io.err.head)):
        return Outcome("resource_exceeded", code=rc, detail="memory")
    return Outcome("exit", code=rc)


def _occupy_low_fds() -> None:
    """Keep fds 3 and 4 open in this process (a close-on-exec /dev/null where free).

    The child moves its pipes onto 3 and 4 just before exec; if either were free here,
    subprocess could put its internal exec-error pipe there and the move would clobber it."""
    for target in (_FD_PROG_ERR, _FD_SECCOMP):
        try:
            fcntl.fcntl(target, fcntl.F_GETFD)
        except OSError:
            fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            if fd != target:
                os.dup2(fd, target, inheritable=False)
                os.close(fd)


def _dup_high(fd: int) -> int:
    return fcntl.fcntl(fd, fcntl.F_DUPFD, 100)
