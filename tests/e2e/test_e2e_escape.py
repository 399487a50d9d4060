"""The sandbox escape and abuse suite: every probe on every confining rung, plus a control.

Each probe (``tests/support/escape_probes.py``) is a small program that tries one attack and
prints a JSON verdict; host-side canaries (``tests/support/escape_canaries.py``) record what
reached the host. Every probe runs

* on every rung of ``build_default_ladder()`` that is available here, except ``none``
  (``test_probe_held[<rung>-<probe>]``): the sandbox must hold: no hole claimed by the probe,
  no evidence on the host;
* once unsandboxed, as root, as a control (``test_control_catches[<probe>]``): the control
  must show the hole, otherwise the probe is broken and proves nothing. Controls are bounded
  (200 processes, 1 GiB, 160 MiB into a test directory, 16 MiB of output, short timeouts),
  talk only to loopback canaries, and write only into directories the test made.

Themes and what "held" means for each (a seccomp kill is the outcome ``denied`` and counts as
held wherever a syscall is the attack):

host files
    the 0600 secret file, /etc/shadow, /root, /home, /proc/1/root/<secret> cannot be read.
secrets
    the harness's environment secret is in neither os.environ, /proc/self/environ nor any
    visible /proc/<pid>/environ.
writes outside the workspace
    nothing is created in the host's world-writable canary dir; files in /usr and /etc do
    not open for writing.
symlinks
    a workspace symlink (planted by the host or made inside) or a hard link does not reach
    the host secret, and ``Sandbox.copy_out`` refuses symlinks and FIFOs.
network
    no TCP, UDP, unix-path or abstract unix connection reaches the host's loopback canaries
    (also with ``network="loopback"``, which a rung without a network namespace refuses:
    ``SandboxUnavailable``, nothing runs, held); only ``lo`` is visible.
ptrace
    PTRACE_TRACEME, attaching to a sibling and to a host process, process_vm_readv and
    pidfd_getfd are denied or fail.
tty ioctls
    TIOCSTI and TIOCLINUX are denied (on a pty, /dev/tty0 or any descriptor).
32-bit syscalls
    ``int 0x80`` from a 64-bit process dies with SIGSYS (``denied``).
nested namespaces
    unshare/clone with CLONE_NEWUSER or CLONE_NEWNET, setns and ``unshare -Ur`` fail.
keyrings, io_uring, mount, bpf, perf, kernel modules, reboot, chroot, kernel interfaces
    keyctl, add_key, io_uring_setup, mount, bpf, perf_event_open, init/finit/delete_module,
    reboot, chroot, userfaultfd and open_by_handle_at are denied or refused.
/dev access
    no block device, /dev/kvm or other non-trivial device node opens; mknod fails.
setuid binaries
    no reachable setuid-root binary runs with euid 0.
signals
    SIGKILL to a host victim and kill(-1, SIGKILL) leave it alive; the harness pid is not
    signalable.
/proc leaks
    no host process (nor its /proc/<pid>/maps), host mount point, /proc/kcore or real
    kallsyms address, /sys, writable /proc/sys or /proc/sysrq-trigger is reachable.
shared memory
    the host's /dev/shm and a host SysV segment (found by key) hold the secret; neither is
    reachable.
hostname
    sethostname fails and the host's hostname is unchanged.
read-only workspace
    with ``file_access="read-only"`` nothing in the workspace changes.
cross-sandbox
    a concurrent sandbox's workspace is not readable.
leftovers
    a daemonised child does not outlive the execution; after ``destroy`` the workspace is
    gone and nothing written inside shows on the host.
privileges, descriptors
    no capabilities, no_new_privs set, a seccomp filter active, no inherited descriptors.
resources
    processes, threads, per-process memory, memory summed over processes, disk and inodes in
    the workspace and /tmp, output, descriptors, sleeping and spinning are all bounded (the
    limit, a ``resource_exceeded`` outcome or the wall clock), with nothing left running.

A probe that escapes on a rung is a hole: its test is marked ``xfail(strict=True)`` with the
reason in ``KNOWN_HOLES``, never weakened.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from evalsi.sandbox import (
    ExecResult,
    Ladder,
    Level,
    NoneDriver,
    Resources,
    Sandbox,
    SandboxSpec,
    SandboxUnavailable,
    build_default_ladder,
)
from tests.support.escape_canaries import PYTHON, SECRET_ENV, HostCanaries
from tests.support.escape_probes import (
    BY_NAME,
    CPU_SECONDS,
    DISK_MB,
    FILES,
    MEMORY_MB,
    OPEN_FILES,
    OUTPUT_BYTES,
    PROBES,
    PROCESSES,
    THEMES,
    Probe,
    RunEnv,
)

pytestmark = pytest.mark.skipif(not os.path.exists(PYTHON), reason=f"{PYTHON} is needed")

PARALLEL = 4  # concurrent light probes per rung (each sandbox gets its own pool uid)


def _confining_rungs() -> dict[str, Ladder]:
    """One single-driver ladder per available rung above ``none`` (probed once, here)."""
    ladder = build_default_ladder()
    rungs = {}
    for driver, report in zip(ladder.drivers, ladder.probe_all(), strict=True):
        if report.available and driver.level > Level.NONE:
            rungs[driver.name] = Ladder([driver])
    return rungs


RUNGS = _confining_rungs()

# (rung, probe) → what escapes. Each is a real hole this suite found; the test stays strict,
# so the mark must go when the hole is closed. None is known on this machine (2026-11-30).
KNOWN_HOLES: dict[tuple[str, str], str] = {}


@dataclass
class Verdict:
    hole: bool
    reasons: list[str] = field(default_factory=list)
    error: str | None = None  # the run could not be judged (a runner failure, no verdict line)
    summary: str = ""


def _claim(stdout: bytes) -> dict[str, Any] | None:
    """The probe's last JSON verdict line, if it printed one."""
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict) and "hole" in data:
                    return data
    return None


def _spec(probe: Probe, level: Level) -> SandboxSpec:
    fields: dict[str, Any] = {
        "resources": Resources(
            cpu_seconds=CPU_SECONDS,
            memory_mb=MEMORY_MB,
            processes=PROCESSES,
            disk_mb=DISK_MB,
            files=FILES,
            output_bytes=OUTPUT_BYTES,
            open_files=OPEN_FILES,
        ),
        "timeout_seconds": probe.timeout,
        "min_isolation": level,
    }
    fields.update(probe.spec)
    return SandboxSpec(**fields)


def _context(probe: Probe, host: HostCanaries, token: str) -> dict[str, Any]:
    return {**host.context(), **probe.extra_ctx, "probe": probe.name, "token": token}


def _finish(env: RunEnv) -> None:
    for undo in reversed(env.cleanups):
        with contextlib.suppress(Exception):
            undo()
    shutil.rmtree(env.scratch, ignore_errors=True)


def _describe(result: ExecResult, claim: dict[str, Any] | None) -> str:
    o = result.outcome
    err = result.stderr[-300:].decode(errors="replace").strip()
    return f"outcome={o.kind} code={o.code} detail={o.detail!r} claim={claim} stderr={err!r}"


def run_sandboxed(
    probe: Probe, rung: str, host: HostCanaries, ladder: Ladder | None = None
) -> Verdict:
    ladder = ladder if ladder is not None else RUNGS[rung]
    level = ladder.drivers[0].level
    token = secrets.token_hex(8)
    spec = _spec(probe, level)
    try:
        sandbox = Sandbox.create(spec, ladder=ladder)
    except SandboxUnavailable as exc:
        if not probe.refusal_holds:
            raise
        return _refused(probe, host, token, exc)
    env = RunEnv(
        rung,
        sandbox.workspace,
        host,
        token,
        _context(probe, host, token),
        Path(tempfile.mkdtemp(prefix="evalsi-escape-run-")),
    )
    plain = SandboxSpec(timeout_seconds=20, min_isolation=level)
    env.state["open_sandbox"] = lambda: Sandbox.create(plain, ladder=ladder)
    evidence: str | None = None
    inspected: str | None = None
    refused: SandboxUnavailable | None = None
    result: ExecResult | None = None
    try:
        if probe.prepare is not None:
            probe.prepare(env)
        sandbox.copy_in(probe.source.encode(), "probe.py")
        argv = [PYTHON, "probe.py", json.dumps(env.ctx)]
        try:
            result = sandbox.exec(argv, timeout=probe.timeout)
        except SandboxUnavailable as exc:  # the rung refused this spec: nothing ran
            if not probe.refusal_holds:
                raise
            refused = exc
        if probe.inspect is not None:
            inspected = probe.inspect(env, sandbox)
        if probe.evidence is not None and not probe.evidence_after_destroy:
            evidence = probe.evidence(env)
    finally:
        sandbox.destroy()
        try:
            if probe.evidence is not None and probe.evidence_after_destroy:
                evidence = probe.evidence(env)
        finally:
            _finish(env)
    if result is None:
        return _held_by_refusal(refused, evidence)
    return _judge_sandboxed(probe, result, evidence, inspected)


def _refused(probe: Probe, host: HostCanaries, token: str, exc: SandboxUnavailable) -> Verdict:
    """The rung refused the spec before a sandbox existed: nothing ran; still look at the
    host (a canary that got this run's token would be a hole all the same)."""
    env = RunEnv("refused", Path("/nonexistent"), host, token, _context(probe, host, token),
                 Path(tempfile.mkdtemp(prefix="evalsi-escape-run-")))  # fmt: skip
    try:
        evidence = probe.evidence(env) if probe.evidence is not None else None
    finally:
        _finish(env)
    return _held_by_refusal(exc, evidence)


def _held_by_refusal(exc: SandboxUnavailable | None, evidence: str | None) -> Verdict:
    summary = f"held: refused: {exc}"
    if evidence:
        return Verdict(True, [f"host: {evidence}"], summary=summary)
    return Verdict(False, summary=summary)


def _judge_sandboxed(
    probe: Probe, result: ExecResult, evidence: str | None, inspected: str | None
) -> Verdict:
    claim = _claim(result.stdout)
    summary = _describe(result, claim)
    kind = result.outcome.kind
    reasons: list[str] = []
    if kind == "runner_failure":
        return Verdict(False, error=f"runner failure: {result.outcome.detail}", summary=summary)
    if probe.judge == "flood":
        sizes = (len(result.stdout), len(result.stderr))
        if max(sizes) > OUTPUT_BYTES:
            reasons.append(f"output over the cap: stdout/stderr {sizes} > {OUTPUT_BYTES}")
        flagged = kind == "resource_exceeded" or result.stdout_truncated or result.stderr_truncated
        if not flagged:
            reasons.append("the flood was neither cut nor reported")
    elif claim is None:
        killed = kind == "exit" and result.outcome.code == -9 and probe.held_by_sigkill
        if kind not in probe.held_outcomes and not killed:
            return Verdict(False, error=f"no verdict line and outcome {kind}", summary=summary)
    elif claim["hole"] and probe.trust_claim:
        reasons.append(f"probe: {claim.get('detail')}")
    if evidence:
        reasons.append(f"host: {evidence}")
    if inspected:
        reasons.append(f"copies: {inspected}")
    return Verdict(bool(reasons), reasons, summary=summary)


def run_control(probe: Probe, host: HostCanaries) -> Verdict:
    """The probe as a plain root subprocess (no sandbox): it must catch its own hole."""
    token = secrets.token_hex(8)
    workspace = Path(tempfile.mkdtemp(prefix="evalsi-escape-control-"))
    env = RunEnv(
        "control",
        workspace,
        host,
        token,
        _context(probe, host, token),
        Path(tempfile.mkdtemp(prefix="evalsi-escape-run-")),
    )
    env.cleanups.append(lambda: shutil.rmtree(workspace, ignore_errors=True))
    alive = False
    try:
        if probe.prepare is not None:
            probe.prepare(env)
        (workspace / "probe.py").write_text(probe.source)
        proc = subprocess.Popen(
            [PYTHON, "probe.py", json.dumps(env.ctx)],
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=env.pass_fds,
            start_new_session=True,
        )
        try:
            try:
                out, err = proc.communicate(timeout=probe.control_timeout)
            except subprocess.TimeoutExpired:
                alive = proc.poll() is None
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        evidence = probe.evidence(env) if probe.evidence is not None else None
    finally:
        _finish(env)
    claim = _claim(out)
    summary = (
        f"rc={proc.returncode} alive_at_timeout={alive} claim={claim} "
        f"stdout={len(out)}B stderr={err[-300:].decode(errors='replace')!r} evidence={evidence}"
    )
    if probe.control_alive_is_hole:
        caught = alive
    elif probe.judge == "flood":
        caught = max(len(out), len(err)) > OUTPUT_BYTES
    else:
        caught = claim is not None and bool(claim["hole"])
    if probe.evidence is not None and probe.control_needs_evidence and evidence is None:
        caught = False
    return Verdict(caught, summary=summary)


class Runs:
    """Every probe's verdict per rung and for the control, computed on first use: light probes
    in parallel, heavy ones (memory, disk, processes) one at a time."""

    def __init__(self, host: HostCanaries) -> None:
        self.host = host
        self._lock = threading.Lock()
        self._rungs: dict[str, dict[str, Verdict]] = {}
        self._control: dict[str, Verdict] | None = None

    def _all(self, run: Any) -> dict[str, Verdict]:
        def safe(probe: Probe) -> tuple[str, Verdict]:
            try:
                return probe.name, run(probe)
            except Exception as exc:  # noqa: BLE001 - one broken run must not hide the others
                return probe.name, Verdict(False, error=f"{type(exc).__name__}: {exc}")

        light = [p for p in PROBES if not p.heavy]
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            out = dict(pool.map(safe, light))
        out.update(safe(p) for p in PROBES if p.heavy)
        return out

    def sandboxed(self, rung: str) -> dict[str, Verdict]:
        with self._lock:
            if rung not in self._rungs:
                self._rungs[rung] = self._all(lambda p: run_sandboxed(p, rung, self.host))
            return self._rungs[rung]

    def control(self) -> dict[str, Verdict]:
        with self._lock:
            if self._control is None:
                self._control = self._all(lambda p: run_control(p, self.host))
            return self._control


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    if os.geteuid() != 0:
        # The controls need root's powers (setuid-root canary, /etc/shadow, ptrace, ...).
        pytest.skip("the escape suite's controls run as root; this user is not root")
    with HostCanaries() as host:
        old = os.environ.get(SECRET_ENV)
        os.environ[SECRET_ENV] = host.env_secret
        try:
            yield Runs(host)
        finally:
            if old is None:
                os.environ.pop(SECRET_ENV, None)
            else:
                os.environ[SECRET_ENV] = old


def _probe_params() -> list[Any]:
    params = []
    for rung in RUNGS:
        for probe in PROBES:
            marks = []
            hole = KNOWN_HOLES.get((rung, probe.name))
            if hole is not None:
                marks.append(pytest.mark.xfail(strict=True, reason=f"HOLE: {hole}"))
            params.append(pytest.param(rung, probe.name, id=f"{rung}-{probe.name}", marks=marks))
    return params


def test_a_confining_rung_is_available() -> None:
    if not RUNGS:
        pytest.skip(
            "SKIPPED: no sandbox rung above `none` works on this machine, so no probe can run "
            "confined (see `evalsi sandbox probe`)"
        )
    assert "none" not in RUNGS


@pytest.mark.parametrize(("rung", "name"), _probe_params())
def test_probe_held(runs: Runs, rung: str, name: str) -> None:
    verdict = runs.sandboxed(rung)[name]
    assert verdict.error is None, (
        f"{name} on {rung} could not be judged: {verdict.error}; {verdict.summary}"
    )
    assert not verdict.hole, (
        f"ESCAPE: {name} on {rung}: {'; '.join(verdict.reasons)} ({verdict.summary})"
    )


@pytest.mark.parametrize("name", [p.name for p in PROBES])
def test_control_catches(runs: Runs, name: str) -> None:
    verdict = runs.control()[name]
    assert verdict.error is None, f"control of {name} could not run: {verdict.error}"
    assert verdict.hole, (
        f"broken probe: unsandboxed, {name} did not detect its hole ({verdict.summary})"
    )


# Probes whose hole the judge must see through each of its channels: the probe's claim, host
# evidence (a file, a canary token, a dead victim, a surviving daemon).
_JUDGE_CHECKS = [
    "read-host-secret",
    "write-host-tmp",
    "tcp-loopback",
    "kill-host-process",
    "leftover-daemon",
]


@pytest.mark.parametrize("name", _JUDGE_CHECKS)
def test_judge_sees_holes_on_the_none_rung(runs: Runs, name: str) -> None:
    """The sandbox-side judging can fail: through the ``none`` rung (no confinement), the
    same harness that runs the rungs reports these probes as holes."""
    ladder = Ladder([NoneDriver()])
    verdict = run_sandboxed(BY_NAME[name], "none", runs.host, ladder)
    assert verdict.error is None, verdict.error
    assert verdict.hole, f"the judge missed an open hole on the none rung: {verdict.summary}"


def test_suite_size_and_controls() -> None:
    names = [p.name for p in PROBES]
    assert len(names) >= 40, f"only {len(names)} probes"
    assert len(set(names)) == len(names)
    assert set(BY_NAME) == set(names)
    for probe in PROBES:
        assert probe.held, probe.name
        assert probe.theme, probe.name
        assert "def main" in probe.body, probe.name
    doc = __doc__ or ""
    missing = [theme for theme in THEMES if theme not in doc]
    assert not missing, f"themes not described in the module docstring: {missing}"
