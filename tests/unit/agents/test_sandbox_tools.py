"""Sandbox tools through the environment, on the ``none`` rung (files) and a fake driver
(outcomes): a path the workspace's confinement refuses is a ``sandbox_denial`` step and an
error the agent sees; a missing or binary file, a timeout or a limit is only an error; a broken
sandbox is an infra error; results keep their shape within the environment's bound."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalsi.agents import Environment, SandboxDenied, ToolFailed, ToolResult, sandbox_tools
from evalsi.agents._environment import MAX_RESULT_BYTES
from evalsi.agents._sandbox_tools import READ_BYTES, STREAM_BYTES
from evalsi.agents._workspace import bound
from evalsi.connectors import InfraError
from evalsi.core import ToolCall, UserError
from evalsi.sandbox import (
    AsyncSandbox,
    ExecResult,
    Isolation,
    Ladder,
    Level,
    NoneDriver,
    Outcome,
    OutputCallback,
    RungReport,
    Sandbox,
    SandboxSpec,
)

NONE = SandboxSpec(min_isolation=Level.NONE, timeout_seconds=10)


class FakeDriver:
    """Answers every exec with a set result, and records the timeout it was given."""

    name = "fake"
    level = Level.NAMESPACED

    def __init__(self, outcome: Outcome, stdout: bytes = b"", stderr: bytes = b"") -> None:
        self.outcome, self.stdout, self.stderr = outcome, stdout, stderr
        self.timeouts: list[float | None] = []

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
        self.timeouts.append(timeout_seconds)
        return ExecResult(self.outcome, self.stdout, self.stderr, 1.0, self.isolation_for(spec))


@pytest.fixture
def sandbox() -> Iterator[AsyncSandbox]:
    sb = Sandbox.create(NONE, ladder=Ladder([NoneDriver()]))
    yield AsyncSandbox(sb)
    sb.destroy()


def faked(driver: FakeDriver, spec: SandboxSpec = NONE) -> AsyncSandbox:
    return AsyncSandbox(Sandbox.create(spec, ladder=Ladder([driver])))


def call(sandbox: AsyncSandbox | None, name: str, **args: Any) -> ToolResult:
    environment = Environment(sandbox_tools(["exec", "read_file", "write_file"]))

    async def go() -> ToolResult:
        with bound(sandbox):
            return await environment.call(ToolCall(name, args, "c1"))

    return asyncio.run(go())


def kinds(result: ToolResult) -> list[str]:
    return [s.kind for s in result.steps]


# -- the factory -----------------------------------------------------------------------------


def test_the_factory_builds_the_named_tools_with_their_declarations() -> None:
    tools = sandbox_tools(["write_file", "exec", "read_file"])
    assert [t.spec.name for t in tools] == ["write_file", "exec", "read_file"]
    specs = {t.spec.name: t.spec for t in tools}
    assert {n: s.effective() for n, s in specs.items()} == {
        "exec": "write",
        "read_file": "read",
        "write_file": "write",
    }
    assert all(s.reversible and s.exposure == "internal" for s in specs.values())
    assert specs["exec"].input_schema["required"] == ["command"]
    assert specs["write_file"].input_schema["required"] == ["path", "content"]
    assert all(s.description for s in specs.values())


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["exec", "rm"], "no sandbox tool named 'rm'"),
        (["exec", "exec"], "'exec' is listed twice"),
        ("exec", "expected a non-empty list of tool names"),
        ([], "expected a non-empty list of tool names"),
        ([3], "no sandbox tool named 3"),
    ],
)
def test_the_factory_refuses_unknown_duplicate_and_bad_names(names: Any, message: str) -> None:
    with pytest.raises(UserError, match=message) as e:
        sandbox_tools(names)
    assert "spec.environment.tools.sandbox" in str(e.value)
    assert e.value.hint == "the sandbox tools are: exec, read_file, write_file"


# -- exec ------------------------------------------------------------------------------------


def test_exec_runs_a_string_with_sh_and_a_list_as_argv(sandbox: AsyncSandbox) -> None:
    r = call(sandbox, "exec", command="echo hi; echo oops >&2; exit 3")
    assert (r.content, r.error) == ({"exit_code": 3, "stdout": "hi\n", "stderr": "oops\n"}, "")
    assert kinds(r) == ["tool_call"]
    r = call(sandbox, "exec", command=["sh", "-c", "pwd"])
    assert isinstance(r.content, dict)
    assert r.content["stdout"] == f"{sandbox.workspace}\n"  # the workspace is the cwd


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"command": []}, "`command` must be a non-empty list of strings"),
        ({"command": ["ls", 3]}, "`command` must be a non-empty list of strings"),
        ({"command": "  "}, "`command` must be a non-empty list of strings"),
        ({"command": {"x": 1}}, "got dict"),
        ({}, "bad arguments for exec: missing command"),
        ({"command": "ls", "cwd": "/"}, "bad arguments for exec: unexpected cwd"),
        ({"command": "ls", "timeout_seconds": 0}, "`timeout_seconds` must be a positive number"),
        ({"command": "ls", "timeout_seconds": True}, "`timeout_seconds` must be a positive"),
        ({"command": "ls", "timeout_seconds": "5"}, "`timeout_seconds` must be a positive"),
    ],
)
def test_exec_bad_arguments_are_errors_the_agent_sees(
    sandbox: AsyncSandbox, args: dict[str, Any], message: str
) -> None:
    r = call(sandbox, "exec", **args)
    assert message in r.error
    assert kinds(r) == ["tool_call"]


def test_exec_timeout_is_capped_by_the_sandbox_spec() -> None:
    driver = FakeDriver(Outcome("exit", 0))
    sb = faked(driver, SandboxSpec(min_isolation=Level.NONE, timeout_seconds=5))
    try:
        call(sb, "exec", command="true", timeout_seconds=100)
        call(sb, "exec", command="true", timeout_seconds=2)
        call(sb, "exec", command="true")
    finally:
        asyncio.run(sb.destroy())
    assert driver.timeouts == [5.0, 2.0, None]


def test_a_denied_outcome_is_a_sandbox_denial_step_and_a_refusal() -> None:
    sb = faked(FakeDriver(Outcome("denied", -31, "seccomp")))
    try:
        r = call(sb, "exec", command="strace ls")
    finally:
        asyncio.run(sb.destroy())
    assert r.error == "denied by the sandbox: the sandbox stopped the command (seccomp)"
    assert kinds(r) == ["sandbox_denial", "tool_call"]
    denial, tool_call = r.steps
    assert (denial.name, denial.input) == ("exec", {"command": "strace ls"})
    assert denial.output == {"detail": "the sandbox stopped the command (seccomp)"}
    assert tool_call.error == r.error
    assert "error: denied by the sandbox" in r.for_model()


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        (Outcome("timeout"), "did not finish within 10s"),
        (Outcome("resource_exceeded", detail="memory"), "over the sandbox's memory limit"),
    ],
)
def test_a_timeout_or_a_limit_is_a_tool_failure_not_a_denial(
    outcome: Outcome, message: str
) -> None:
    sb = faked(FakeDriver(outcome))
    try:
        r = call(sb, "exec", command="sleep 60")
    finally:
        asyncio.run(sb.destroy())
    assert message in r.error
    assert kinds(r) == ["tool_call"]


def test_a_broken_sandbox_is_an_infra_error_never_a_result() -> None:
    sb = faked(FakeDriver(Outcome("runner_failure", detail="bwrap: setting up uid map")))
    try:
        with pytest.raises(InfraError, match="the task's sandbox failed \\(fake\\): bwrap"):
            call(sb, "exec", command="true")
    finally:
        asyncio.run(sb.destroy())


@pytest.mark.parametrize("byte", [b"x", b"\x01", "é".encode()])
def test_exec_output_is_bounded_per_stream_and_keeps_its_shape(byte: bytes) -> None:
    big = byte * (1 << 20)
    sb = faked(FakeDriver(Outcome("exit", 0), stdout=big, stderr=big))
    try:
        r = call(sb, "exec", command="cat big")
    finally:
        asyncio.run(sb.destroy())
    assert isinstance(r.content, dict)
    assert r.content["exit_code"] == 0
    for stream in ("stdout", "stderr"):
        text = r.content[stream]
        assert isinstance(text, str)
        assert len(orjson.dumps(text)) <= STREAM_BYTES
        assert text.endswith(f"[... cut by the harness: {len(big):,} bytes in all]")
        assert text.startswith(byte.decode() * 100)
    assert len(orjson.dumps(r.content)) <= MAX_RESULT_BYTES


def test_output_the_sandbox_cut_says_so() -> None:
    sb = faked(FakeDriver(Outcome("exit", 0), stdout=b"abc"))
    sb.sync.driver = _Truncating(sb.sync.driver)
    try:
        r = call(sb, "exec", command="yes")
    finally:
        asyncio.run(sb.destroy())
    assert isinstance(r.content, dict)
    assert r.content["stdout"] == "abc\n[... cut by the sandbox: the output went over its limit]"


class _Truncating:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def exec(self, *args: Any, **kwargs: Any) -> ExecResult:
        result: ExecResult = self.inner.exec(*args, **kwargs)
        return ExecResult(
            result.outcome, result.stdout, b"", 1.0, result.isolation, stdout_truncated=True
        )


# -- read_file and write_file ----------------------------------------------------------------


def test_write_then_read_round_trips_and_creates_parent_directories(
    sandbox: AsyncSandbox,
) -> None:
    text = "def f():\n    return 'é'\n"
    w = call(sandbox, "write_file", path="src/pkg/mod.py", content=text)
    assert (w.content, w.error) == ({"path": "src/pkg/mod.py", "bytes": len(text.encode())}, "")
    assert (sandbox.workspace / "src/pkg/mod.py").read_text() == text
    r = call(sandbox, "read_file", path="src/pkg/mod.py")
    assert (r.content, r.error, kinds(r)) == (text, "", ["tool_call"])
    call(sandbox, "write_file", path="src/pkg/mod.py", content="x")
    assert call(sandbox, "read_file", path="./src/pkg/mod.py").content == "x"


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "/tmp/evil"])
@pytest.mark.parametrize("tool", ["read_file", "write_file"])
def test_a_path_out_of_the_workspace_is_a_denial(
    sandbox: AsyncSandbox, tool: str, path: str
) -> None:
    before = Path("/etc/passwd").read_bytes()
    args: dict[str, Any] = {"path": path} | ({"content": "pwned"} if tool == "write_file" else {})
    r = call(sandbox, tool, **args)
    assert r.error.startswith(f"denied by the sandbox: {tool}: workspace path {path!r}")
    assert kinds(r) == ["sandbox_denial", "tool_call"]
    assert r.steps[0].input == args
    assert isinstance(r.steps[0].output, dict)
    assert path in r.steps[0].output["detail"]
    assert Path("/etc/passwd").read_bytes() == before
    assert not Path("/tmp/evil").exists()


def test_a_symlink_out_is_never_followed_and_reading_it_is_a_denial(
    sandbox: AsyncSandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(secret, sandbox.workspace / "link")
    os.symlink(tmp_path, sandbox.workspace / "dir")
    r = call(sandbox, "read_file", path="link")
    assert "host secret" not in r.for_model()
    assert kinds(r) == ["sandbox_denial", "tool_call"]
    assert "is a symlink" in r.error
    r = call(sandbox, "read_file", path="dir/secret.txt")
    assert kinds(r) == ["sandbox_denial", "tool_call"]
    assert "symlinks are never followed" in r.error
    w = call(sandbox, "write_file", path="dir/planted.txt", content="x")
    assert kinds(w) == ["sandbox_denial", "tool_call"]
    assert not (tmp_path / "planted.txt").exists()
    # A symlink at the file itself is replaced, never written through: confined, no denial.
    w = call(sandbox, "write_file", path="link", content="mine")
    assert (w.error, kinds(w)) == ("", ["tool_call"])
    assert secret.read_text() == "host secret"
    assert (sandbox.workspace / "link").read_text() == "mine"


def test_a_fifo_is_refused_as_a_denial_without_hanging(sandbox: AsyncSandbox) -> None:
    os.mkfifo(sandbox.workspace / "pipe")
    r = call(sandbox, "read_file", path="pipe")
    assert kinds(r) == ["sandbox_denial", "tool_call"]
    assert "FIFO" in r.error


def test_a_missing_file_or_a_directory_is_an_error_not_a_denial(sandbox: AsyncSandbox) -> None:
    (sandbox.workspace / "d").mkdir()
    for tool, args in [
        ("read_file", {"path": "nope.txt"}),
        ("read_file", {"path": "no/such/file"}),
        ("read_file", {"path": "d"}),
        ("write_file", {"path": "d", "content": "x"}),
        ("read_file", {"path": "."}),
        ("read_file", {"path": ""}),
        ("read_file", {"path": 3}),
        ("write_file", {"path": "a.txt", "content": None}),
        ("write_file", {"path": "a.txt"}),
    ]:
        r = call(sandbox, tool, **args)
        assert r.error, (tool, args)
        assert kinds(r) == ["tool_call"], (tool, args, r.error)


@pytest.mark.parametrize("data", [b"\x89PNG\r\n\x1a\n\x00\x00", b"\xff\xfe\xfa", b"a\x00b"])
def test_a_binary_file_is_an_error_the_agent_sees(sandbox: AsyncSandbox, data: bytes) -> None:
    (sandbox.workspace / "blob").write_bytes(data)
    r = call(sandbox, "read_file", path="blob")
    assert r.error.startswith(f"read_file: 'blob' is binary ({len(data)} bytes)")
    assert kinds(r) == ["tool_call"]


def test_an_empty_file_reads_as_empty_text(sandbox: AsyncSandbox) -> None:
    (sandbox.workspace / "empty").write_bytes(b"")
    assert call(sandbox, "read_file", path="empty").content == ""


def test_a_huge_file_is_cut_to_the_bound_and_one_over_the_cap_is_an_error(
    sandbox: AsyncSandbox,
) -> None:
    (sandbox.workspace / "big.txt").write_text("line\n" * (1 << 20))
    r = call(sandbox, "read_file", path="big.txt")
    assert isinstance(r.content, str)
    assert r.content.startswith("line\nline\n")
    assert r.content.endswith("[... cut by the harness: 5,242,880 bytes in all]")
    assert len(orjson.dumps(r.content)) <= MAX_RESULT_BYTES
    with open(sandbox.workspace / "huge.txt", "wb") as f:
        f.truncate(READ_BYTES + 1)
    r = call(sandbox, "read_file", path="huge.txt")
    assert "over the cap" in r.error
    assert kinds(r) == ["tool_call"]


def test_a_write_to_a_read_only_workspace_is_a_denial() -> None:
    spec = SandboxSpec(min_isolation=Level.NONE, file_access="read-only")
    sb = AsyncSandbox(Sandbox.create(spec, ladder=Ladder([NoneDriver()])))
    try:
        r = call(sb, "write_file", path="a.txt", content="x")
        assert kinds(r) == ["sandbox_denial", "tool_call"]
        assert "the workspace is read-only" in r.error
        assert not (sb.workspace / "a.txt").exists()
    finally:
        asyncio.run(sb.destroy())


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("exec", {"command": "ls"}),
        ("read_file", {"path": "a"}),
        ("write_file", {"path": "a", "content": "x"}),
    ],
)
def test_without_a_task_sandbox_the_agent_sees_why(tool: str, args: dict[str, Any]) -> None:
    r = call(None, tool, **args)
    assert r.error.startswith("this tool needs the task's workspace, and the environment has none")
    assert kinds(r) == ["tool_call"]


def test_sandbox_denied_is_a_tool_failure_with_its_detail() -> None:
    e = SandboxDenied("write_file 'a': the workspace is read-only")
    assert isinstance(e, ToolFailed)
    assert e.detail == "write_file 'a': the workspace is read-only"
    assert str(e) == "denied by the sandbox: write_file 'a': the workspace is read-only"
