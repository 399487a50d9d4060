"""Issue 18's finish line, as a user runs it: the seed domain pack (examples/agent/helpdesk)
against the scripted stub model over real HTTP, with function tools, the pack's Python MCP
server and @modelcontextprotocol/server-everything, exporting every step to a real
``evalsi serve``. The run prints per-category results with pass^k; its trajectories hold policy
blocks (judged not measured, not failed), approvals and faults; the server holds one trace per
task, tagged with the run."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "examples" / "agent" / "helpdesk"
EVERYTHING = ROOT / ".tools" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not EVERYTHING.exists(),
    reason="Node.js or @modelcontextprotocol/server-everything is missing (.ci/run installs it)",
)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the process exited before listening"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on {port}")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[str]:
    port = _port()
    work = tmp_path / "server"
    work.mkdir()
    evalsi = Path(sys.executable).with_name("evalsi")
    proc = subprocess.Popen(
        [str(evalsi), "serve", "--port", str(port)],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def stub_model(tmp_path: Path) -> Iterator[int]:
    port = 18083  # the port run-stub.yaml names
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "stub_llm_server.py"),
            "--port",
            str(port),
            "--config",
            str(PACK / "stub-script.json"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(port, proc)
        yield port
    finally:
        proc.kill()
        proc.wait()


EVALSI = str(Path(sys.executable).with_name("evalsi"))


def _run(spec: Path, serve: str, store: Path) -> dict[str, Any]:
    """``evalsi run`` from the repository root, as the pack's specs say (their MCP commands
    are relative to it), exporting to ``serve``."""
    done = subprocess.run(
        [
            EVALSI,
            "run",
            "-f",
            str(spec),
            "--format",
            "json",
            "--otlp-endpoint",
            serve,
            "--store",
            str(store),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{PACK}:{ROOT / 'src'}"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: the bad variant misses its gates
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["status"] == "done"
    return out


def _tasks(run_id: str, store: Path) -> list[dict[str, Any]]:
    shown = subprocess.run(
        [
            EVALSI,
            "runs",
            "show",
            run_id,
            "--tasks",
            "--limit",
            "1000",
            "--format",
            "json",
            "--store",
            str(store),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(shown.stdout)["tasks"])


def _copy(name: str, tmp_path: Path, extra: str = "") -> Path:
    text = (PACK / name).read_text()
    text = text.replace("path: scenarios.jsonl", f"path: {PACK / 'scenarios.jsonl'}")
    text = text.replace("trials: 1", "trials: 3").replace(
        "  evaluators:\n", "  evaluators:\n" + extra
    )
    spec = tmp_path / name
    spec.write_text(text)
    return spec


def test_the_seed_pack_runs_end_to_end_with_traces_on_evalsi_serve(
    run_evalsi: Callable[..., Any], serve: str, stub_model: int, tmp_path: Path
) -> None:
    store = tmp_path / "run.db"
    # the built-in agent over the scripted stub model (real HTTP): per-category pass^k
    out = _run(_copy("run-stub.yaml", tmp_path), serve, store)
    categories = {c["value"]: c for c in out["categories"]}
    assert set(categories) == {"task-execution", "tool-calling", "policy-compliance", "robustness"}
    for c in categories.values():
        task = next(m for m in c["metrics"] if m["evaluator"] == "task-success")
        assert task["n"] == 15  # five scenarios x three trials
        assert set(task["pass_hat_k"]) == {"1", "2", "3"}
    tasks = _tasks(out["run_id"], store)
    kinds = {s["type"] for t in tasks for s in t["trajectory"]["steps"]}
    assert {"approval", "fault", "tool_call", "model_call"} <= kinds
    assert all(t["trajectory"]["checks"] for t in tasks)
    # the known-bad trajectories played through the same environment: the denied tool is
    # blocked, and a predicate expecting that call is not measured, not failed
    blocked = "    - {ref: tool-called, name: deletes-account, params: {tool: delete_customer}}\n"
    bad = _run(_copy("run-scripted-bad.yaml", tmp_path, blocked), serve, store)
    bad_tasks = _tasks(bad["run_id"], store)
    assert any(s["type"] == "policy_block" for t in bad_tasks for s in t["trajectory"]["steps"])
    verdict = next(
        v
        for t in bad_tasks
        if t["sample_id"] == "delete-account"
        for v in t["scores"]
        if v["evaluator"] == "deletes-account"
    )
    assert verdict["outcome"] == "skipped"
    assert verdict["reason"].startswith("not_measured(blocked_by_policy)")
    # every task of both runs is a trace on evalsi serve, tagged with its run
    for run_id, n in ((out["run_id"], len(tasks)), (bad["run_id"], len(bad_tasks))):
        deadline = time.monotonic() + 30
        while True:
            listed = run_evalsi(
                tmp_path,
                "traces",
                "list",
                "--server",
                serve,
                "--attr",
                f"evalsi.run_id={run_id}",
                "--limit",
                "1000",
                "--format",
                "json",
            )
            assert listed.returncode == 0, listed.stderr
            traces = json.loads(listed.stdout)["traces"]
            if len(traces) == n or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(traces) == n
