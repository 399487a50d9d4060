"""The official MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``) as an external client:
``tools/list``, ``tools/call`` and ``resources/read`` against ``evalsi mcp`` over stdio, and
``tools/list`` against ``/mcp`` on ``evalsi serve`` over streamable HTTP."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.server_state import EVALSI, free_port, serve_subprocess

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = ROOT / ".tools" / "npm" / "node_modules" / ".bin" / "mcp-inspector"

pytestmark = pytest.mark.skipif(
    not INSPECTOR.exists(),
    reason="the MCP Inspector is not installed: npm install --prefix .tools/npm "
    "@modelcontextprotocol/inspector@0.15.0 (.ci/run does)",
)


def inspect(*args: str, cwd: Path) -> dict:
    proc = subprocess.run(
        [str(INSPECTOR), "--cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    return json.loads(proc.stdout)


def test_the_inspector_lists_and_calls_the_tools_over_stdio(tmp_path: Path) -> None:
    stdio = [str(EVALSI), "mcp"]
    listed = inspect(*stdio, "--method", "tools/list", cwd=tmp_path)
    names = [t["name"] for t in listed["tools"]]
    assert names[:2] == ["list_evaluators", "evaluate"]
    assert "compare_runs" in names
    assert all(t["inputSchema"]["type"] == "object" for t in listed["tools"])
    called = inspect(
        *stdio,
        "--method",
        "tools/call",
        "--tool-name",
        "evaluate",
        "--tool-arg",
        'records=[{"id": "1", "output": {"text": "Paris"}, "reference": {"text": "Paris"}}]',
        "--tool-arg",
        'evaluators=[{"ref": "exact-match"}]',
        cwd=tmp_path,
    )
    assert not called.get("isError")
    graded = json.loads(called["content"][0]["text"])
    assert graded["metrics"][0]["mean"] == 1.0
    report = inspect(
        *stdio,
        "--method",
        "resources/read",
        "--uri",
        "evalsi://runs/latest/report.md",
        cwd=tmp_path,
    )
    assert graded["runId"] in report["contents"][0]["text"]
    refused = inspect(
        *stdio, "--method", "tools/call", "--tool-name", "get_run", "--tool-arg", "id=nope",
        cwd=tmp_path,
    )  # fmt: skip
    assert refused["isError"]
    assert refused["content"][0]["text"].startswith("not_found")


def test_the_inspector_lists_the_tools_at_slash_mcp_on_the_server(tmp_path: Path) -> None:
    port = free_port()
    with serve_subprocess("--port", str(port), cwd=tmp_path) as server:
        url = f"http://127.0.0.1:{port}"
        server.wait_healthy(url)
        listed = inspect(
            f"{url}/mcp", "--transport", "http", "--method", "tools/list", cwd=tmp_path
        )
    assert "start_run" in [t["name"] for t in listed["tools"]]
