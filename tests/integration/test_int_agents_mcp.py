"""MCP tools through the harness-owned environment, against real MCP servers: one written with
the ``mcp`` SDK (over stdio and over streamable HTTP) and, when installed, the reference
``@modelcontextprotocol/server-everything`` from the npm registry (``.ci/run`` installs it)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.agents import Approvals, Environment, ToolPolicy, ToolSpec
from evalsi.agents._mcp import McpServer
from evalsi.connectors import InfraError
from evalsi.core import ToolCall, UserError

ROOT = Path(__file__).resolve().parents[2]
BANK = [sys.executable, str(ROOT / "tests" / "support" / "mcp_bank_server.py")]
EVERYTHING = ROOT / ".tools" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bank_url() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [*BANK, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


async def _session(server: McpServer, policy: ToolPolicy) -> list[Any]:
    async with server:
        env = Environment(server.tools, policy=policy)
        hints = {t.spec.name: t.spec.effective() for t in server.tools}
        results = [
            await env.call(ToolCall("balance", {"account": "alice"}, "1")),
            await env.call(
                ToolCall("transfer", {"source": "alice", "target": "bob", "amount": 5}, "2")
            ),
            await env.call(ToolCall("audit", {"account": "bob"}, "3")),
            await env.call(ToolCall("balance", {"account": "nobody"}, "4")),
        ]
        return [hints, *results]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_tools_pass_through_policy_and_are_recorded(transport: str, request: Any) -> None:
    server = (
        McpServer(command=BANK)
        if transport == "stdio"
        else McpServer(url=request.getfixturevalue("bank_url"))
    )
    hints, balance, transfer, audit, missing = asyncio.run(_session(server, ToolPolicy()))
    # annotations as hints: read-only stays read, destructive and "both" are irreversible
    assert hints["balance"] == "read"
    assert hints["transfer"] == hints["audit"] == hints["crash"] == "irreversible"
    assert balance.content == {"result": 120}
    assert [s.kind for s in balance.steps] == ["tool_call"]
    for blocked in (transfer, audit):  # destructive: blocked by default, never reached
        assert [s.kind for s in blocked.steps] == ["policy_block"]
        assert blocked.steps[0].output["rule"] == "destructive"
    assert missing.error  # the tool's own error, shown to the agent
    assert missing.steps[-1].error == missing.error


def test_a_declared_tool_is_trusted_and_an_undeclared_name_is_refused() -> None:
    declared = {"audit": ToolSpec("audit", permission="read")}

    async def go() -> str:
        async with McpServer(command=BANK, declared=declared) as server:
            audit = next(t for t in server.tools if t.spec.name == "audit")
            return audit.spec.effective()

    # the declaration says read, the server's destructive hint still raises it
    assert asyncio.run(go()) == "irreversible"
    with pytest.raises(UserError, match="has no tool named nosuch"):
        asyncio.run(_enter(McpServer(command=BANK, declared={"nosuch": ToolSpec("nosuch")})))


async def _enter(server: McpServer) -> None:
    async with server:
        pass


def test_a_server_that_dies_mid_run_is_an_infra_error_for_that_call() -> None:
    async def go() -> None:
        async with McpServer(command=BANK) as server:
            env = Environment(
                server.tools,
                policy=ToolPolicy(allow=frozenset({"crash"})),
                approvals=Approvals(allow=frozenset({"crash"})),
            )
            with pytest.raises(InfraError, match="MCP server"):
                await env.call(ToolCall("crash", {}, "1"))

    asyncio.run(go())


def test_a_server_that_does_not_start_names_itself_and_its_stderr(tmp_path: Path) -> None:
    script = tmp_path / "bad_server.py"
    script.write_text(
        "import sys\nprint('no config file: /etc/bank.yaml', file=sys.stderr)\nsys.exit(2)\n"
    )
    with pytest.raises(UserError) as e:
        asyncio.run(_enter(McpServer(command=[sys.executable, str(script)])))
    assert "did not start" in e.value.message
    assert "no config file: /etc/bank.yaml" in e.value.message
    assert "ExceptionGroup" not in e.value.message  # the cause, not the SDK's task group
    with pytest.raises(UserError, match="did not start"):
        asyncio.run(_enter(McpServer(command=["/nonexistent/mcp-server"])))


def test_the_server_does_not_inherit_this_processs_secrets(tmp_path: Path) -> None:
    script = tmp_path / "env_server.py"
    script.write_text(
        "import os\n"
        "from mcp.server.mcpserver import MCPServer\n"
        "s = MCPServer('env')\n"
        "@s.tool()\n"
        "def secret() -> str:\n"
        "    got = os.environ.get\n"
        "    return got('EVALSI_TEST_SECRET', 'absent') + '/' + got('GIVEN', '')\n"
        "s.run('stdio')\n"
    )
    os.environ["EVALSI_TEST_SECRET"] = "hunter2"
    try:

        async def go() -> Any:
            async with McpServer(command=[sys.executable, str(script)], env={"GIVEN": "yes"}) as s:
                return await s.tools[0].call({})

        assert asyncio.run(go()) == {"result": "absent/yes"}
    finally:
        del os.environ["EVALSI_TEST_SECRET"]


@pytest.mark.skipif(
    not EVERYTHING.exists() or shutil.which("node") is None,
    reason="@modelcontextprotocol/server-everything is not installed (.ci/run installs it)",
)
def test_the_reference_server_everything_works_through_the_environment() -> None:
    async def go() -> tuple[dict[str, str], Any]:
        async with McpServer(command=[str(EVERYTHING), "stdio"]) as server:
            names = {t.spec.name: t.spec.effective() for t in server.tools}
            env = Environment(server.tools, policy=ToolPolicy(allow=frozenset({"echo"})))
            return names, await env.call(ToolCall("echo", {"message": "hi there"}, "1"))

    names, echo = asyncio.run(go())
    assert "echo" in names
    assert not echo.error
    assert "hi there" in str(echo.content)
    assert [s.kind for s in echo.steps] == ["tool_call"]
