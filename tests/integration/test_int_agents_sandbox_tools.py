"""Sandbox tools against real bubblewrap, driven through the environment: what the agent sees
and which steps are recorded when a command runs, fails, floods its output, tries the network,
hits the seccomp filter, times out, or plants a symlink out of the workspace.

A ``sandbox_denial`` step is asserted only where the sandbox itself reports a denial: a network
call under ``network: deny`` is answered EPERM inside the sandbox, so it is the command's own
failed exit (no denial); a syscall the filter kills is the sandbox's ``denied`` outcome."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalsi.agents import Environment, ToolResult, sandbox_tools
from evalsi.agents._environment import MAX_RESULT_BYTES
from evalsi.agents._workspace import bound
from evalsi.core import ToolCall
from evalsi.sandbox import AsyncSandbox, Level, Sandbox, SandboxSpec, default_ladder


def _bwrap_reason() -> str:
    reports = {r.driver: r for r in default_ladder().probe_all()}
    bwrap = reports.get("bwrap")
    if bwrap is None:
        return "the ladder has no bwrap rung"
    return "" if bwrap.available else f"the bwrap rung is not usable here: {bwrap.reason}"


_WHY = _bwrap_reason()
pytestmark = pytest.mark.skipif(bool(_WHY), reason=_WHY or "bwrap works")

SPEC = SandboxSpec(min_isolation=Level.NAMESPACED, timeout_seconds=10, network="deny")


@pytest.fixture
def sandbox() -> Iterator[AsyncSandbox]:
    sb = Sandbox.create(SPEC)
    assert sb.isolation.level >= Level.NAMESPACED  # never the weaker rungs
    yield AsyncSandbox(sb)
    sb.destroy()


def call(sandbox: AsyncSandbox | None, name: str, **args: Any) -> ToolResult:
    environment = Environment(sandbox_tools(["exec", "read_file", "write_file"]), timeout_s=30)

    async def go() -> ToolResult:
        with bound(sandbox):
            return await environment.call(ToolCall(name, args, "c1"))

    return asyncio.run(go())


def kinds(result: ToolResult) -> list[str]:
    return [s.kind for s in result.steps]


def content(result: ToolResult) -> dict[str, Any]:
    assert isinstance(result.content, dict), result.error
    return result.content


def test_exec_runs_a_command_and_a_failing_one_is_its_exit_code(sandbox: AsyncSandbox) -> None:
    r = call(sandbox, "exec", command=["python3", "-c", "print(6 * 7)"])
    assert content(r) == {"exit_code": 0, "stdout": "42\n", "stderr": ""}
    assert kinds(r) == ["tool_call"]
    r = call(sandbox, "exec", command="ls /nonexistent-dir")
    assert content(r)["exit_code"] == 2
    assert "No such file" in content(r)["stderr"]
    assert kinds(r) == ["tool_call"]


def test_exec_output_is_bounded(sandbox: AsyncSandbox) -> None:
    r = call(sandbox, "exec", command="yes | head -c 3000000")
    out = content(r)
    assert out["exit_code"] == 0
    assert out["stdout"].startswith("y\ny\n")
    assert "[... cut by the harness:" in out["stdout"]
    assert len(orjson.dumps(out)) <= MAX_RESULT_BYTES
    assert kinds(r) == ["tool_call"]


def test_the_network_under_deny_fails_the_command_and_is_no_denial(
    sandbox: AsyncSandbox,
) -> None:
    code = "import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)"
    r = call(sandbox, "exec", command=["python3", "-c", code])
    out = content(r)
    assert out["exit_code"] == 1
    assert "Operation not permitted" in out["stderr"]  # socket(AF_INET) answered EPERM
    assert kinds(r) == ["tool_call"]


def test_a_syscall_the_filter_kills_is_a_sandbox_denial(sandbox: AsyncSandbox) -> None:
    ptrace = "import ctypes; ctypes.CDLL(None).syscall(101, 0, 0, 0, 0)"  # x86_64/aarch64: 101/117
    if os.uname().machine == "aarch64":
        ptrace = ptrace.replace("101", "117")
    r = call(sandbox, "exec", command=["python3", "-c", ptrace])
    assert kinds(r) == ["sandbox_denial", "tool_call"]
    assert r.steps[0].output == {"detail": "the sandbox stopped the command (seccomp)"}
    assert r.error == "denied by the sandbox: the sandbox stopped the command (seccomp)"


def test_write_file_then_read_file_and_exec_see_the_same_workspace(
    sandbox: AsyncSandbox,
) -> None:
    w = call(sandbox, "write_file", path="pkg/main.py", content="print('from the agent')\n")
    assert (w.error, kinds(w)) == ("", ["tool_call"])
    r = call(sandbox, "exec", command=["python3", "pkg/main.py"])
    assert content(r)["stdout"] == "from the agent\n"
    call(sandbox, "exec", command="echo made-by-exec > out.txt")
    assert call(sandbox, "read_file", path="out.txt").content == "made-by-exec\n"
    assert call(sandbox, "read_file", path="pkg/main.py").content == "print('from the agent')\n"


@pytest.mark.parametrize("path", ["../x", "/etc/passwd"])
def test_a_path_out_of_the_workspace_is_a_denial(sandbox: AsyncSandbox, path: str) -> None:
    tries = [("read_file", {"path": path}), ("write_file", {"path": path, "content": "x"})]
    for tool, args in tries:
        r = call(sandbox, tool, **args)
        assert kinds(r) == ["sandbox_denial", "tool_call"], (tool, r.error)
        assert r.error.startswith("denied by the sandbox:")
        assert "root:" not in r.for_model()


def test_a_symlink_out_planted_by_exec_is_a_denial(sandbox: AsyncSandbox, tmp_path: Path) -> None:
    host = tmp_path / "host.txt"
    host.write_text("host secret")
    r = call(sandbox, "exec", command=f"ln -s {host} link && ln -s {tmp_path} dir && ls -l")
    assert content(r)["exit_code"] == 0, r.content
    read = call(sandbox, "read_file", path="link")
    assert kinds(read) == ["sandbox_denial", "tool_call"]
    assert "host secret" not in read.for_model()
    through = call(sandbox, "write_file", path="dir/planted.txt", content="x")
    assert kinds(through) == ["sandbox_denial", "tool_call"]
    assert not (tmp_path / "planted.txt").exists()
    assert host.read_text() == "host secret"


def test_a_binary_file_and_a_huge_file(sandbox: AsyncSandbox) -> None:
    call(sandbox, "exec", command="head -c 4096 /dev/urandom > blob; yes | head -c 2000000 > big")
    blob = call(sandbox, "read_file", path="blob")
    assert "is binary (4,096 bytes)" in blob.error
    assert kinds(blob) == ["tool_call"]
    big = call(sandbox, "read_file", path="big")
    assert isinstance(big.content, str)
    assert big.content.endswith("[... cut by the harness: 2,000,000 bytes in all]")
    assert len(orjson.dumps(big.content)) <= MAX_RESULT_BYTES


def test_a_timeout_is_a_tool_error_not_a_denial(sandbox: AsyncSandbox) -> None:
    r = call(sandbox, "exec", command="sleep 30", timeout_seconds=1)
    assert r.error == "exec: the command did not finish within 1s and was stopped"
    assert kinds(r) == ["tool_call"]


def test_without_a_task_sandbox_the_agent_sees_the_tool_failed_message() -> None:
    r = call(None, "exec", command="ls")
    assert r.error.startswith("this tool needs the task's workspace")
    assert kinds(r) == ["tool_call"]
