"""`evalsi benchmark import` as a user runs it on the example benchmarks: each importer writes a
dataset and the spec that runs it, `--format json` prints exactly one object, the imported spec
runs with its gold agent and scores as the benchmark does, and bad input exits 2 with a message
naming the file or flag (never a traceback)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import RunCli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for name in ("benchmarks", "agents-cli", "agents-simulator"):
        shutil.copytree(EXAMPLES / name, tmp_path / name)
    return tmp_path


def _imported(run_evalsi: RunCli, cwd: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    proc = run_evalsi(cwd, "benchmark", "import", *args, "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    out: dict = json.loads(proc.stdout)
    assert Path(cwd, out["dataset"]).is_file()
    return out


def _mean(run_evalsi: RunCli, cwd: Path, spec: str, env: dict[str, str] | None = None) -> float:
    proc = run_evalsi(cwd, "run", "-f", spec, "--format", "json", env=env, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    metrics = {m["metric"]: m["mean"] for m in json.loads(proc.stdout)["metrics"]}
    return float(metrics["task-success"])


def test_terminal_bench_and_harbor_tasks_import_and_the_oracle_resolves_them(
    work: Path, run_evalsi: RunCli
) -> None:
    tasks = sorted(str(p) for p in (work / "benchmarks" / "terminal-bench").iterdir())
    tasks += sorted(str(p) for p in (work / "benchmarks" / "harbor").iterdir())
    out = _imported(run_evalsi, work, "terminal-bench", *tasks, "-o", "tb")
    assert out["count"] == 4
    assert _mean(run_evalsi, work, out["spec"]) == 1.0
    empty = _imported(
        run_evalsi,
        work,
        "terminal-bench",
        *tasks,
        "-o",
        "tb-empty",
        "--model",
        '{"connector": "scripted", "model": "empty"}',
    )
    assert _mean(run_evalsi, work, empty["spec"]) == 0.0


def test_swebench_gold_resolves_and_the_empty_patch_does_not(
    work: Path, run_evalsi: RunCli
) -> None:
    subprocess.run(
        [sys.executable, str(work / "agents-cli" / "make_repo.py")], check=True, cwd=work
    )
    common = [
        "swebench",
        "agents-cli/instances.jsonl",
        "--repo",
        "acme/calc=agents-cli/calc",
        "--test-command",
        "python3 -m unittest -v",
        "--log-format",
        "unittest",
    ]
    gold = _imported(run_evalsi, work, *common, "--gold", "-o", "gold")
    empty = _imported(run_evalsi, work, *common, "-o", "empty")
    assert gold["count"] == empty["count"] == 2
    assert _mean(run_evalsi, work, gold["spec"]) == 1.0
    assert _mean(run_evalsi, work, empty["spec"]) == 0.0


def test_bfcl_imports_records_graded_with_evalsi_eval(work: Path, run_evalsi: RunCli) -> None:
    out = _imported(run_evalsi, work, "bfcl", "benchmarks/bfcl", "-o", "bfcl", "--with-gold")
    assert out["spec"] is None
    assert out["count"] > 0
    graded = run_evalsi(
        work, "eval", "--data", out["dataset"], "--evaluators", "bfcl-ast", "--format", "json"
    )
    assert graded.returncode == 0, graded.stderr
    [metric] = json.loads(graded.stdout)["metrics"]
    assert metric["mean"] == 1.0  # the gold calls pass BFCL's own checker rules


def test_a_tau2_domain_imports_and_its_gold_agent_leaves_the_right_database(
    work: Path, run_evalsi: RunCli
) -> None:
    env = {
        "PYTHONPATH": f"{work / 'agents-simulator'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    }
    out = _imported(
        run_evalsi,
        work,
        "tau2",
        "agents-simulator/tau-mini",
        "--tools",
        "tau_mini_tools",
        "-o",
        "tau",
        "--agent-model",
        '{"connector": "scripted", "model": "gold"}',
        "--user-model",
        '{"connector": "scripted", "model": "turns"}',
        env=env,
    )
    assert out["count"] == 3
    assert _mean(run_evalsi, work, out["spec"], env=env) == 1.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bfcl", "nowhere", "-o", "x"], "nowhere"),
        (["swebench", "missing.jsonl", "-o", "x"], "missing.jsonl"),
        (["swebench", "x.jsonl", "--repo", "no-equals", "-o", "x"], "--repo 'no-equals'"),
        (["terminal-bench", "missing-dir", "-o", "x"], "missing-dir"),
        (["inspect-log", "missing.eval", "-o", "x"], "missing.eval"),
        (["terminal-bench", "t", "-o", "x", "--model", "{"], "--model: not JSON"),
        (["terminal-bench", "t", "-o", "x", "--model", "[]"], "expected a mapping"),
        (
            [
                *("tau2", "d", "--tools", "no_such_module", "-o", "x"),
                *("--agent-model", "{}", "--user-model", "{}"),
            ],
            "--tools: cannot import",
        ),
    ],
)
def test_bad_input_is_named_and_exits_2(
    tmp_path: Path, run_evalsi: RunCli, args: list[str], message: str
) -> None:
    (tmp_path / "x.jsonl").write_text("")
    proc = run_evalsi(tmp_path, "benchmark", "import", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
