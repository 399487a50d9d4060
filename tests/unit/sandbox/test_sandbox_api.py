"""The sandbox API: a fake driver proves what reaches the driver; the ``none`` driver runs for
real (min_isolation none) to prove the workspace, copy hygiene and destroy."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from evalsi.core import UserError
from evalsi.sandbox import (
    AsyncSandbox,
    ExecResult,
    Isolation,
    Ladder,
    Level,
    NoneDriver,
    Outcome,
    OutputCallback,
    Resources,
    RungReport,
    Sandbox,
    SandboxFileError,
    SandboxSpec,
    run,
)

NONE = SandboxSpec(min_isolation=Level.NONE, timeout_seconds=20)


class FakeDriver:
    """Records every exec; answers exit 0 with the argv echoed."""

    name = "fake"
    level = Level.NAMESPACED

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def probe(self) -> RungReport:
        return RungReport(self.name, self.level, True)

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        return Isolation(self.name, self.level)

    def exec(
        self,
        spec: SandboxSpec,
        workspace: Path,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        self.calls.append(
            {
                "spec": spec,
                "workspace": workspace,
                "argv": list(argv),
                "stdin": stdin,
                "timeout": timeout_seconds,
                "ws_exists": workspace.is_dir(),
            }
        )
        if env:
            self.calls[-1]["env"] = dict(env)
        return ExecResult(
            Outcome("exit", 0),
            " ".join(argv).encode(),
            b"",
            1.0,
            Isolation(self.name, self.level),
        )


@pytest.fixture
def real() -> Ladder:
    return Ladder([NoneDriver()])


def test_fake_driver_receives_spec_workspace_argv_stdin_timeout() -> None:
    driver = FakeDriver()
    spec = SandboxSpec(timeout_seconds=7)
    with Sandbox.create(spec, ladder=Ladder([driver])) as sb:
        ws = sb.workspace
        assert stat.S_IMODE(ws.stat().st_mode) == 0o700
        result = sb.exec(["python3", "-V"], stdin=b"in", timeout=3)
        sb.exec(["true"])
        assert sb.isolation == Isolation("fake", Level.NAMESPACED)
    assert driver.calls[0] == {
        "spec": spec,
        "workspace": ws,
        "argv": ["python3", "-V"],
        "stdin": b"in",
        "timeout": 3,
        "ws_exists": True,
    }
    assert driver.calls[1]["timeout"] is None
    assert driver.calls[1]["stdin"] is None
    assert result.stdout == b"python3 -V"
    assert not ws.exists()


@pytest.mark.parametrize("argv", [[], "ls -l", [b"ls"], ["ls", 3]])
def test_exec_rejects_bad_argv_before_the_driver(argv: object) -> None:
    driver = FakeDriver()
    with Sandbox.create(SandboxSpec(), ladder=Ladder([driver])) as sb:
        with pytest.raises(UserError, match="non-empty list of strings"):
            sb.exec(argv)  # type: ignore[arg-type]
        with pytest.raises(UserError, match="timeout must be positive"):
            sb.exec(["true"], timeout=0)
    assert driver.calls == []


def test_none_driver_runs_in_the_workspace_with_a_cleared_env(real: Ladder) -> None:
    os.environ["EVALSI_TEST_SECRET"] = "leak"
    try:
        spec = SandboxSpec(min_isolation=Level.NONE, env={"GREETING": "hi"})
        with Sandbox.create(spec, ladder=real) as sb:
            sb.copy_in(b"data\n", "in/file.txt")
            r = sb.exec(["/bin/sh", "-c", "pwd; env; cat in/file.txt; ls /proc/self/fd"])
            ws = sb.workspace
    finally:
        del os.environ["EVALSI_TEST_SECRET"]
    assert r.outcome == Outcome("exit", 0), r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0] == str(ws)
    assert "GREETING=hi" in lines
    assert not any("EVALSI_TEST_SECRET" in line for line in lines)
    assert "data" in lines
    # only 0-2 (and the fd ls itself opens) are inherited
    fds = {int(x) for x in lines[lines.index("data") + 1 :]}
    assert fds <= {0, 1, 2, 3}
    assert r.isolation.driver == "none"
    assert r.isolation.enforcement == "partial"
    assert "seccomp" in r.isolation.missing


def test_none_driver_outcomes_stdin_timeout_and_output_cap(real: Ladder) -> None:
    spec = SandboxSpec(min_isolation=Level.NONE, resources=Resources(output_bytes=1000))
    with Sandbox.create(spec, ladder=real) as sb:
        echoed = sb.exec(["cat"], stdin=b"abc")
        assert echoed.stdout == b"abc"
        assert echoed.exit_code == 0
        assert sb.exec(["sh", "-c", "exit 7"]).outcome == Outcome("exit", 7)
        killed = sb.exec(["sh", "-c", "kill -9 $$"])
        assert killed.outcome == Outcome("exit", -9)
        slow = sb.exec(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5)
        assert slow.outcome.kind == "timeout"
        assert slow.exit_code is None
        assert slow.duration_ms < 10_000
        flood = sb.exec(["sh", "-c", "head -c 100000 /dev/zero"])
        assert len(flood.stdout) == 1000
        assert flood.stdout_truncated
        assert flood.exit_code == 0
        assert not flood.stderr_truncated
        missing = sb.exec(["no-such-command-evalsi"])
        assert missing.outcome == Outcome("exit", 127)


def test_none_driver_cpu_limit_is_resource_exceeded(real: Ladder) -> None:
    spec = SandboxSpec(min_isolation=Level.NONE, resources=Resources(cpu_seconds=1))
    with Sandbox.create(spec, ladder=real) as sb:
        r = sb.exec(["sh", "-c", "while :; do :; done"], timeout=20)
    assert r.outcome == Outcome("resource_exceeded", detail="cpu")


def test_copy_round_trip_and_host_file(real: Ladder, tmp_path: Path) -> None:
    host = tmp_path / "prog.py"
    host.write_bytes(b"print(1)\n")
    with Sandbox.create(NONE, ladder=real) as sb:
        sb.copy_in(host, "a/b/prog.py")
        sb.copy_in(b"x", "./top.txt", mode=0o600)
        assert sb.copy_out("a/b/prog.py") == b"print(1)\n"
        assert stat.S_IMODE((sb.workspace / "top.txt").stat().st_mode) == 0o600
        r = sb.exec(["sh", "-c", "printf out > made.txt"])
        assert r.exit_code == 0
        assert sb.copy_out("made.txt") == b"out"


@pytest.mark.parametrize("dest", ["/etc/passwd", "../x", "a/../../x", "", ".", "a/.."])
def test_paths_leaving_the_workspace_are_refused(real: Ladder, dest: str) -> None:
    with Sandbox.create(NONE, ladder=real) as sb:
        with pytest.raises(SandboxFileError):
            sb.copy_in(b"x", dest)
        with pytest.raises(SandboxFileError):
            sb.copy_out(dest)


def test_planted_symlinks_are_never_followed(real: Ladder, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_bytes(b"original")
    with Sandbox.create(NONE, ladder=real) as sb:
        script = f"ln -s /etc/passwd leak; ln -s {outside} dirlink; ln -s {victim} target"
        assert sb.exec(["sh", "-c", script]).exit_code == 0
        with pytest.raises(SandboxFileError, match="symlink"):
            sb.copy_out("leak")
        with pytest.raises(SandboxFileError, match="not a plain directory"):
            sb.copy_out("dirlink/victim.txt")
        with pytest.raises(SandboxFileError, match="not a plain directory"):
            sb.copy_in(b"pwned", "dirlink/victim.txt")
        # copying onto a planted symlink replaces the link; the target is untouched
        sb.copy_in(b"mine", "target")
        assert not (sb.workspace / "target").is_symlink()
        assert sb.copy_out("target") == b"mine"
    assert victim.read_bytes() == b"original"


def test_fifos_and_directories_are_refused_without_blocking(real: Ladder) -> None:
    with Sandbox.create(NONE, ladder=real) as sb:
        assert sb.exec(["sh", "-c", "mkfifo pipe && mkdir d"]).exit_code == 0
        outcome: list[SandboxFileError] = []

        def attempt() -> None:
            try:
                sb.copy_out("pipe")
            except SandboxFileError as e:
                outcome.append(e)

        t = threading.Thread(target=attempt, daemon=True)
        t.start()
        t.join(timeout=5)
        assert not t.is_alive(), "copy_out blocked on a FIFO"
        assert isinstance(outcome[0], SandboxFileError)
        assert "FIFO" in str(outcome[0])
        with pytest.raises(SandboxFileError, match="directory"):
            sb.copy_out("d")
        with pytest.raises(SandboxFileError, match="directory"):
            sb.copy_in(b"x", "d")
        sb.copy_in(b"replaced", "pipe")  # a FIFO at the destination is replaced, not opened
        assert sb.copy_out("pipe") == b"replaced"
        with pytest.raises(SandboxFileError, match="does not exist"):
            sb.copy_out("absent")


def test_copy_out_size_cap(real: Ladder) -> None:
    with Sandbox.create(NONE, ladder=real) as sb:
        assert sb.exec(["sh", "-c", "head -c 5000 /dev/zero > big"]).exit_code == 0
        with pytest.raises(SandboxFileError, match="over the cap of 4096"):
            sb.copy_out("big", max_bytes=4096)
        assert len(sb.copy_out("big", max_bytes=5000)) == 5000


def test_destroy_removes_read_only_trees_and_is_idempotent(real: Ladder) -> None:
    sb = Sandbox.create(NONE, ladder=real)
    script = (
        "mkdir -p ro/sub && echo x > ro/sub/f && chmod 500 ro/sub && chmod 000 ro && ln -s / root"
    )
    assert sb.exec(["sh", "-c", script]).exit_code == 0
    ws = sb.workspace
    sb.destroy()
    assert not ws.exists()
    assert Path("/etc/passwd").exists()  # the planted link to / was removed, not followed
    sb.destroy()
    with pytest.raises(RuntimeError, match="destroyed"):
        sb.exec(["true"])


def test_destroy_runs_when_the_body_raises(real: Ladder) -> None:
    seen: list[Path] = []

    def body() -> None:
        with Sandbox.create(NONE, ladder=real) as sb:
            seen.append(sb.workspace)
            raise KeyError("boom")

    with pytest.raises(KeyError):
        body()
    assert not seen[0].exists()


def test_run_convenience_with_files(real: Ladder) -> None:
    r = run(["python3", "main.py"], NONE, files={"main.py": b"print(6 * 7)\n"}, ladder=real)
    assert r.outcome == Outcome("exit", 0)
    assert r.stdout == b"42\n"


def test_async_sandbox(real: Ladder) -> None:
    async def main() -> tuple[ExecResult, bytes, Path]:
        async with await AsyncSandbox.create(NONE, ladder=real) as sb:
            await sb.copy_in(b"hello", "in.txt")
            result = await sb.exec(["sh", "-c", "tr a-z A-Z < in.txt > out.txt; cat out.txt"])
            return result, await sb.copy_out("out.txt"), sb.workspace

    result, copied, ws = asyncio.run(main())
    assert result.stdout == b"HELLO"
    assert copied == b"HELLO"
    assert not ws.exists()


def test_isolation_before_any_exec_comes_from_the_driver(real: Ladder) -> None:
    with Sandbox.create(NONE, ladder=real) as sb:
        assert sb.isolation.driver == "none"
        assert sb.isolation.enforcement == "partial"


def test_the_package_docstring_example_runs() -> None:
    import textwrap

    import evalsi.sandbox

    doc = evalsi.sandbox.__doc__ or ""
    block = doc.split("::\n", 1)[1].split("\n\n``run(", 1)[0]
    exec(compile(textwrap.dedent(block), "<evalsi.sandbox docstring>", "exec"), {})


def test_none_driver_memory_limit_applies(real: Ladder) -> None:
    spec = SandboxSpec(min_isolation=Level.NONE, resources=Resources(memory_mb=200))
    with Sandbox.create(spec, ladder=real) as sb:
        r = sb.exec(["python3", "-c", "b = bytearray(1 << 30)"])
    assert r.exit_code == 1
    assert b"MemoryError" in r.stderr


def test_exec_env_is_merged_over_the_spec_and_checked(real: Ladder) -> None:
    spec = SandboxSpec(min_isolation=Level.NONE, env={"A": "spec", "B": "spec"})
    with Sandbox.create(spec, ladder=real) as sb:
        result = sb.exec(["sh", "-c", 'echo "$A $B $C"'], env={"B": "exec", "C": "exec"})
        assert result.stdout == b"spec exec exec\n"
        again = sb.exec(["sh", "-c", 'echo "$A $B ${C:-unset}"'])  # per exec only
        assert again.stdout == b"spec spec unset\n"
        for bad in ({"": "x"}, {"A=B": "x"}, {"A": 1}, {"A": "x\0y"}):
            with pytest.raises(UserError, match="env"):
                sb.exec(["true"], env=bad)  # type: ignore[arg-type]


def test_on_output_streams_chunks_before_the_program_ends(real: Ladder) -> None:
    """The first line arrives while the program still sleeps, so it is streamed, not buffered."""
    seen: list[tuple[str, bytes, float]] = []
    script = (
        "import sys, time; print('one', flush=True); time.sleep(1.0); print('two', file=sys.stderr)"
    )
    with Sandbox.create(NONE, ladder=real) as sb:
        start = time.monotonic()
        result = sb.exec(
            ["python3", "-c", script],
            on_output=lambda s, c: seen.append((s, c, time.monotonic() - start)),
        )
        total = time.monotonic() - start
    assert result.stdout == b"one\n"
    assert result.stderr == b"two\n"
    assert [(s, c) for s, c, _ in seen] == [("stdout", b"one\n"), ("stderr", b"two\n")]
    assert seen[0][2] < total - 0.5


def test_on_output_sees_only_what_fits_under_the_cap(real: Ladder) -> None:
    spec = SandboxSpec(min_isolation=Level.NONE, resources=Resources(output_bytes=10))
    chunks: list[bytes] = []
    with Sandbox.create(spec, ladder=real) as sb:
        result = sb.exec(
            ["sh", "-c", "printf 0123456789abcdef"], on_output=lambda s, c: chunks.append(c)
        )
    assert b"".join(chunks) == result.stdout == b"0123456789"
    assert result.stdout_truncated


def test_async_on_output_runs_on_the_event_loop_thread(real: Ladder) -> None:
    threads: list[int] = []

    async def main() -> ExecResult:
        async with await AsyncSandbox.create(NONE, ladder=real) as sb:
            return await sb.exec(
                ["sh", "-c", "echo hi"],
                on_output=lambda s, c: threads.append(threading.get_ident()),
            )

    loop_thread = threading.get_ident()
    result = asyncio.run(main())
    assert result.stdout == b"hi\n"
    assert threads == [loop_thread]


@pytest.mark.parametrize("bad", ["relative/path", "/a/../b", "/x\0y"])
def test_read_only_paths_must_be_absolute(bad: str) -> None:
    with pytest.raises(ValueError, match="read_only_paths"):
        SandboxSpec(read_only_paths=(Path(bad) if "\0" not in bad else bad,))  # type: ignore[arg-type]
