"""`evalsi run -f spec.yaml --format json` with a Responses-compatible agent and an HTTP agent
(the stubs on loopback), then `evalsi runs show RUN --tasks --format json`: the contracts a
user scripts against — one JSON object on stdout, exit 0, each task's trajectory steps typed —
and a spec error that names its field without a traceback."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tests.e2e.conftest import RunCli
from tests.support.stub_http_agent import StubHttpAgent
from tests.support.stub_responses import StubResponses

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "agents-http"


def _workdir(tmp_path: Path, spec: str, old: str, new: str) -> Path:
    shutil.copy(EXAMPLES / "tasks.jsonl", tmp_path / "tasks.jsonl")
    shutil.copy(ROOT / "examples" / "agent" / "bank" / "bank_tools.py", tmp_path)
    (tmp_path / "spec.yaml").write_text((EXAMPLES / spec).read_text().replace(old, new))
    return tmp_path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": f"{tmp_path}{os.pathsep}{path}" if path else str(tmp_path), **extra}


def _run_and_show(run_evalsi: RunCli, cwd: Path, env: dict[str, str]) -> tuple[Any, Any]:
    proc = run_evalsi(cwd, "run", "-f", "spec.yaml", "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = json.loads(proc.stdout)
    shown = run_evalsi(cwd, "runs", "show", out["run_id"], "--tasks", "--format", "json", env=env)
    assert shown.returncode == 0, shown.stderr
    return out, json.loads(shown.stdout)


def test_a_responses_agent_runs_from_the_cli(run_evalsi: RunCli, tmp_path: Path) -> None:
    script = json.loads((EXAMPLES / "responses-script.json").read_text())
    with StubResponses(script) as stub:
        cwd = _workdir(tmp_path, "run-responses.yaml", "http://127.0.0.1:18120/v1", stub.url)
        out, shown = _run_and_show(run_evalsi, cwd, _env(tmp_path))
        assert stub.calls() == 4  # two turns per task
    assert out["status"] == "done"
    assert out["records"] == 2
    means = {m["metric"]: m["mean"] for m in out["metrics"]}
    assert means["exact-match"] == 1.0
    assert means["tool-called"] == 0.5
    tasks = {t["sample_id"]: t for t in shown["tasks"]}
    balance = tasks["balance"]["trajectory"]
    assert [s["type"] for s in balance["steps"]] == [
        "model_call", "reasoning", "tool_call", "model_call", "message",
    ]  # fmt: skip
    assert balance["steps"][1]["name"] == "reasoning"
    call = balance["steps"][2]
    assert (call["tool"], call["arguments"], call["result"]) == (
        "balance",
        {"account": "alice"},
        120,
    )
    pay = tasks["pay"]["trajectory"]
    assert "policy_block" in [s["type"] for s in pay["steps"]]
    assert balance["stop_reason"] == "final_answer"


def test_an_http_agent_runs_from_the_cli(run_evalsi: RunCli, tmp_path: Path) -> None:
    script = json.loads((EXAMPLES / "http-agent-script.json").read_text())
    with StubHttpAgent(script) as stub:
        cwd = _workdir(tmp_path, "run-http.yaml", "http://127.0.0.1:18121/agent", stub.url)
        out, shown = _run_and_show(run_evalsi, cwd, _env(tmp_path, STUB_AGENT_KEY="k-123"))
        assert stub.calls() == 2
        assert all(r.headers.get("X-Api-Key") == "k-123" for r in stub.requests())
    means = {m["metric"]: m["mean"] for m in out["metrics"]}
    assert (means["exact-match"], means["tool-not-called"]) == (0.5, 0.5)
    tasks = {t["sample_id"]: t for t in shown["tasks"]}
    steps = tasks["pay"]["trajectory"]["steps"]
    assert steps[0] == {
        "type": "tool_call",
        "name": "transfer",
        "tool": "transfer",
        "arguments": {"amount": 5, "source": "alice", "target": "bob"},
        "result": "moved 5",
        "executed_by": "agent",  # the agent ran it, as its transcript says; evalsi did not
    }
    assert tasks["balance"]["output"] == "Alice has 120."
    assert "k-123" not in json.dumps(shown)  # the key is never stored


def test_a_bad_body_template_is_refused_naming_the_field(
    run_evalsi: RunCli, tmp_path: Path
) -> None:
    cwd = _workdir(tmp_path, "run-http.yaml", '"session": {{ session | tojson }}}', '"s": {{ x }')
    proc = run_evalsi(cwd, "run", "-f", "spec.yaml", "--format", "json", env=_env(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "spec.target.agent.http.body" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.strip() == "" or "run_id" not in proc.stdout
