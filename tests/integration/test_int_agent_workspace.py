"""The built-in agent in a workspace the harness owns: sandbox tools on real bubblewrap acting
on each task's sandbox, the spec's and the sample's fixtures written before the agent starts,
checkers (exit code, JSON file) judging what it left, the end state snapshotted, and a sandbox
denial recorded as the agent's behaviour."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalsi.datasets import read_trajectory
from evalsi.runs._execute import execute_run
from evalsi.sandbox import Level, Sandbox, SandboxSpec, SandboxUnavailable
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS
from tests.support.stub_llm import StubLLM


def _bwrap() -> str:
    try:
        Sandbox.create(SandboxSpec(min_isolation=Level.NAMESPACED)).destroy()
    except SandboxUnavailable as e:
        return str(e)
    return ""


pytestmark = pytest.mark.skipif(bool(_bwrap()), reason=f"no namespaced sandbox: {_bwrap()}")

SCRIPT: dict[str, Any] = {
    "tool_calls": {
        "file the report": [
            {
                "name": "write_file",
                "arguments": {"path": "out/report.json", "content": '{"total": 42}'},
            },
            {"name": "read_file", "arguments": {"path": "../../etc/shadow"}},
        ],
        "do nothing": [{"name": "exec", "arguments": {"command": "cat data/input.txt"}}],
    },
}


def _spec(tmp_path: Path, url: str) -> str:
    rows = [
        {"id": "report", "input": "file the report", "reference": "-"},
        {
            "id": "idle",
            "input": "do nothing",
            "reference": "-",
            "metadata": {"fixtures": {"files": {"data/input.txt": "from the sample"}}},
        },
    ]
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: workspace}}
spec:
  target:
    agent:
      model: {{connector: openai-compatible, baseUrl: "{url}", model: stub}}
      maxSteps: 3
  environment:
    tools:
      - sandbox: {{tools: [exec, read_file, write_file]}}
    sandbox: {{minIsolation: namespaced, timeoutSeconds: 10}}
    fixtures: {{files: {{"data/input.txt": "from the spec", "policy.md": "be careful"}}}}
    checkers:
      - exitCode: {{command: [sh, -c, "grep -q 42 out/report.json"]}}
        name: report-written
      - jsonFile: {{path: out/report.json, expect: {{total: 42}}}}
  dataset: {{path: tasks.jsonl}}
  evaluators:
    - ref: policy-violations
    - ref: task-success
"""


def test_sandbox_tools_fixtures_checkers_and_the_end_state(tmp_path: Path) -> None:
    with StubLLM(**SCRIPT) as stub:
        spec = run_spec_from_yaml(_spec(tmp_path, stub.openai_url), base_dir=tmp_path)
        db = SqlStore.open(tmp_path / "s.db")
        result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    assert result.tasks == {"ok": 2}
    rows = {r.record_id: r for r in db.iter_outputs(result.run_id)}
    report = read_trajectory(json.loads(rows["report"].trajectory or "{}"), stored=True)
    idle = read_trajectory(json.loads(rows["idle"].trajectory or "{}"), stored=True)
    kinds = [s.kind for s in report.steps]
    assert kinds.count("tool_call") == 2
    assert "sandbox_denial" in kinds
    denial = next(s for s in report.steps if s.kind == "sandbox_denial")
    assert denial.name == "read_file"
    assert [(c.name, c.passed) for c in report.checks] == [
        ("report-written", True),
        ("json_file out/report.json", True),
    ]
    files = report.end_state["files"]
    assert files["out/report.json"]["json"] == {"total": 42}
    assert files["data/input.txt"]["text"] == "from the spec"
    assert files["policy.md"]["text"] == "be careful"
    # the sample's fixture overlaid the spec's; nothing of the other task is here
    exec_step = next(s for s in idle.steps if s.kind == "tool_call")
    assert "from the sample" in json.dumps(exec_step.output)
    assert "out/report.json" not in idle.end_state["files"]
    assert [c.passed for c in idle.checks] == [False, False]
    assert "exit 2 (expected 0)" in idle.checks[0].detail
    assert "cannot read" in idle.checks[1].detail
    # the denial is the agent's behaviour: counted by the agent pack
    from evalsi.runs import iter_tasks

    scores = {
        t["sample_id"]: {k: v for s in t["scores"] for k, v in s["scores"].items()}
        for t in iter_tasks(db, result.run_id, 10)
    }
    assert scores["report"]["policy-violations"] == 1
    assert scores["idle"]["policy-violations"] == 0
    assert scores["report"]["task-success"] is True  # from the checkers' verdicts
    assert scores["idle"]["task-success"] is False
