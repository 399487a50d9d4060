"""Agents that already exist, through the CLI as a user runs them: an A2A server
(``tests/support/a2a_agent.py``, a2a-sdk) and an agent behind an MCP server
(``tests/support/mcp_agent_server.py``) as ``spec.target.agent``, graded, with the JSON contract
of ``evalsi run`` and the trajectory steps of ``evalsi runs show --tasks``; a spec naming a
tool the server lacks, or an address with no A2A agent, stops with the field named."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a")
pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
MCP_SERVER = ROOT / "tests" / "support" / "mcp_agent_server.py"
ROWS = [
    {"id": "up", "input": "shout this", "reference": "SHOUT THIS"},
    {"id": "stream", "input": "stream two halves", "reference": "two halves"},
    {"id": "fails", "input": "fail please", "reference": "done"},
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def a2a_url() -> Iterator[str]:
    port = _port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.a2a_agent", "--port", str(port)],
        cwd=ROOT,
        env={**ENV, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(10)


def _spec(tmp_path: Path, agent: str, evaluators: str) -> Path:
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    path = tmp_path / "run.yaml"
    path.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: connectors}\n"
        f"spec:\n  target:\n    agent: {agent}\n  dataset: {{path: tasks.jsonl}}\n"
        f"  evaluators:\n{evaluators}"
    )
    return path


def _run(
    run_evalsi: Callable[..., Any], tmp_path: Path, spec: Path
) -> tuple[dict[str, Any], list[Any]]:
    done = run_evalsi(tmp_path, "run", "-f", spec, "--format", "json", env=ENV)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # one JSON object, nothing else on stdout
    shown = run_evalsi(
        tmp_path, "runs", "show", result["run_id"], "--tasks", "--format", "json", env=ENV
    )
    assert shown.returncode == 0, shown.stderr
    return result, json.loads(shown.stdout)["tasks"]


def test_an_a2a_agent_is_run_and_graded(
    run_evalsi: Callable[..., Any], tmp_path: Path, a2a_url: str
) -> None:
    evaluators = "    - ref: exact-match\n    - ref: within-budget\n      params: {max_steps: 8}\n"
    spec = _spec(tmp_path, f'{{kind: a2a, a2a: {{url: "{a2a_url}"}}}}', evaluators)
    result, tasks = _run(run_evalsi, tmp_path, spec)
    assert result["status"] == "done"
    assert result["records"] == 3
    metrics = {m["metric"]: m for m in result["metrics"]}
    assert metrics["exact-match"]["n"] == 3
    assert metrics["exact-match"]["mean"] == pytest.approx(2 / 3)
    assert metrics["within-budget"]["mean"] == 1.0
    assert set(metrics["exact-match"]) >= {"ci", "ci_method", "scored", "skipped", "errors"}
    by_id = {t["sample_id"]: t for t in tasks}
    assert by_id["stream"]["output"] == "two halves"
    steps = by_id["stream"]["trajectory"]["steps"]
    assert steps[0] == {"type": "message", "name": "user", "input": "stream two halves"}
    assert {
        "type": "other",
        "name": "artifact",
        "output": {"artifact": "answer", "text": "two h"},
    } in steps
    assert steps[-1]["output"] == {"state": "completed"}
    assert by_id["fails"]["trajectory"]["stop_reason"] == "failed"
    assert by_id["fails"]["output"] == "cannot do that"


def test_an_mcp_agent_is_run_and_graded(run_evalsi: Callable[..., Any], tmp_path: Path) -> None:
    evaluators = "    - ref: exact-match\n    - ref: tool-called\n      params: {tool: ask}\n"
    agent = f'{{mcp: {{command: [python, "{MCP_SERVER}"], tool: ask}}}}'
    result, tasks = _run(run_evalsi, tmp_path, _spec(tmp_path, agent, evaluators))
    assert result["status"] == "done"
    by_id = {t["sample_id"]: t for t in tasks}
    assert by_id["fails"]["trajectory"]["stop_reason"] == "error"
    call = by_id["up"]["trajectory"]["steps"][-1]
    assert call == {
        "type": "tool_call",
        "name": "ask",
        "tool": "ask",
        "arguments": {"input": "shout this"},
        "result": "plain: shout this",
    }
    metrics = {m["metric"]: m for m in result["metrics"]}
    assert metrics["tool-called"]["mean"] == 1.0


def test_bad_agents_stop_before_the_first_task_naming_the_field(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    evaluators = "    - ref: exact-match\n"
    agent = f'{{mcp: {{command: [python, "{MCP_SERVER}"], tool: nope}}}}'
    done = run_evalsi(tmp_path, "run", "-f", _spec(tmp_path, agent, evaluators), env=ENV)
    assert done.returncode == 2
    assert "spec.target.agent.mcp.tool: MCP server" in done.stderr
    assert "Traceback" not in done.stderr
    agent = f'{{kind: a2a, a2a: {{url: "http://127.0.0.1:{_port()}/"}}}}'
    done = run_evalsi(tmp_path, "run", "-f", _spec(tmp_path, agent, evaluators), env=ENV)
    assert done.returncode == 2
    assert "spec.target.agent.a2a.url: no A2A agent at" in done.stderr
    assert "Traceback" not in done.stderr
