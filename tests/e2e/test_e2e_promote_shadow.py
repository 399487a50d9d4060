"""`evalsi promote` and `evalsi shadow` as a user runs them: a run's failing tasks promoted to a
JSONL file with provenance, then replayed against a better and a worse candidate (exit codes
0 and 1, the JSON contract), and bad input refused with exit code 2 and no traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

TARGETS = """
GOOD = {f"q{i}": f"a{i}" for i in range(30)}

def flaky(text):
    return "wrong" if int(text[1:]) % 3 == 0 else GOOD[text]

def fixed(text):
    return GOOD[text]

def broken(text):
    return "wrong"
"""


def _spec(tmp: Path, name: str, target: str) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"""apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: {name}}}
spec:
  target: {{python: "shadow_targets:{target}"}}
  dataset: {{path: data.jsonl}}
  evaluators: [{{ref: exact-match}}]
"""
    )
    return path


def _setup(tmp: Path) -> dict[str, str]:
    (tmp / "shadow_targets.py").write_text(TARGETS)
    rows = [{"id": f"s{i}", "input": f"q{i}", "reference": f"a{i}"} for i in range(30)]
    (tmp / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name, target in (("prod", "flaky"), ("better", "fixed"), ("worse", "broken")):
        _spec(tmp, name, target)
    paths = [p for p in (os.environ.get("PYTHONPATH"), str(tmp)) if p]
    return {"PYTHONPATH": os.pathsep.join(paths)}


def test_promote_then_shadow_a_better_and_a_worse_candidate(
    run_evalsi: Any, tmp_path: Path
) -> None:
    env = _setup(tmp_path)
    run = run_evalsi(tmp_path, "run", "-f", "prod.yaml", "--format", "json", env=env)
    assert run.returncode == 0, run.stderr
    run_id = json.loads(run.stdout)["run_id"]

    out = run_evalsi(
        tmp_path, "promote", "--run", run_id, "--failing", "-o", "rows.jsonl",
        "--format", "json", env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"] == 10
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"s{i}" for i in range(0, 30, 3)]
    assert {r["output"] for r in rows} == {"wrong"}
    assert rows[0]["metadata"]["promoted"]["run_id"] == run_id
    assert rows[0]["metadata"]["promoted"]["reasons"][0]["evaluator"] == "exact-match"

    better = run_evalsi(
        tmp_path, "shadow", "-f", "better.yaml", "--data", "rows.jsonl", "--format", "json",
        env=env,
    )  # fmt: skip
    assert better.returncode == 0, better.stderr
    doc = json.loads(better.stdout)
    (m,) = doc["comparison"]["metrics"]
    assert (m["n_paired"], m["mean_a"], m["mean_b"], m["verdict"]) == (10, 0.0, 1.0, "improved")
    assert doc["regressions"] == []

    # every row promoted (passing ones too): the worse candidate breaks what used to pass
    everything = run_evalsi(
        tmp_path, "promote", "--run", run_id, "-o", "all.jsonl", "--limit", "30", env=env
    )
    assert everything.returncode == 0, everything.stderr
    worse = run_evalsi(
        tmp_path, "shadow", "-f", "worse.yaml", "--data", "all.jsonl", "--format", "json",
        env=env,
    )  # fmt: skip
    assert worse.returncode == 1, worse.stderr
    doc = json.loads(worse.stdout)
    (reg,) = doc["regressions"]
    assert reg["metric"] == "exact-match"
    assert reg["ci"][1] < 0
    assert reg["delta"] == -20 / 30  # the 20 that passed now fail; the 10 failing still do

    table = run_evalsi(tmp_path, "shadow", "-f", "worse.yaml", "--data", "all.jsonl", env=env)
    assert table.returncode == 1
    assert "regression: exact-match" in table.stderr


def test_bad_input_exits_2_without_a_traceback(run_evalsi: Any, tmp_path: Path) -> None:
    env = _setup(tmp_path)
    (tmp_path / "empty.jsonl").write_text("")
    cases = [
        ("shadow", "-f", "better.yaml", "--data", "empty.jsonl"),
        ("shadow", "-f", "better.yaml", "--data", "missing.jsonl"),
        ("promote", "--run", "nope", "-o", "x.jsonl"),
        ("promote", "--traces", "--dataset", "d", "-o", "x.jsonl"),
        ("promote", "--run", "latest"),
    ]
    run_evalsi(tmp_path, "run", "-f", "prod.yaml", env=env)
    for args in cases:
        done = run_evalsi(tmp_path, *args, env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr
