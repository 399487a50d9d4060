"""The ``vm`` rung: each exec boots a Firecracker microVM, behind a real boot probe.

Per exec: an ext4 job drive is built with ``mke2fs -d`` (the workspace, the job description
with a random nonce, the guest init; see ``_vmjob``), a VM config is written (the configured
kernel; the configured rootfs as the read-only root drive, the job drive writable; vCPUs and
memory; **no network interface at all**, so ``network: deny`` holds by construction, and
``loopback`` only brings the guest's own ``lo`` up), and ``firecracker --no-api --config-file``
runs under the wall clock. The guest init (``_vmguest``) runs the program as uid 65534 with
``no_new_privs`` and rlimits, relays its output as nonce-tagged records on the serial console,
unmounts the job drive and reboots, which ends Firecracker. The host parses the console
(``_vmjob.SerialParser``), classifies the result and copies the workspace back out of the
image by inode with ``debugfs`` (never following a symlink). ``probe`` boots a canary VM
running ``true`` and requires exit 0 within the boot timeout: an openable ``/dev/kvm`` alone
proves nothing (here a Linux guest hangs under the nested KVM).

What has run here (``tests/unit/sandbox/test_sandbox_firecracker.py``): config parsing, the
probe's checks, the VM config, the job image build and read-back with the real
``mke2fs``/``debugfs``, the serial protocol against the real guest supervisor and child setup
(uid drop, ``no_new_privs``, rlimits) run as ordinary host processes, the classification, and
the whole exec path against fake ``firecracker`` scripts: one hangs (the boot timer kills it),
one fails, one plays the guest by reading the nonce and the init out of the job image the
driver built and running that init's supervisor.
What has never run: a real Firecracker. No binary is installable on this machine (not in apt,
PyPI or npm) and Linux guests hang under its KVM, so this rung reports itself unavailable
here. The guest side (the bootstrap on the kernel command line, devtmpfs, the mounts, the
reboot) is written against the kernel's and Firecracker's documented behaviour but unverified.

Hardening not done: Firecracker runs without its ``jailer`` (no chroot, cgroup or uid drop of
the VMM process itself); the VM boundary and Firecracker's own seccomp filters are the wall.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import signal
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from evalsi.sandbox import _capture, _profile
from evalsi.sandbox._driver import Call, Rung
from evalsi.sandbox._types import ExecResult, Isolation, Level, Outcome, RungReport, SandboxSpec
from evalsi.sandbox._vmjob import (
    JobImageError,
    SerialParser,
    bootstrap,
    build_job_image,
    job_description,
    read_back,
    replace_tree,
    tools_missing,
)

NO_CONFIG = "no firecracker binary configured (sandbox.firecracker.binary in evalsi.yaml)"
KERNEL_ARGS = "console=ttyS0 reboot=k panic=1 pci=off quiet loglevel=1 random.trust_cpu=on"
GUEST_OVERHEAD_MB = 64  # the guest kernel and init, on top of the program's memory
DEFAULT_MEMORY_MB = 512
_LAUNCHER_STDERR_CAP = 1 << 16
LOG_NAME = "firecracker.log"
_REPORT_GRACE_SECONDS = 5.0  # after the program's wall clock: kill leftovers, unmount, reboot
_KEYS = ("binary", "kernel", "rootfs", "vcpus", "memory_mb", "boot_timeout_seconds", "guest_python")


@dataclass(frozen=True, slots=True)
class FirecrackerConfig:
    """Where Firecracker and its guest come from (``sandbox.firecracker`` in evalsi.yaml).

    ``kernel`` is an uncompressed ``vmlinux`` with virtio-mmio command-line devices
    (``CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES``), virtio-blk, ext4, devtmpfs and tmpfs; ``rootfs``
    an ext4 image with ``/bin/sh``, ``guest_python`` (3.9 or later) and the empty directories
    ``/dev``, ``/proc``, ``/run`` and ``/tmp`` (it is mounted read-only; an empty
    ``/workspace`` in it gives programs the same working directory as other rungs, else they
    run in ``/run/job/workspace``). ``memory_mb`` None: the spec's memory limit plus the
    guest's overhead."""

    binary: Path
    kernel: Path
    rootfs: Path
    vcpus: int = 1
    memory_mb: int | None = None
    boot_timeout_seconds: float = 10.0
    guest_python: str = "/usr/bin/python3"

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], where: str = "sandbox.firecracker") -> Self:
        """Validate a parsed YAML mapping; ``ValueError`` names the key and what it expects."""
        if not isinstance(d, Mapping):
            raise ValueError(f"{where}: expected a mapping with binary, kernel, rootfs")
        unknown = sorted(str(k) for k in d if k not in _KEYS)
        if unknown:
            raise ValueError(
                f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})"
            )
        binary, kernel, rootfs = (_path(d, key, where) for key in ("binary", "kernel", "rootfs"))
        vcpus = d.get("vcpus", 1)
        if isinstance(vcpus, bool) or not isinstance(vcpus, int) or not 1 <= vcpus <= 32:
            raise ValueError(f"{where}.vcpus: expected an integer from 1 to 32, got {vcpus!r}")
        memory = d.get("memory_mb")
        if memory is not None and (
            isinstance(memory, bool) or not isinstance(memory, int) or memory < 128
        ):
            raise ValueError(f"{where}.memory_mb: expected an integer ≥ 128 (MiB), got {memory!r}")
        boot = d.get("boot_timeout_seconds", 10.0)
        if isinstance(boot, bool) or not isinstance(boot, int | float) or not 0 < boot <= 600:
            raise ValueError(
                f"{where}.boot_timeout_seconds: expected a number of seconds in (0, 600], "
                f"got {boot!r}"
            )
        python = d.get("guest_python", "/usr/bin/python3")
        if not isinstance(python, str) or not python.startswith("/") or _unsafe_arg(python):
            raise ValueError(
                f"{where}.guest_python: expected an absolute path without spaces or quotes "
                f"inside the guest, got {python!r}"
            )
        return cls(binary, kernel, rootfs, vcpus, memory, float(boot), python)


def _path(d: Mapping[str, Any], key: str, where: str) -> Path:
    value = d.get(key)
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ValueError(f"{where}.{key}: expected a non-empty path string, got {value!r}")
    try:
        return Path(value).expanduser()
    except RuntimeError:  # ~user with no such user
        raise ValueError(f"{where}.{key}: {value!r} names no home directory here") from None


def _unsafe_arg(s: str) -> bool:
    return any(c.isspace() or c in "\"'\\" for c in s) or "--" in s


def boot_args(config: FirecrackerConfig) -> str:
    """The kernel command line: serial console, reboot ends Firecracker, panic reboots after
    1 s, no PCI, a quiet kernel log (less noise on the serial protocol), then the init."""
    return f"{KERNEL_ARGS} {bootstrap(config.guest_python)}"


def vm_config(
    config: FirecrackerConfig, spec: SandboxSpec, rootfs: Path, job_image: Path
) -> dict[str, Any]:
    """Firecracker's JSON config for one exec. No ``network-interfaces`` for any spec: the
    guest has no NIC (its loopback is internal to it)."""
    memory = config.memory_mb
    if memory is None:
        memory = (spec.resources.memory_mb or DEFAULT_MEMORY_MB) + GUEST_OVERHEAD_MB
    return {
        "boot-source": {"kernel_image_path": str(config.kernel), "boot_args": boot_args(config)},
        "drives": [_drive("rootfs", rootfs, root=True), _drive("job", job_image, root=False)],
        "machine-config": {"vcpu_count": config.vcpus, "mem_size_mib": memory, "smt": False},
    }


def _drive(name: str, path: Path, *, root: bool) -> dict[str, Any]:
    """The root drive is read-only; the job drive is the one the guest writes."""
    return {"drive_id": name, "path_on_host": str(path), "is_root_device": root,
            "is_read_only": root}  # fmt: skip


def guest_limits(spec: SandboxSpec) -> dict[str, int | None]:
    res = spec.resources
    return {
        "cpu": None if res.cpu_seconds is None else max(1, math.ceil(res.cpu_seconds)),
        "nproc": res.processes,  # the sandbox uid owns nothing else in the guest
        "nofile": res.open_files,
        "fsize": None if res.disk_mb is None else res.disk_mb << 20,
        "tmp_mb": res.disk_mb,
    }


class FirecrackerDriver(Rung):
    """One microVM per exec; available only after a canary VM ran ``true``."""

    name = "firecracker"
    level = Level.VM

    def __init__(self, config: FirecrackerConfig | None, *, kvm_device: str = "/dev/kvm") -> None:
        """``kvm_device`` is for tests (a path that cannot be opened read-write)."""
        self.config = config
        self.kvm_device = kvm_device

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        """A VM boundary; memory by the VM's size, cpu/processes/files by rlimits inside,
        disk by the job drive's and /tmp's size, network by the absence of any NIC."""
        if spec.root is not None and not spec.root.is_file():
            return Isolation(self.name, self.level, "partial", ("root-directory",))
        return Isolation(self.name, self.level, "full")

    def probe(self) -> RungReport:
        reason = self._static_reason()
        if reason:
            return self.report(False, reason)
        assert self.config is not None
        boot = self.config.boot_timeout_seconds
        spec = SandboxSpec(timeout_seconds=boot, min_isolation=Level.VM)
        result = self.run_true(spec, "evalsi-fc-probe-")
        outcome = result.outcome
        if result.exit_code == 0:
            return self.report(True)
        if outcome.detail.startswith("guest did not boot"):
            reason = f"canary VM did not boot within {boot:g} s"
        else:
            reason = f"canary VM failed on true: {outcome.kind} {outcome.detail}".strip()
        return self.report(False, reason)

    def _static_reason(self) -> str:
        c = self.config
        if c is None:
            return NO_CONFIG
        if not c.binary.is_file():
            return f"firecracker binary {c.binary} not found"
        if not os.access(c.binary, os.X_OK):
            return f"firecracker binary {c.binary} is not executable"
        if not c.kernel.is_file():
            return f"guest kernel {c.kernel} not found"
        if not c.rootfs.is_file():
            return f"guest rootfs {c.rootfs} not found"
        missing = tools_missing()
        if missing:
            return f"{', '.join(missing)} not found (install e2fsprogs)"
        try:
            fd = os.open(self.kvm_device, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            return f"{self.kvm_device} cannot be opened read-write: {e.strerror}"
        os.close(fd)
        return ""

    def _exec(
        self, spec: SandboxSpec, workspace: Path, argv: Sequence[str], call: Call
    ) -> ExecResult:
        isolation = self.isolation_for(spec)
        config = self.config
        if config is None:
            return call.failed(isolation, NO_CONFIG)
        rootfs = config.rootfs
        if spec.root is not None:
            if not spec.root.is_file():
                return call.failed(
                    isolation,
                    f"firecracker: spec.root {spec.root} is not an ext4 image file "
                    "(an unpacked directory cannot be a VM's root drive)",
                )
            rootfs = spec.root
        merged = call.environ(spec, _profile.environ("/workspace"))
        nonce = secrets.token_hex(16)
        job = job_description(
            nonce=nonce,
            argv=argv,
            env=merged,
            timeout_seconds=call.timeout,
            output_bytes=spec.resources.output_bytes,
            limits=guest_limits(spec),
            network=spec.network,
            read_only=spec.file_access == "read-only",
            has_stdin=call.stdin is not None,
        )
        with tempfile.TemporaryDirectory(prefix="evalsi-fc-") as tmp_name:
            tmp = Path(tmp_name)
            image = tmp / "job.ext4"
            try:
                disk_mb = spec.resources.disk_mb or 64
                build_job_image(image, tmp / "staging", workspace, job, call.stdin, disk_mb)
            except (JobImageError, OSError) as e:
                return call.failed(isolation, f"job image: {e}")
            cfg = tmp / "vm.json"
            cfg.write_text(json.dumps(vm_config(config, spec, rootfs, image), indent=2))
            run = self._boot(config, cfg, tmp, nonce, spec, call)
            if isinstance(run, str):
                return call.failed(isolation, run)
            got, parser, booted_out, launcher = run
            outcome = classify(got, parser, booted_out, launcher, config.boot_timeout_seconds)
            log_tail = _tail(tmp / LOG_NAME) if outcome.kind == "runner_failure" else b""
            if (
                outcome.kind != "runner_failure"
                and spec.file_access == "workspace-write"
                and parser.exit_report is not None
            ):
                problem = _write_back(image, tmp, workspace, parser.exit_report)
                if problem:
                    outcome = Outcome("runner_failure", detail=problem)
        report = parser.exit_report or {}
        dropped = report.get("dropped") or [0, 0]
        stderr = bytes(parser.stderr)
        if outcome.kind == "runner_failure":  # what Firecracker and the console last said
            stderr = bytes(launcher.head) + log_tail + bytes(parser.noise) + stderr
        out_cut = parser.dropped["stdout"] > 0 or _positive(dropped, 0)
        err_cut = parser.dropped["stderr"] > 0 or _positive(dropped, 1)
        out = bytes(parser.stdout)
        return ExecResult(outcome, out, stderr, call.elapsed_ms(), isolation, out_cut, err_cut)

    def _boot(
        self,
        config: FirecrackerConfig,
        cfg: Path,
        tmp: Path,
        nonce: str,
        spec: SandboxSpec,
        call: Call,
    ) -> tuple[_capture.Collected, SerialParser, bool, _capture.Stream] | str:
        """Run Firecracker and collect its console; a string is a runner failure."""
        cap = spec.resources.output_bytes
        parser = SerialParser(nonce, cap, call.on_output)
        pipes = _capture.Pipes(None)
        # Its log goes to a file: on the console it could split a record line in two.
        log = tmp / LOG_NAME
        log.touch(mode=0o600)
        cmd = [str(config.binary), "--no-api", "--config-file", str(cfg)]
        cmd += ["--log-path", str(log), "--level", "Warning"]
        try:
            proc = pipes.spawn(cmd, cwd=tmp, env={"PATH": _profile.PATH})
        except OSError as e:
            return f"firecracker could not start: {e}"
        try:
            pidfd = os.pidfd_open(proc.pid)  # kills by pidfd never hit a reused pid
        except OSError as e:
            pipes.close()
            _capture.kill_group(proc)
            proc.wait()
            return f"pidfd_open failed (Linux 5.3 or later is needed): {e}"
        booted_out = threading.Event()

        def boot_expired() -> None:
            if not parser.started:
                booted_out.set()
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)

        timer = threading.Timer(config.boot_timeout_seconds, boot_expired)
        timer.daemon = True

        def feed(stream: str, chunk: bytes) -> None:
            if stream == "stdout":
                parser.feed(chunk)

        # The console carries base64 (4/3) of both streams, record framing and kernel noise.
        serial_cap = (2 * cap * 4) // 3 + (2 * cap // 768 + 64) * 64 + (1 << 20)
        wall = config.boot_timeout_seconds + call.timeout + _REPORT_GRACE_SECONDS
        timer.start()
        try:
            io = pipes.collect(
                proc,
                wall,
                serial_cap,
                err_cap=_LAUNCHER_STDERR_CAP,
                end_group_on_exit=True,
                on_output=feed,
            )
        finally:
            timer.cancel()
            timer.join()
            os.close(pidfd)
        parser.finish()
        return io.got, parser, booted_out.is_set(), io.err


def classify(
    got: _capture.Collected,
    parser: SerialParser,
    booted_out: bool,
    launcher: _capture.Stream,
    boot_timeout: float,
) -> Outcome:
    """The outcome of one VM run: the guest's exit record when there is a trustworthy one,
    else the signature of what broke (each a runner failure, retried and never scored)."""
    if booted_out:
        return Outcome("runner_failure", detail=f"guest did not boot within {boot_timeout:g} s")
    report = parser.exit_report
    if report is not None:
        return _from_report(report)
    if parser.init_failure is not None:
        return Outcome("runner_failure", detail=f"guest init failed: {parser.init_failure}")
    if got.flooded:
        return Outcome("resource_exceeded", detail="output")
    if got.timed_out:
        if parser.started:
            return Outcome("timeout")
        return Outcome("runner_failure", detail=f"guest did not boot within {boot_timeout:g} s")
    if parser.panic is not None:
        return Outcome("runner_failure", detail=f"kernel panic: {parser.panic}")
    if parser.corrupt is not None:
        return Outcome("runner_failure", detail=f"guest transcript corrupted: {parser.corrupt}")
    if got.returncode != 0:
        return Outcome(
            "runner_failure",
            detail=f"firecracker exited {got.returncode}: {_first_error(launcher)}".rstrip(": "),
        )
    return Outcome("runner_failure", detail="guest did not report")


def _from_report(report: Mapping[str, Any]) -> Outcome:
    code = int(report["code"])
    if report.get("setup_error"):
        return Outcome(
            "runner_failure", detail=f"guest child setup failed: {report['setup_error']}"
        )
    if report.get("timeout"):
        return Outcome("timeout")
    if report.get("flooded"):
        return Outcome("resource_exceeded", code=code, detail="output")
    if report.get("oom"):
        return Outcome("resource_exceeded", code=code, detail="memory")
    if report.get("cpu"):
        return Outcome("resource_exceeded", code=code, detail="cpu")
    if report.get("fsize") or report.get("nospace"):
        return Outcome("resource_exceeded", code=code, detail="disk")
    return Outcome("exit", code=code)


def _first_error(launcher: _capture.Stream) -> str:
    lines = [ln.strip() for ln in bytes(launcher.head).decode(errors="replace").splitlines()]
    lines = [ln for ln in lines if ln]
    return next((ln for ln in lines if ln.startswith("Error")), lines[0] if lines else "")[:300]


def _write_back(image: Path, tmp: Path, workspace: Path, report: Mapping[str, Any]) -> str:
    """Copy the guest's workspace into ``workspace``; a non-empty return is the failure."""
    if not report.get("unmounted"):
        return "guest did not release the job drive (workspace not copied back)"
    try:
        read_back(image, tmp / "back", tmp / "scratch")
        replace_tree(workspace, tmp / "back")
    except (JobImageError, OSError) as e:
        return f"write-back failed: {e}"
    return ""


def _tail(path: Path, size: int = 4096) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(max(os.fstat(f.fileno()).st_size - size, 0))
            return f.read(size)
    except OSError:
        return b""


def _positive(values: Any, index: int) -> bool:
    try:
        return int(values[index]) > 0
    except (TypeError, ValueError, IndexError):
        return False


def firecracker_rung(config: FirecrackerConfig | None = None) -> FirecrackerDriver:
    """The vm rung for the ladder; without a config its probe says what to configure."""
    return FirecrackerDriver(config)
