"""`evalsi run -f spec.yaml --format json` with a CLI agent, as a user runs it: the guide's
example (a script fixing a checked-out repository, its steps in `runs show --tasks`),
SWE-bench-style instances imported and run (the gold patch resolves every instance, the empty
patch none), and a repository naming no such commit refused before any task."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalsi.benchmarks import import_swebench
from evalsi.sandbox import Level, Sandbox, SandboxSpec, SandboxUnavailable
from tests.e2e.conftest import RunCli
from tests.support.swebench_fixture import TEST_COMMAND, make_instances

ROOT = Path(__file__).resolve().parents[2]


def _bwrap() -> str:
    try:
        Sandbox.create(SandboxSpec(min_isolation=Level.NAMESPACED)).destroy()
    except SandboxUnavailable as e:
        return str(e)
    return ""


pytestmark = pytest.mark.skipif(bool(_bwrap()), reason=f"no namespaced sandbox: {_bwrap()}")


def _json(run_evalsi: RunCli, cwd: Path, *args: Any) -> dict[str, Any]:
    proc = run_evalsi(cwd, *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def _mean(out: dict[str, Any], metric: str) -> float:
    return float(next(m["mean"] for m in out["metrics"] if m["metric"] == metric))


def test_the_guides_example_fixes_one_task_and_records_its_steps(
    run_evalsi: RunCli, tmp_path: Path
) -> None:
    example = tmp_path / "agents-cli"
    shutil.copytree(ROOT / "examples" / "agents-cli", example)
    subprocess.run([sys.executable, str(example / "make_repo.py")], check=True, capture_output=True)
    out = _json(run_evalsi, example, "run", "-f", "fix-add.yaml")
    assert out["tasks"] == {"ok": 2}
    assert _mean(out, "task-success") == 0.5
    shown = _json(run_evalsi, example, "runs", "show", out["run_id"], "--tasks")
    tasks = {t["sample_id"]: t for t in shown["tasks"]}
    fixed, explained = tasks["fix-add"], tasks["explain"]
    steps = fixed["trajectory"]["steps"]
    assert [s["type"] for s in steps] == ["agent", "tool_call", "other", "other"]
    assert steps[1]["tool"] == "shell"
    assert "sed" in steps[1]["arguments"]["command"]
    assert [s["name"] for s in steps[2:]] == ["stdout", "git_diff"]
    assert "+    return a + b" in fixed["output"]
    assert ".evalsi" not in fixed["output"]
    assert fixed["trajectory"]["stop_reason"] == "final_answer"
    assert [c["passed"] for c in fixed["trajectory"]["checks"]] == [True, True]
    assert explained["output"] == ""  # no diff: nothing changed
    assert [c["passed"] for c in explained["trajectory"]["checks"]] == [False, True]


@pytest.mark.parametrize(("gold", "resolved"), [(True, 1.0), (False, 0.0)])
def test_swebench_instances_run_and_grade(
    run_evalsi: RunCli, tmp_path: Path, gold: bool, resolved: float
) -> None:
    repo, instances = make_instances(tmp_path)
    result = import_swebench(
        instances,
        tmp_path / "out",
        {"acme/calc": repo},
        gold=gold,
        test_command=TEST_COMMAND,
        log_format="unittest",
    )
    out = _json(run_evalsi, tmp_path, "run", "-f", result.spec)
    assert out["tasks"] == {"ok": 2}
    assert out["infra_errors"] == 0
    assert _mean(out, "task-success") == resolved
    shown = _json(run_evalsi, tmp_path, "runs", "show", out["run_id"], "--tasks")
    details = sorted(t["trajectory"]["checks"][0]["detail"] for t in shown["tasks"])
    if gold:
        assert details == ["FAIL_TO_PASS 1/1 passed, PASS_TO_PASS 2/2 passed"] * 2
    else:
        assert all(d.startswith("FAIL_TO_PASS 0/1 passed, PASS_TO_PASS 2/2") for d in details)


def test_a_repository_without_the_commit_is_refused_before_any_task(
    run_evalsi: RunCli, tmp_path: Path
) -> None:
    example = tmp_path / "agents-cli"
    shutil.copytree(ROOT / "examples" / "agents-cli", example)
    subprocess.run([sys.executable, str(example / "make_repo.py")], check=True, capture_output=True)
    spec = example / "fix-add.yaml"
    spec.write_text(spec.read_text().replace("commit: HEAD", "commit: v9.9"))
    proc = run_evalsi(example, "run", "-f", spec.name, "--format", "json")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "spec.environment.repository.commit: 'v9.9' names no commit" in proc.stderr
    assert "Traceback" not in proc.stderr
