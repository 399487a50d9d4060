"""The Run examples work as their comments say: the spec loads, runs, gates and exits 0."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_python_target_example_runs(run_evalsi: Callable[..., Any], tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(EXAMPLES)}
    spec = EXAMPLES / "run-python.yaml"
    plan = run_evalsi(tmp_path, "run", "-f", spec, "--dry-run", "--format", "json", env=env)
    assert plan.returncode == 0, plan.stderr
    assert not (tmp_path / ".evalsi").exists()  # a dry run stores nothing
    done = run_evalsi(tmp_path, "run", "-f", spec, "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "done"
    em = next(m for m in out["metrics"] if m["metric"] == "exact-match")
    assert em["n"] == 40  # 20 samples x 2 trials
    assert set(em["pass_at_k"]) == {"1", "2"}
    assert [g["verdict"] for g in out["gates"]] == ["passed"]
    shown = run_evalsi(tmp_path, "runs", "show", out["run_id"], "--format", "json")
    assert shown.returncode == 0, shown.stderr


def test_a_bad_spec_names_file_line_and_field(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    spec = tmp_path / "run.yaml"
    text = (EXAMPLES / "run-python.yaml").read_text().replace("maxConcurrency", "maxConcurency")
    spec.write_text(text.replace("path: qa.jsonl", f"path: {EXAMPLES / 'qa.jsonl'}"))
    proc = run_evalsi(tmp_path, "run", "-f", spec)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "run.yaml:" in proc.stderr
    assert "maxConcurency" in proc.stderr
    assert "maxConcurrency" in proc.stderr


def test_custom_evaluator_example_runs_from_anywhere(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "custom_evaluator.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "numeric-close" in proc.stdout
    assert not (tmp_path / ".evalsi").exists()  # it uses an in-memory store
