"""Agent connectors on the server: an HTTP agent runs from a spec created over the API, its
trajectory stored, and replays there with the agent stopped; what would start a process or read
the server's disk (a started MCP agent, a repository path) is refused unless
``allow_python_targets``; a connector URL pointing at cloud metadata is refused by the egress
policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import UserError
from tests.support.server_state import server_state, serving
from tests.support.stub_http_agent import StubHttpAgent

SCRIPT: dict[str, Any] = {
    "agents": {
        "pay bob 5": {
            "answer": "Paid bob 5.",
            "transcript": [
                {"role": "user", "content": "pay bob 5"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "transfer", "arguments": '{"amount": 5}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "assistant", "content": "Paid bob 5."},
            ],
        }
    }
}  # fmt: skip


def _doc(agent: dict[str, Any], data: str, environment: dict[str, Any] | None = None) -> Any:
    spec: dict[str, Any] = {
        "target": {"agent": agent},
        "dataset": {"path": data},
        "evaluators": [
            {"ref": "exact-match"},
            {"ref": "tool-called", "params": {"tool": "transfer"}},
        ],
    }
    if environment is not None:
        spec["environment"] = environment
    return {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "k"},
            "spec": spec}  # fmt: skip


def _data(tmp: Path) -> str:
    path = tmp / "tasks.jsonl"
    path.write_text(
        json.dumps({"id": "pay", "input": "pay bob 5", "reference": "Paid bob 5."}) + "\n"
    )
    return str(path)


def test_an_http_agent_runs_and_replays_on_the_server(tmp_path: Path) -> None:
    with StubHttpAgent(SCRIPT) as agent, serving(server_state(tmp_path)) as server:
        http = {"url": agent.url, "body": '{"input": {{ input | tojson }}}',
                "output": "$.result.answer", "transcript": "$.result.transcript"}  # fmt: skip
        with evalsi.Client(server.url) as client:
            run = client.create_run(_doc({"kind": "http", "http": http}, _data(tmp_path)))
            assert run.status == "done", run
            assert run.metric("exact-match").mean == 1.0
            tasks = [t for page in client.list_run_tasks(run.run_id) for t in page]
            steps = [s["type"] for s in tasks[0]["trajectory"]["steps"]]
            assert "tool_call" in steps
            calls = agent.calls()
            agent.__exit__(None, None, None)  # the agent is gone
            replay = client.replay_run(run.run_id)
    assert calls == 1
    assert replay.status == "done", replay
    assert replay.tasks == {"ok": 1}
    assert replay.metric("tool-called").mean == 1.0


@pytest.mark.parametrize(
    ("agent", "environment", "field"),
    [
        (
            {"kind": "mcp", "mcp": {"command": ["sh", "-c", "id"], "tool": "ask"}},
            None,
            "spec.target.agent.mcp.command",
        ),
        (
            {"kind": "cli", "cli": {"command": ["true"]}},
            {"repository": {"path": "."}},
            "spec.environment.repository",
        ),
    ],
)
def test_what_would_run_or_read_on_the_server_is_refused(
    tmp_path: Path, agent: dict[str, Any], environment: dict[str, Any] | None, field: str
) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with serving(server_state(tmp_path)) as server, evalsi.Client(server.url) as client:
        doc = _doc(agent, _data(tmp_path), environment)
        if environment is not None:
            doc["spec"]["environment"]["repository"]["path"] = str(tmp_path)
        with pytest.raises(UserError, match=field.replace(".", r"\.") + ": refused by this server"):
            client.create_run(doc)


def test_a_connector_url_pointing_at_cloud_metadata_is_refused(tmp_path: Path) -> None:
    with serving(server_state(tmp_path)) as server, evalsi.Client(server.url) as client:
        for kind, section in (
            ("a2a", {"url": "http://169.254.169.254/"}),
            ("http", {"url": "http://169.254.169.254/x", "output": "$.a"}),
            ("responses", {"baseUrl": "http://169.254.169.254/v1", "model": "m"}),
        ):
            doc = _doc({"kind": kind, kind: section}, _data(tmp_path))
            with pytest.raises(UserError, match=f"spec.target.agent.{kind}"):
                client.create_run(doc)
