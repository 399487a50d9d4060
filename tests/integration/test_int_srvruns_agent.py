"""The server's RunService runs agent specs: with an MCP server reached over HTTP the run works
and its trajectories are stored; function tools and started MCP servers (code of the request's
choosing, run on the server) are refused unless ``allow_python_targets``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.runs import iter_tasks
from evalsi.store import SqlStore
from tests.support.asgi_server import AsgiServer
from tests.support.run_server_main import run_app, run_message, run_state
from tests.support.stub_llm import StubLLM

ROOT = Path(__file__).resolve().parents[2]
BANK = [sys.executable, str(ROOT / "tests" / "support" / "mcp_bank_server.py")]


@pytest.fixture
def bank_url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [*BANK, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(400):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def _doc(model_url: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "srv-agent"},
        "spec": {
            "target": {
                "agent": {
                    "model": {"connector": "openai-compatible", "baseUrl": model_url, "model": "m"},
                    "maxSteps": 3,
                }
            },
            "environment": {"tools": tools},
            "dataset": {"path": "tasks.jsonl"},
            "evaluators": [{"ref": "exact-match"}],
        },
    }


def _served(tmp: Path, **config: Any) -> Any:
    datasets = tmp / "datasets"
    datasets.mkdir(exist_ok=True)
    (datasets / "tasks.jsonl").write_text(
        '{"id": "t1", "input": "balance of alice", "reference": "Alice has 120."}\n'
    )
    return run_state(str(tmp / "srv.db"), datasets, **config)


def test_an_agent_run_with_an_http_mcp_server_runs_on_the_server(
    tmp_path: Path, bank_url: str
) -> None:
    script = {
        "tool_calls": {
            "balance of alice": [{"name": "balance", "arguments": {"account": "alice"}}]
        },
        "answers": {'{"result":120}': "Alice has 120."},
    }
    state = _served(tmp_path)
    with StubLLM(**script) as stub, AsgiServer(run_app(state)) as server:
        client = RunServiceClientSync(server.url)
        doc = _doc(stub.openai_url, [{"mcp": {"url": bank_url}}])
        run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
        done = list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run
        client.close()
    assert done.status == "done", done.error
    db = SqlStore.open(tmp_path / "srv.db")
    [task] = list(iter_tasks(db, run_id, 10))
    assert [s["type"] for s in task["trajectory"]["steps"]] == [
        "model_call",
        "tool_call",
        "model_call",
    ]
    assert task["output"] == "Alice has 120."
    db.close()
    state.store.close()


@pytest.mark.parametrize(
    ("tool", "field"),
    [
        ({"function": "os:getcwd"}, "spec.environment.tools[0].function"),
        ({"mcp": {"command": ["sh", "-c", "id"]}}, "spec.environment.tools[0].mcp.command"),
    ],
)
def test_code_of_the_requests_choosing_is_refused(
    tmp_path: Path, tool: dict[str, Any], field: str
) -> None:
    state = _served(tmp_path)
    with AsgiServer(run_app(state)) as server:
        client = RunServiceClientSync(server.url)
        with pytest.raises(ConnectError) as e:
            client.create_run(
                pb.CreateRunRequest(run=run_message(_doc("http://127.0.0.1:9/v1", [tool])))
            )
        client.close()
    assert e.value.code == Code.INVALID_ARGUMENT
    assert field in e.value.message
    assert "refused by this server" in e.value.message
    state.store.close()


def test_an_mcp_url_pointing_inward_is_checked_by_the_egress_policy(tmp_path: Path) -> None:
    state = _served(tmp_path)
    doc = _doc("http://127.0.0.1:9/v1", [{"mcp": {"url": "http://169.254.169.254/mcp"}}])
    with AsgiServer(run_app(state)) as server:
        client = RunServiceClientSync(server.url)
        with pytest.raises(ConnectError) as e:
            client.create_run(pb.CreateRunRequest(run=run_message(doc)))
        client.close()
    assert e.value.code == Code.INVALID_ARGUMENT
    assert "spec.environment.tools[0].mcp.url" in e.value.message
    state.store.close()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"harness": {"python": "os:getcwd"}}, "spec.target.agent.harness"),
        ({"harness": {"grpc": "127.0.0.1:50051"}}, "spec.target.agent.harness"),
        ({"harness": {"command": {"argv": ["sh", "-c", "id"]}}}, "spec.target.agent.harness"),
        ({"checkers": [{"python": "os:getcwd"}]}, "spec.environment.checkers[0].python"),
    ],
)
def test_harnesses_and_python_checkers_are_refused(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    doc = _doc("http://127.0.0.1:9/v1", [{"mcp": {"url": "http://127.0.0.1:9/mcp"}}])
    if "harness" in change:
        doc["spec"]["target"]["agent"] = {"harness": change["harness"]}
        del doc["spec"]["environment"]
    else:
        doc["spec"]["environment"].update(change)
    state = _served(tmp_path)
    with AsgiServer(run_app(state)) as server:
        client = RunServiceClientSync(server.url)
        with pytest.raises(ConnectError) as e:
            client.create_run(pb.CreateRunRequest(run=run_message(doc)))
        client.close()
    assert e.value.code == Code.INVALID_ARGUMENT
    assert field in e.value.message
    assert "refused by this server" in e.value.message
    state.store.close()


def test_sandbox_tools_fixtures_and_checkers_run_on_the_server(tmp_path: Path) -> None:
    script = {
        "tool_calls": {
            "balance of alice": [
                {"name": "write_file", "arguments": {"path": "answer.txt", "content": "120"}}
            ]
        },
    }
    doc = _doc("", [{"sandbox": {"tools": ["write_file", "read_file"]}}])
    doc["spec"]["environment"].update(
        {
            "sandbox": {"minIsolation": "none"},
            "fixtures": {"files": {"ledger.json": {"alice": 120}}},
            "checkers": [
                {"name": "answered", "exitCode": {"command": ["grep", "-q", "120", "answer.txt"]}},
                {"jsonFile": {"path": "ledger.json", "expect": {"alice": 120}}},
            ],
        }
    )
    doc["spec"]["evaluators"] = [{"ref": "task-success"}]
    state = _served(tmp_path)
    with StubLLM(**script) as stub, AsgiServer(run_app(state)) as server:
        doc["spec"]["target"]["agent"]["model"]["baseUrl"] = stub.openai_url
        client = RunServiceClientSync(server.url)
        run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
        done = list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run
        client.close()
    assert done.status == "done", done.error
    db = SqlStore.open(tmp_path / "srv.db")
    [task] = list(iter_tasks(db, run_id, 10))
    assert task["scores"][0]["scores"]["task-success"] is True
    assert task["trajectory"]["checks"] == [
        {"name": "answered", "passed": True, "detail": "exit 0 (expected 0)"},
        {
            "name": "json_file ledger.json",
            "passed": True,
            "detail": "ledger.json holds the expected value",
        },
    ]
    assert task["trajectory"]["end_state"]["files"]["answer.txt"]["text"] == "120"
    # the same through the API
    from evalsi.client import Client

    with AsgiServer(run_app(state)) as again:
        remote = [t for page in Client(again.url).list_run_tasks(run_id) for t in page]
    assert remote[0]["trajectory"] == task["trajectory"]
    db.close()
    state.store.close()
