"""The Firecracker (vm) rung, as far as this machine allows.

No firecracker binary exists here and Linux guests hang under this machine's KVM, so the rung
must report itself unavailable. What is tested for real: config validation, every probe
reason, the VM config and kernel command line, the job image built and read back with the
real mke2fs/debugfs, the serial protocol against the real guest init code run as a host
process, the classification, and the driver's whole exec path against fake ``firecracker``
scripts (one hangs like this machine's KVM, one fails, one plays the guest: it reads the nonce
and the init out of the job image the driver built and runs that init's supervisor).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalsi.sandbox import _capture, _vmguest, _vmjob
from evalsi.sandbox._firecracker import (
    NO_CONFIG,
    FirecrackerConfig,
    FirecrackerDriver,
    boot_args,
    classify,
    firecracker_rung,
    vm_config,
)
from evalsi.sandbox._ladder import Ladder
from evalsi.sandbox._types import Level, Resources, SandboxSpec, SandboxUnavailable

NEEDS_E2FS = pytest.mark.skipif(
    bool(_vmjob.tools_missing()), reason="e2fsprogs (mke2fs, debugfs) not installed"
)
NONCE = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def guest_files(tmp: Path) -> FirecrackerConfig:
    """A config whose kernel and rootfs exist (contents irrelevant to a fake firecracker)."""
    for name in ("vmlinux", "rootfs.ext4"):
        (tmp / name).write_bytes(b"\0" * 16)
    fc = tmp / "firecracker"
    fc.write_text("#!/bin/sh\nexit 0\n")
    fc.chmod(0o755)
    return FirecrackerConfig(fc, tmp / "vmlinux", tmp / "rootfs.ext4", boot_timeout_seconds=5)


@pytest.fixture
def kvm(tmp: Path) -> str:
    """A stand-in for /dev/kvm that opens read-write (the fakes never touch it)."""
    path = tmp / "kvm"
    path.write_bytes(b"")
    return str(path)


# --- config ---------------------------------------------------------------------------------


def test_config_from_mapping_defaults_and_values() -> None:
    c = FirecrackerConfig.from_mapping({"binary": "/b/fc", "kernel": "/k", "rootfs": "/r"})
    assert c == FirecrackerConfig(Path("/b/fc"), Path("/k"), Path("/r"))
    assert (c.vcpus, c.memory_mb, c.boot_timeout_seconds) == (1, None, 10.0)
    c2 = FirecrackerConfig.from_mapping(
        {
            "binary": "/b/fc",
            "kernel": "/k",
            "rootfs": "/r",
            "vcpus": 2,
            "memory_mb": 1024,
            "boot_timeout_seconds": 3,
            "guest_python": "/usr/local/bin/python3.12",
        }
    )
    assert (c2.vcpus, c2.memory_mb, c2.boot_timeout_seconds) == (2, 1024, 3.0)
    assert c2.guest_python == "/usr/local/bin/python3.12"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"binary": None}, "sandbox.firecracker.binary: expected a non-empty path string"),
        ({"kernel": ""}, "sandbox.firecracker.kernel: expected a non-empty path string"),
        ({"rootfs": 5}, "sandbox.firecracker.rootfs: expected a non-empty path string"),
        ({"vcpus": 0}, "sandbox.firecracker.vcpus: expected an integer from 1 to 32"),
        ({"vcpus": True}, "sandbox.firecracker.vcpus: expected an integer"),
        ({"vcpus": "2"}, "sandbox.firecracker.vcpus: expected an integer"),
        ({"memory_mb": 64}, "sandbox.firecracker.memory_mb: expected an integer ≥ 128"),
        ({"memory_mb": 1.5}, "sandbox.firecracker.memory_mb"),
        ({"boot_timeout_seconds": 0}, "sandbox.firecracker.boot_timeout_seconds: expected"),
        ({"boot_timeout_seconds": float("inf")}, "boot_timeout_seconds"),
        ({"boot_timeout_seconds": "10"}, "boot_timeout_seconds"),
        ({"guest_python": "python3"}, "sandbox.firecracker.guest_python: expected an absolute"),
        ({"guest_python": "/usr/bin/my python"}, "guest_python"),
        ({"guest_python": "/x--y"}, "guest_python"),
        ({"network": "tap0"}, "sandbox.firecracker: unknown key(s) network"),
    ],
)
def test_config_rejects_bad_values_naming_the_key(patch: dict[str, Any], message: str) -> None:
    d: dict[str, Any] = {"binary": "/b/fc", "kernel": "/k", "rootfs": "/r", **patch}
    with pytest.raises(ValueError, match=re.escape(message)):
        FirecrackerConfig.from_mapping(d, "sandbox.firecracker")


def test_config_rejects_a_non_mapping() -> None:
    with pytest.raises(ValueError, match=r"evalsi\.yaml: sandbox\.firecracker: expected a mapping"):
        FirecrackerConfig.from_mapping(["binary"], "evalsi.yaml: sandbox.firecracker")  # type: ignore[arg-type]


# --- probe reasons --------------------------------------------------------------------------


def test_default_rung_without_config_is_unavailable_with_the_reason() -> None:
    driver = firecracker_rung()
    report = driver.probe()
    assert (report.driver, report.level, report.available) == ("firecracker", Level.VM, False)
    assert report.reason == NO_CONFIG
    result = driver.exec(SandboxSpec(min_isolation=Level.VM), Path("/nonexistent"), ["true"])
    assert result.outcome.kind == "runner_failure"
    assert result.outcome.detail == NO_CONFIG


def test_ladder_of_only_this_rung_fails_closed() -> None:
    ladder = Ladder([firecracker_rung(None)])
    with pytest.raises(SandboxUnavailable) as e:
        ladder.choose(Level.VM)
    assert f"firecracker (vm): {NO_CONFIG}" in str(e.value)
    with pytest.raises(SandboxUnavailable):
        ladder.choose(Level.NONE)  # no weaker rung to fall back to, whatever the minimum


def test_probe_reason_for_each_missing_piece(
    guest_files: FirecrackerConfig, tmp: Path, kvm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reason(config: FirecrackerConfig, kvm_device: str = kvm) -> str:
        report = FirecrackerDriver(config, kvm_device=kvm_device).probe()
        assert not report.available
        return report.reason

    c = guest_files
    missing = tmp / "nope"
    assert reason(_with(c, binary=missing)) == f"firecracker binary {missing} not found"
    plain = tmp / "plain"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    if os.geteuid() != 0 or not os.access(plain, os.X_OK):  # root may execute anything
        assert reason(_with(c, binary=plain)) == f"firecracker binary {plain} is not executable"
    assert reason(_with(c, kernel=missing)) == f"guest kernel {missing} not found"
    assert reason(_with(c, rootfs=missing)) == f"guest rootfs {missing} not found"
    assert reason(c, kvm_device=str(missing)) == (
        f"{missing} cannot be opened read-write: No such file or directory"
    )
    monkeypatch.setenv("PATH", str(tmp / "empty-path"))
    monkeypatch.setattr(_vmjob, "_SBIN", ())
    assert reason(c) == "mke2fs, debugfs not found (install e2fsprogs)"


def test_real_kvm_alone_never_makes_the_rung_available(
    guest_files: FirecrackerConfig, tmp: Path
) -> None:
    """Even where /dev/kvm opens, a binary that boots nothing leaves the rung unavailable."""
    fake = _fake(tmp, "exit0", "#!/bin/sh\nexit 0\n")
    report = FirecrackerDriver(_with(guest_files, binary=fake)).probe()
    assert not report.available
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert report.reason == "canary VM failed on true: runner_failure guest did not report"


# --- VM config and kernel command line ------------------------------------------------------


def test_vm_config_has_read_only_root_writable_job_and_no_network(
    guest_files: FirecrackerConfig,
) -> None:
    for network in ("deny", "loopback"):
        spec = SandboxSpec(network=network, resources=Resources(memory_mb=256))
        cfg = vm_config(guest_files, spec, guest_files.rootfs, Path("/t/job.ext4"))
        assert set(cfg) == {"boot-source", "drives", "machine-config"}  # no network-interfaces
        assert "network" not in json.dumps(cfg)
        assert cfg["drives"] == [
            {
                "drive_id": "rootfs",
                "path_on_host": str(guest_files.rootfs),
                "is_root_device": True,
                "is_read_only": True,
            },
            {
                "drive_id": "job",
                "path_on_host": "/t/job.ext4",
                "is_root_device": False,
                "is_read_only": False,
            },
        ]
        assert cfg["machine-config"] == {"vcpu_count": 1, "mem_size_mib": 256 + 64, "smt": False}
        assert cfg["boot-source"]["kernel_image_path"] == str(guest_files.kernel)
    fixed = _with(guest_files, memory_mb=2048, vcpus=2)
    cfg = vm_config(fixed, SandboxSpec(), fixed.rootfs, Path("/j"))
    assert cfg["machine-config"] == {"vcpu_count": 2, "mem_size_mib": 2048, "smt": False}


def test_boot_args_pass_a_bootstrap_the_kernel_cannot_split(
    guest_files: FirecrackerConfig,
) -> None:
    args = boot_args(guest_files)
    params, _, init_args = args.partition(" -- ")
    assert params.split()[:4] == ["console=ttyS0", "reboot=k", "panic=1", "pci=off"]
    assert params.endswith("init=/usr/bin/python3")
    # Firecracker puts its own parameters before the only "--"; the kernel splits on spaces
    # and understands double quotes: the init's arguments must have neither.
    assert args.count("--") == 1
    flag, code = init_args.split(" ")
    assert flag == "-c"
    assert '"' not in code
    compile(code, "<cmdline>", "exec")
    packed = code.split("'")[3]
    inner = base64.b64decode(packed).decode()
    assert "b'/dev/vdb',b'/run/job',b'ext4',6" in inner  # nosuid|nodev
    assert "'/run/job/.evalsi/init.py'" in inner
    compile(inner, "<bootstrap>", "exec")


# --- job image ------------------------------------------------------------------------------


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "sub" / "deeper").mkdir(parents=True)
    (ws / "a.txt").write_text("alpha\n")
    (ws / "sub" / "with space.txt").write_bytes(b"\x00\x01binary")
    (ws / "sub" / "deeper" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (ws / "sub" / "deeper" / "run.sh").chmod(0o755)
    os.symlink("/etc/passwd", ws / "link")
    os.mkfifo(ws / "fifo")
    return ws


def _job(**over: Any) -> dict[str, Any]:
    base = _vmjob.job_description(
        nonce=NONCE,
        argv=["sh", "-c", "true"],
        env={"PATH": "/usr/bin:/bin"},
        timeout_seconds=5.0,
        output_bytes=1 << 16,
        limits={"cpu": 5, "nproc": 16, "nofile": 64, "fsize": 1 << 20, "tmp_mb": 8},
        network="deny",
        read_only=False,
        has_stdin=True,
    )
    base.update(over)
    return base


def _debugfs(image: Path, cmd: str, *, write: bool = False) -> str:
    flags = ["-w"] if write else []
    done = subprocess.run(
        ["debugfs", *flags, "-R", cmd, str(image)], capture_output=True, check=True, timeout=30
    )
    return done.stdout.decode(errors="replace")


@NEEDS_E2FS
def test_job_image_carries_workspace_job_and_init_and_reads_back(tmp: Path) -> None:
    ws = _workspace(tmp)
    image = tmp / "job.ext4"
    _vmjob.build_job_image(image, tmp / "staging", ws, _job(), b"input bytes", disk_mb=4)
    assert json.loads(_debugfs(image, "cat /.evalsi/job.json"))["nonce"] == NONCE
    assert _debugfs(image, "cat /.evalsi/stdin") == "input bytes"
    assert _debugfs(image, "cat /.evalsi/init.py").encode() == _vmjob.guest_init_source()
    control = _debugfs(image, "stat /.evalsi")
    assert "Mode:  0700" in control
    assert "User:     0" in control
    assert "fifo" not in _debugfs(image, "ls -p /workspace")  # FIFOs never enter the image
    assert "Type: symlink" in _debugfs(image, "stat /workspace/link")
    # The guest's changes: a new file, a changed one, a deleted one, a new directory.
    (tmp / "new.txt").write_text("made in the guest\n")
    for cmd in (
        "rm /workspace/a.txt",
        f"write {tmp / 'new.txt'} /workspace/new.txt",
        "mkdir /workspace/made",
        f"write {tmp / 'new.txt'} /workspace/made/inner.txt",
    ):
        _debugfs(image, cmd, write=True)
    back = _vmjob.read_back(image, tmp / "back", tmp / "scratch")
    found = sorted(
        str(p.relative_to(tmp / "back")) for p in (tmp / "back").rglob("*") if p.is_file()
    )
    assert found == [
        "made/inner.txt",
        "new.txt",
        "sub/deeper/run.sh",
        "sub/with space.txt",
    ]
    assert (tmp / "back" / "sub" / "with space.txt").read_bytes() == b"\x00\x01binary"
    assert (tmp / "back" / "made" / "inner.txt").read_text() == "made in the guest\n"
    assert os.stat(tmp / "back" / "sub" / "deeper" / "run.sh").st_mode & 0o111
    assert not os.path.lexists(tmp / "back" / "link")  # symlinks are not copied back
    assert back.skipped == ["/link"]
    assert (back.files, back.directories) == (4, 3)


@NEEDS_E2FS
def test_read_back_refuses_a_directory_whose_names_could_forge_entries(tmp: Path) -> None:
    ws = tmp / "ws"
    (ws / "odd").mkdir(parents=True)
    (ws / "keep.txt").write_text("kept")
    (ws / "odd" / "x\ndebugfs: ls -p <2>").write_text("a newline in a name")
    (ws / "odd" / "normal.txt").write_text("in a suspect directory")
    image = tmp / "job.ext4"
    _vmjob.build_job_image(image, tmp / "staging", ws, _job(), None, disk_mb=2)
    back = _vmjob.read_back(image, tmp / "back", tmp / "scratch")
    assert (tmp / "back" / "keep.txt").read_text() == "kept"
    assert list((tmp / "back" / "odd").iterdir()) == []
    assert back.skipped == ["/odd"]


@NEEDS_E2FS
def test_replace_tree_makes_the_workspace_the_guest_version(tmp: Path) -> None:
    ws = tmp / "ws"
    (ws / "gone" / "ro").mkdir(parents=True)
    (ws / "gone" / "ro").chmod(0o500)
    (ws / "old.txt").write_text("old")
    fresh = tmp / "fresh"
    (fresh / "d").mkdir(parents=True)
    (fresh / "d" / "f").write_text("new")
    _vmjob.replace_tree(ws, fresh)
    assert sorted(p.name for p in ws.iterdir()) == ["d"]
    assert (ws / "d" / "f").read_text() == "new"


# --- serial protocol ------------------------------------------------------------------------


def _line(kind: str, seq: int, payload: bytes, nonce: str = NONCE) -> bytes:
    return f"{nonce} {kind} {seq} {base64.b64encode(payload).decode()}\n".encode()


def _exit(seq: int, code: int = 0, **extra: Any) -> bytes:
    report = {"code": code, "dropped": [0, 0], "unmounted": True, **extra}
    return _line("X", seq, json.dumps(report).encode())


def test_parser_keeps_only_nonce_records_and_ignores_noise_and_forgeries() -> None:
    seen: list[tuple[str, bytes]] = []
    p = _vmjob.SerialParser(NONCE, cap=1000, on_output=lambda s, c: seen.append((s, c)))
    transcript = b"".join(
        [
            b"[    0.000000] Linux version 6.1.0 (noise)\r\n",
            _line("S", 0, b""),
            b"[    0.412000] random: crng init done\n",
            _line("O", 1, b"hello "),
            _line("X", 2, b'{"code": 0}', nonce="f" * 32),  # forged: another nonce
            f"fake X 9 {base64.b64encode(b'{}').decode()}\n".encode(),
            _line("E", 2, b"warn\n"),
            _line("O", 3, b"world\n"),
            _exit(4, 3),
            _line("O", 5, b"after the exit record"),
        ]
    )
    for i in range(0, len(transcript), 7):  # records split across reads
        p.feed(transcript[i : i + 7])
    p.finish()
    assert p.started
    assert p.corrupt is None
    assert (bytes(p.stdout), bytes(p.stderr)) == (b"hello world\n", b"warn\n")
    assert p.exit_report is not None
    assert p.exit_report["code"] == 3
    assert seen == [("stdout", b"hello "), ("stderr", b"warn\n"), ("stdout", b"world\n")]


def test_parser_detects_gaps_garbles_and_truncation() -> None:
    gap = _vmjob.SerialParser(NONCE, cap=100)
    gap.feed(_line("S", 0, b"") + _line("O", 2, b"x") + _exit(3))
    assert gap.corrupt == "record 1 missing (got 2)"
    assert gap.exit_report is None
    garbled = _vmjob.SerialParser(NONCE, cap=100)
    garbled.feed(_line("S", 0, b"") + f"{NONCE} O 1 aGVs[  1.0] oops\n".encode() + _exit(2))
    assert garbled.corrupt == "record 1 garbled"
    assert garbled.exit_report is None
    cut = _vmjob.SerialParser(NONCE, cap=100)
    cut.feed(_line("S", 0, b"") + _line("O", 1, b"partial output")[:44])  # valid base64 so far
    cut.finish()
    assert cut.started
    assert cut.exit_report is None
    assert cut.corrupt == "record 1 cut off"
    assert bytes(cut.stdout) == b""
    short = _vmjob.SerialParser(NONCE, cap=100)
    short.feed(_line("S", 0, b"") + _line("O", 1, b"x")[:20])  # not even the whole nonce
    short.finish()
    assert short.started
    assert short.corrupt is None
    assert short.exit_report is None
    tail = _vmjob.SerialParser(NONCE, cap=100)
    tail.feed(_line("S", 0, b"") + _exit(1).rstrip(b"\n"))  # the exit record, cut off
    tail.finish()
    assert tail.exit_report is None
    assert tail.corrupt == "record 1 cut off"


def test_parser_caps_each_stream_and_counts_the_rest() -> None:
    seen: list[bytes] = []
    p = _vmjob.SerialParser(NONCE, cap=10, on_output=lambda s, c: seen.append(c))
    p.feed(_line("S", 0, b"") + _line("O", 1, b"0123456") + _line("O", 2, b"789abcdef"))
    assert bytes(p.stdout) == b"0123456789"
    assert p.dropped["stdout"] == 6
    assert seen == [b"0123456", b"789"]


def test_parser_notes_a_kernel_panic_and_an_init_failure() -> None:
    p = _vmjob.SerialParser(NONCE, cap=10)
    p.feed(b"[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs\n")
    assert p.panic == "[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs"
    q = _vmjob.SerialParser(NONCE, cap=10)
    q.feed(_line("S", 0, b"") + _line("F", 1, b"OSError: mount proc on /proc: EPERM"))
    assert q.init_failure == "OSError: mount proc on /proc: EPERM"


# --- the real guest supervisor, run on the host ---------------------------------------------


def _supervise(argv: list[str], tmp: Path, **over: Any) -> tuple[dict[str, Any], Any]:
    """The supervisor run in a fresh process: it forks, and a child forked inside pytest
    inherits what other tests loaded (grpcio's fork handlers wrote their poller's errors to
    the child's stderr once a test had run a gRPC server)."""
    script = (
        "import json, sys, pathlib\n"
        "from tests.unit.sandbox.test_sandbox_firecracker import _supervise_here\n"
        "report, p = _supervise_here(json.loads(sys.argv[1]), pathlib.Path(sys.argv[2]),"
        " **json.loads(sys.argv[3]))\n"
        "print(json.dumps({'report': report, 'stdout': bytes(p.stdout).hex(),"
        " 'stderr': bytes(p.stderr).hex(), 'corrupt': p.corrupt,"
        " 'exit_report': p.exit_report}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(argv), str(tmp), json.dumps(over)],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    parsed = SimpleNamespace(
        stdout=bytes.fromhex(out["stdout"]),
        stderr=bytes.fromhex(out["stderr"]),
        corrupt=out["corrupt"],
        exit_report=out["exit_report"],
    )
    return out["report"], parsed


def _supervise_here(argv: list[str], tmp: Path, **over: Any) -> tuple[dict[str, Any], Any]:
    job = _job(argv=argv, **over)

    def setup() -> None:
        os.setsid()
        os.chdir(tmp)

    return _run_supervise(job, tmp, setup)


def _run_supervise(job: dict[str, Any], tmp: Path, setup: Any) -> tuple[dict[str, Any], Any]:
    """Run the real guest supervisor on the host with a pipe as its console, then parse."""
    import threading

    r, w = os.pipe()
    stdin_path = tmp / "stdin"
    stdin_path.write_bytes(b"from stdin\n")
    stdin_fd = os.open(stdin_path, os.O_RDONLY)
    console = _vmguest.Console(w, NONCE)
    console.record("S", b"")
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(r, 1 << 16):
            got.extend(chunk)

    t = threading.Thread(target=drain)
    t.start()
    try:
        report = _vmguest.supervise(job, console, setup, stdin_fd)
        console.record("X", json.dumps(report).encode())
    finally:
        os.close(w)
        os.close(stdin_fd)
        t.join()
        os.close(r)
    parser = _vmjob.SerialParser(NONCE, cap=int(job["output_bytes"]))
    parser.feed(bytes(got))
    parser.finish()
    return report, parser


def test_guest_supervisor_relays_output_stdin_and_exit_code(tmp: Path) -> None:
    report, p = _supervise(["sh", "-c", "cat; echo out; echo err >&2; pwd; exit 3"], tmp)
    assert p.corrupt is None
    assert p.exit_report == report
    assert bytes(p.stdout) == f"from stdin\nout\n{tmp}\n".encode()
    assert bytes(p.stderr) == b"err\n"
    assert report["code"] == 3
    assert not report["timeout"]


def test_guest_supervisor_reports_missing_command_timeout_and_truncation(tmp: Path) -> None:
    report, p = _supervise(["no-such-command-evalsi"], tmp)
    assert report["code"] == 127
    assert b"command not found" in bytes(p.stderr)
    start = time.monotonic()
    report, _ = _supervise(["sh", "-c", "sleep 30 & sleep 30"], tmp, timeout_seconds=0.5)
    assert report["timeout"]
    assert time.monotonic() - start < 10
    report, _ = _supervise(["sh", "-c", "exit 125"], tmp)
    assert (report["code"], report["setup_error"]) == (125, None)  # the program's own 125
    job = _job(argv=["true"])
    report, _ = _run_supervise(job, tmp, lambda: os.chdir(tmp / "missing"))
    assert report["code"] == 125
    assert report["setup_error"].startswith("FileNotFoundError: ")
    report, _ = _supervise(["sh", "-c", "exec >&- 2>&-; sleep 0.5; exit 5"], tmp)
    assert report["code"] == 5  # closing its pipes does not end a program
    assert not report["timeout"]
    report, p = _supervise(["sh", "-c", "head -c 5000 /dev/zero"], tmp, output_bytes=1000)
    assert len(p.stdout) == 1000
    assert report["dropped"] == [4000, 0]
    assert report["code"] == 0


def test_guest_child_setup_drops_to_the_sandbox_uid_with_limits(tmp: Path) -> None:
    """The real child setup: as root (as init is in the guest) it becomes uid 65534 with
    no_new_privs and the job's rlimits; the CPU limit kills a busy loop and says so."""
    if os.geteuid() != 0:
        pytest.skip("the uid drop needs root, as the guest init has")
    cwd = Path(tempfile.mkdtemp(prefix="evalsi-fc-cwd-", dir="/tmp"))
    try:
        cwd.chmod(0o755)
        # The supervisor forks its child and, as pid 1 in the guest, reads RUSAGE_CHILDREN and
        # reaps every child: run it in a fresh process, not inside pytest (its other children,
        # and libraries other tests loaded, such as grpcio whose fork handlers abort a child
        # forked from a process with its poller threads).
        script = (
            "import json, sys, pathlib\n"
            "from evalsi.sandbox import _vmguest\n"
            "from tests.unit.sandbox.test_sandbox_firecracker import _job, _run_supervise\n"
            "tmp, cwd = pathlib.Path(sys.argv[1]), sys.argv[2]\n"
            "who = _job(argv=['sh', '-c',"
            " 'id -u; id -G; grep NoNewPrivs /proc/self/status; ulimit -n'])\n"
            "first, p = _run_supervise(who, tmp, _vmguest.child_setup_for(who, cwd))\n"
            "busy = _job(argv=['sh', '-c', 'while :; do :; done'], limits={'cpu': 1},"
            " timeout_seconds=60)\n"
            "report, _ = _run_supervise(busy, tmp, _vmguest.child_setup_for(busy, cwd))\n"
            "print(json.dumps({'first': first, 'stdout': bytes(p.stdout).decode(),"
            " 'stderr': bytes(p.stderr).decode(), 'busy': report}))\n"
        )
        root = Path(__file__).resolve().parents[3]
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp), str(cwd)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout.splitlines()[-1])
        assert out["first"]["code"] == 0, out["stderr"]
        assert out["stdout"].split() == ["65534", "65534", "NoNewPrivs:", "1", "64"]
        report = out["busy"]
        assert report["cpu"] is True, report
        assert report["code"] == -9
    finally:
        shutil.rmtree(cwd, ignore_errors=True)


# --- classification -------------------------------------------------------------------------


def _collected(rc: int = 0, *, timed_out: bool = False, flooded: bool = False) -> Any:
    return _capture.Collected({}, timed_out, flooded, rc, 0.0)


def _launcher(text: bytes) -> _capture.Stream:
    s = _capture.Stream(1 << 16)
    s.feed(text)
    return s


def _parser(*lines: bytes) -> _vmjob.SerialParser:
    p = _vmjob.SerialParser(NONCE, cap=100)
    p.feed(b"".join(lines))
    p.finish()
    return p


@pytest.mark.parametrize(
    ("report", "kind", "detail", "code"),
    [
        ({}, "exit", "", 0),
        ({"code": 2}, "exit", "", 2),
        ({"code": -9, "timeout": True}, "timeout", "", None),
        ({"code": -9, "oom": True}, "resource_exceeded", "memory", -9),
        ({"code": -24, "cpu": True}, "resource_exceeded", "cpu", -24),
        ({"code": -25, "fsize": True}, "resource_exceeded", "disk", -25),
        ({"code": 1, "nospace": True}, "resource_exceeded", "disk", 1),
        ({"code": -9, "flooded": True}, "resource_exceeded", "output", -9),
        (
            {"code": 125, "setup_error": "PermissionError: setuid"},
            "runner_failure",
            "guest child setup failed: PermissionError: setuid",
            None,
        ),
    ],
)
def test_classify_from_the_exit_record(
    report: dict[str, Any], kind: str, detail: str, code: int | None
) -> None:
    p = _parser(_line("S", 0, b""), _exit(1, **report))
    out = classify(_collected(), p, False, _launcher(b""), 10)
    assert (out.kind, out.detail, out.code) == (kind, detail, code)


def test_classify_each_failure_signature() -> None:
    started = _line("S", 0, b"")
    cases = [
        (
            classify(_collected(-9), _parser(), True, _launcher(b""), 4),
            "guest did not boot within 4 s",
        ),
        (
            classify(_collected(1), _parser(), False, _launcher(b"log\nError: Kvm(OpenKvm)\n"), 4),
            "firecracker exited 1: Error: Kvm(OpenKvm)",
        ),
        (
            classify(
                _collected(0), _parser(b"Kernel panic - not syncing: x\n"), False, _launcher(b""), 4
            ),
            "kernel panic: Kernel panic - not syncing: x",
        ),
        (
            classify(_collected(0), _parser(started), False, _launcher(b""), 4),
            "guest did not report",
        ),
        (
            classify(_collected(0), _parser(started, _line("O", 5, b"")), False, _launcher(b""), 4),
            "guest transcript corrupted: record 1 missing (got 5)",
        ),
        (
            classify(
                _collected(0), _parser(started, _line("F", 1, b"boom")), False, _launcher(b""), 4
            ),
            "guest init failed: boom",
        ),
        (
            classify(_collected(-9, timed_out=True), _parser(), False, _launcher(b""), 4),
            "guest did not boot within 4 s",
        ),
    ]
    for outcome, detail in cases:
        assert (outcome.kind, outcome.detail) == ("runner_failure", detail)
    wall = classify(_collected(-9, timed_out=True), _parser(started), False, _launcher(b""), 4)
    assert wall.kind == "timeout"
    flood = classify(_collected(-9, flooded=True), _parser(started), False, _launcher(b""), 4)
    assert (flood.kind, flood.detail) == ("resource_exceeded", "output")


# --- the driver against fake firecracker binaries -------------------------------------------

_GOOD = r'''#!{python}
"""Plays the guest: the nonce and the init come out of the job image the driver built."""
import json, os, subprocess, sys, tempfile

os.environ["PATH"] = "/usr/sbin:/sbin:" + os.environ["PATH"]
args = sys.argv[1:]
assert args[:2] == ["--no-api", "--config-file"], args
log = os.path.join(os.getcwd(), "firecracker.log")
assert args[3:] == ["--log-path", log, "--level", "Warning"], args
cfg = json.load(open(args[2]))
assert "network-interfaces" not in cfg
image = next(d["path_on_host"] for d in cfg["drives"] if not d["is_root_device"])

def debugfs(*cmds, write=False):
    with tempfile.NamedTemporaryFile("w", suffix=".cmd", delete=False) as f:
        f.write("".join(c + "\n" for c in cmds))
    flags = ["-w"] if write else []
    out = subprocess.run(["debugfs", *flags, "-f", f.name, image], capture_output=True, check=True)
    os.unlink(f.name)
    return out.stdout

job = json.loads(debugfs("cat /.evalsi/job.json").split(b"\n", 1)[1])
init = {{"__name__": "guest"}}
exec(compile(debugfs("cat /.evalsi/init.py").split(b"\n", 1)[1], "init.py", "exec"), init)
print("[    0.000000] Linux version 6.1.0-fake (noise before the guest init)", flush=True)
print("%s X 0 %s" % ("0" * 32, "eyJjb2RlIjogMH0="), flush=True)  # a forgery without the nonce
console = init["Console"](1, job["nonce"])
console.record("S", b"")
root = tempfile.mkdtemp()
subprocess.run(
    ["debugfs", "-R", "rdump /workspace " + root, image], capture_output=True, check=True
)
work = os.path.join(root, "workspace")
stdin_fd = os.open("/dev/null", os.O_RDONLY)
if job["stdin"]:
    data = debugfs("cat /.evalsi/stdin").split(b"\n", 1)[1]
    r, w = os.pipe(); os.write(w, data); os.close(w); stdin_fd = r
before = set(os.listdir(work))
report = init["supervise"](job, console, lambda: (os.setsid(), os.chdir(work)), stdin_fd)
cmds = ["rm /workspace/" + n for n in before - set(os.listdir(work))]
for name in sorted(set(os.listdir(work))):
    path = os.path.join(work, name)
    if os.path.isfile(path) and not os.path.islink(path):
        cmds += ["rm /workspace/" + name, "write %s /workspace/%s" % (path, name)]
debugfs(*cmds, write=True)
report["unmounted"] = True
console.record("X", json.dumps(report).encode())
'''


def _fake(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _with(c: FirecrackerConfig, **kw: Any) -> FirecrackerConfig:
    d = {f: getattr(c, f) for f in FirecrackerConfig.__dataclass_fields__}
    d.update(kw)
    return FirecrackerConfig(**d)


@pytest.fixture
def private_tmp(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tempfile's directory for the driver, to check it leaves nothing behind."""
    d = tmp / "tmpdir"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead
    except FileNotFoundError:
        return True


@NEEDS_E2FS
def test_probe_with_a_hanging_firecracker_times_out_kills_it_and_cleans_up(
    guest_files: FirecrackerConfig, tmp: Path, kvm: str, private_tmp: Path
) -> None:
    pids = tmp / "pids"
    fake = _fake(
        tmp, "hang", f"#!/bin/sh\necho $$ > {pids}\nsleep 300 &\necho $! >> {pids}\nwait\n"
    )
    driver = FirecrackerDriver(
        _with(guest_files, binary=fake, boot_timeout_seconds=1), kvm_device=kvm
    )
    start = time.monotonic()
    report = driver.probe()
    elapsed = time.monotonic() - start
    assert not report.available
    assert report.reason == "canary VM did not boot within 1 s"
    assert elapsed < 15
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 2
    deadline = time.monotonic() + 5
    while not all(_gone(p) for p in recorded) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in recorded)
    assert list(private_tmp.iterdir()) == []


@NEEDS_E2FS
def test_probe_with_a_failing_firecracker_reports_its_error(
    guest_files: FirecrackerConfig, tmp: Path, kvm: str, private_tmp: Path
) -> None:
    fake = _fake(
        tmp,
        "fails",
        "#!/bin/sh\necho 'some log line' >&2\necho 'logged: cannot open kvm' >> \"$5\"\n"
        "echo 'Error: RunWithoutApiError error: Kvm(Error(13))' >&2\nexit 1\n",
    )
    driver = FirecrackerDriver(_with(guest_files, binary=fake), kvm_device=kvm)
    report = driver.probe()
    assert not report.available
    assert report.reason == (
        "canary VM failed on true: runner_failure "
        "firecracker exited 1: Error: RunWithoutApiError error: Kvm(Error(13))"
    )
    # The failure's diagnostics: Firecracker's stderr and the tail of its log file.
    (tmp / "ws").mkdir()
    result = driver.exec(SandboxSpec(min_isolation=Level.VM), tmp / "ws", ["true"])
    assert result.outcome.kind == "runner_failure"
    assert b"Error: RunWithoutApiError" in result.stderr
    assert b"logged: cannot open kvm" in result.stderr
    assert list(private_tmp.iterdir()) == []


@NEEDS_E2FS
def test_probe_and_exec_with_a_fake_guest_that_reads_the_real_job_image(
    guest_files: FirecrackerConfig, tmp: Path, kvm: str, private_tmp: Path
) -> None:
    fake = _fake(tmp, "good", _GOOD.format(python=sys.executable))
    driver = FirecrackerDriver(
        _with(guest_files, binary=fake, boot_timeout_seconds=20), kvm_device=kvm
    )
    report = driver.probe()
    assert report.available, report.reason
    ws = tmp / "ws"
    ws.mkdir()
    (ws / "in.txt").write_text("workspace input\n")
    (ws / "drop.txt").write_text("to be deleted\n")
    streamed: list[tuple[str, bytes]] = []
    result = driver.exec(
        SandboxSpec(min_isolation=Level.VM, env={"FROM_SPEC": "1"}),
        ws,
        [
            "sh",
            "-c",
            'cat in.txt; cat; echo "$FROM_SPEC$EXTRA" >&2; '
            "echo made > out.txt; rm drop.txt; exit 4",
        ],
        stdin=b"stdin bytes\n",
        env={"EXTRA": "2"},
        on_output=lambda s, c: streamed.append((s, c)),
    )
    assert (result.outcome.kind, result.outcome.code) == ("exit", 4), result
    assert result.stdout == b"workspace input\nstdin bytes\n"
    assert result.stderr == b"12\n"
    assert b"".join(c for s, c in streamed if s == "stdout") == result.stdout
    assert result.isolation.to_dict() == {
        "driver": "firecracker",
        "level": "vm",
        "enforcement": "full",
    }
    assert sorted(p.name for p in ws.iterdir()) == ["in.txt", "out.txt"]
    assert (ws / "out.txt").read_text() == "made\n"
    exit_zero = base64.b64encode(json.dumps({"code": 0, "unmounted": True}).encode()).decode()
    forged = f"{'0' * 32} X 2 {exit_zero}"
    liar = driver.exec(
        SandboxSpec(min_isolation=Level.VM), ws, ["sh", "-c", f"echo '{forged}'; exit 7"]
    )
    assert (liar.outcome.kind, liar.outcome.code) == ("exit", 7)  # its line is only output
    assert liar.stdout == forged.encode() + b"\n"
    ro = driver.exec(
        SandboxSpec(min_isolation=Level.VM, file_access="read-only"),
        ws,
        ["sh", "-c", "echo x > out.txt"],
    )
    assert ro.outcome.kind == "exit"
    assert (ws / "out.txt").read_text() == "made\n"  # read-only: nothing is copied back
    timed = driver.exec(
        SandboxSpec(min_isolation=Level.VM), ws, ["sleep", "30"], timeout_seconds=0.5
    )
    assert timed.outcome.kind == "timeout"
    assert list(private_tmp.iterdir()) == []


def test_exec_refuses_a_directory_root(guest_files: FirecrackerConfig, tmp: Path) -> None:
    driver = FirecrackerDriver(guest_files)
    spec = SandboxSpec(root=tmp, min_isolation=Level.VM)
    assert driver.isolation_for(spec).missing == ("root-directory",)
    result = driver.exec(spec, tmp, ["true"])
    assert result.outcome.kind == "runner_failure"
    assert "is not an ext4 image file" in result.outcome.detail


def test_isolation_is_full_for_an_ordinary_spec(guest_files: FirecrackerConfig) -> None:
    iso = FirecrackerDriver(guest_files).isolation_for(SandboxSpec())
    assert (iso.driver, iso.level, iso.enforcement, iso.missing) == (
        "firecracker",
        Level.VM,
        "full",
        (),
    )


def test_guest_init_module_is_inert_when_imported_on_the_host() -> None:
    # main() runs only as pid 1; what the job drive carries is exactly this module's source.
    assert os.getpid() != 1
    assert _vmjob.guest_init_source() == Path(_vmguest.__file__).read_bytes()
