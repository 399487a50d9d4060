"""`evalsi replay` as a user runs it: an agent run recorded against the stub model, then
replayed with the model gone (the same trajectories, other evaluators, the JSON contract plus
`replay_of`), branched from a step with the model back, and refused plainly (exit 2, no
traceback) for a run that is not an agent run, an unknown run, a bad step or a stray --param."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tests.e2e.conftest import RunCli
from tests.support.stub_llm import OPENAI_PATH, StubLLM

ROOT = Path(__file__).resolve().parents[2]
BANK = ROOT / "examples" / "agent" / "bank"


def _workdir(tmp: Path, url: str) -> dict[str, str]:
    shutil.copy(BANK / "bank_tools.py", tmp)
    shutil.copy(BANK / "tasks.jsonl", tmp)
    spec = (BANK / "run-agent.yaml").read_text().replace("http://127.0.0.1:18082/v1", url)
    (tmp / "run.yaml").write_text(spec)
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": f"{tmp}{os.pathsep}{path}" if path else str(tmp)}


def _steps(run_evalsi: RunCli, tmp: Path, run_id: str, env: dict[str, str]) -> list[Any]:
    shown = run_evalsi(tmp, "runs", "show", run_id, "--tasks", "--format", "json", env=env)
    assert shown.returncode == 0, shown.stderr
    return [
        [(s["type"], s.get("tool"), s.get("result")) for s in t["trajectory"]["steps"]]
        for t in json.loads(shown.stdout)["tasks"]
    ]


def test_replay_regrades_with_the_model_gone_and_branches_with_it_back(
    tmp_path: Path, run_evalsi: RunCli
) -> None:
    script = json.loads((BANK / "stub-script.json").read_text())
    with StubLLM(**script) as stub:
        env = _workdir(tmp_path, stub.openai_url)
        recorded = run_evalsi(tmp_path, "run", "-f", "run.yaml", "--format", "json", env=env)
        assert recorded.returncode == 0, recorded.stderr
        run_id = json.loads(recorded.stdout)["run_id"]
        calls = stub.calls(OPENAI_PATH)
        stub.stop()  # the model is gone: a replay must not need it

        proc = run_evalsi(
            tmp_path,
            "replay",
            run_id,
            "--evaluators",
            "exact-match,tool-call-accuracy,step-efficiency",
            "--format",
            "json",
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        out = json.loads(proc.stdout)
        assert out["replay_of"] == run_id
        assert out["status"] == "done"
        assert out.get("infra_errors", 0) == 0
        assert {m["evaluator"] for m in out["metrics"]} == {
            "exact-match",
            "tool-call-accuracy",
            "step-efficiency",
        }
        assert _steps(run_evalsi, tmp_path, out["run_id"], env) == _steps(
            run_evalsi, tmp_path, run_id, env
        )
        # a table too, naming the run it replays
        table = run_evalsi(tmp_path, "replay", run_id, "--quiet", env=env)
        assert table.returncode == 0, table.stderr
        assert f"replay of {run_id}" in table.stdout

        # branching needs the model for what follows the branch point: with it gone those
        # tasks are lost to infrastructure (exit 3), never faked
        gone = run_evalsi(
            tmp_path, "replay", run_id, "--branch-from-step", "1", "--format", "json", env=env
        )
        assert gone.returncode == 3, gone.stderr
        assert json.loads(gone.stdout)["infra_errors"] > 0
    assert calls > 0


def test_replay_refuses_what_it_cannot_replay(tmp_path: Path, run_evalsi: RunCli) -> None:
    (tmp_path / "qa.jsonl").write_text(
        json.dumps({"id": "a", "input": "q", "output": "x", "reference": "x"}) + "\n"
    )
    scored = run_evalsi(
        tmp_path, "eval", "--data", "qa.jsonl", "--evaluators", "exact-match", "--format", "json"
    )
    assert scored.returncode == 0, scored.stderr
    score_id = json.loads(scored.stdout)["run_id"]
    cases = [
        (["replay", score_id], "replay plays an agent run"),
        (["replay", "no-such-run"], "no-such-run"),
        (["replay", score_id, "--branch-from-step", "-2"], "--branch-from-step must be 0 or more"),
        (["replay", score_id, "--param", "exact-match.x=1"], "--param needs --evaluators"),
        (["replay", score_id, "--evaluators", ","], "--evaluators is empty"),
    ]
    for args, message in cases:
        proc = run_evalsi(tmp_path, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""


def test_a_connector_run_replays_without_its_secret_or_its_agent(
    tmp_path: Path, run_evalsi: RunCli
) -> None:
    """An HTTP agent wanting a key: recorded with the key set, replayed with neither the key
    nor the agent (CI re-grades with no secret)."""
    from tests.support.stub_http_agent import StubHttpAgent

    examples = ROOT / "examples" / "agents-http"
    script = json.loads((examples / "http-agent-script.json").read_text())
    shutil.copy(examples / "tasks.jsonl", tmp_path)
    with StubHttpAgent(script) as agent:
        spec = (examples / "run-http.yaml").read_text()
        (tmp_path / "run.yaml").write_text(spec.replace("http://127.0.0.1:18121/agent", agent.url))
        recorded = run_evalsi(
            tmp_path, "run", "-f", "run.yaml", "--format", "json", env={"STUB_AGENT_KEY": "k-123"}
        )
        assert recorded.returncode in (0, 1), recorded.stderr
        calls = agent.calls()
    out = json.loads(recorded.stdout)
    replayed = run_evalsi(tmp_path, "replay", out["run_id"], "--format", "json")
    assert replayed.returncode in (0, 1), replayed.stderr
    again = json.loads(replayed.stdout)
    assert again["replay_of"] == out["run_id"]
    assert again.get("infra_errors", 0) == 0
    assert {m["metric"]: m["mean"] for m in again["metrics"]} == {
        m["metric"]: m["mean"] for m in out["metrics"]
    }
    assert calls > 0
