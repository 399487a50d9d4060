"""evalsi evaluators as MLflow GenAI scorers: a scorer's feedback equals evalsi's verdict, and
``mlflow.genai.evaluate`` aggregates them as evalsi does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mlflow.genai")

import evalsi
from evalsi.adapters import mlflow_scorer
from evalsi.core import Score
from evalsi.evaluators import Skip, evaluator
from evalsi.packs import builtin_registry

ROWS = [  # MLflow's shape: inputs, outputs, expectations
    {"inputs": {"question": "Capital of France?"}, "outputs": "Paris", "expected": "paris"},
    {"inputs": {"question": "2 + 2?"}, "outputs": "5", "expected": "4"},
    {"inputs": {"question": "Colour?"}, "outputs": "Blue", "expected": "blue"},
]


def _feedback(scorer: Any, row: dict[str, Any]) -> Any:
    return scorer(
        inputs=row["inputs"],
        outputs=row["outputs"],
        expectations={"expected_response": row["expected"]},
    )


def test_pass_fail_is_yes_no_as_evalsi_decides() -> None:
    exact = builtin_registry().resolve("exact-match")
    scorer = mlflow_scorer(exact, {"ignore_case": True})
    got = [_feedback(scorer, r).value for r in ROWS]
    here = evalsi.evaluate(
        [
            {"input": r["inputs"]["question"], "output": r["outputs"], "reference": r["expected"]}
            for r in ROWS
        ],
        evaluators=["exact-match"],
        params={"exact-match": {"ignore_case": True}},
        store=":memory:",
    )
    assert got == ["yes" if r.scores[0].passed else "no" for r in here.results]
    assert got == ["yes", "no", "yes"]


def test_numbers_rationales_and_skips() -> None:
    @evaluator(name="t/length", version="1.0.0", output="number")
    def length(record: Any) -> Any:
        if record.output.as_text() == "5":
            raise Skip("a bare number")
        return Score(number=float(len(record.output.as_text())), explanation="characters")

    scorer = mlflow_scorer(length)
    first, second, _ = (_feedback(scorer, r) for r in ROWS)
    assert (first.name, first.value, first.rationale) == ("length", 5.0, "characters")
    assert second.value is None
    assert "skipped: a bare number" in str(second.error.error_message)


_EVALUATE = """
import json, sys
import mlflow
from evalsi.adapters import mlflow_scorer
from evalsi.packs import builtin_registry

mlflow.set_tracking_uri(sys.argv[1])
rows = json.loads(sys.argv[2])
data = [
    {"inputs": r["inputs"], "outputs": r["outputs"],
     "expectations": {"expected_response": r["expected"]}}
    for r in rows
]
scorer = mlflow_scorer(builtin_registry().resolve("exact-match"), {"ignore_case": True})
result = mlflow.genai.evaluate(data=data, scorers=[scorer])
print(json.dumps({k: float(v) for k, v in result.metrics.items()}))
"""


def test_mlflow_genai_evaluate_with_an_evalsi_scorer_matches_evalsi(tmp_path: Path) -> None:
    env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}  # no tracking server needed
    proc = subprocess.run(  # MLflow's own warnings and threads stay in a process of its own
        [
            sys.executable,
            "-W",
            "ignore",
            "-c",
            _EVALUATE,
            (tmp_path / "mlruns").as_uri(),
            json.dumps(ROWS),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads(proc.stdout.strip().splitlines()[-1])
    assert metrics["exact-match/mean"] == pytest.approx(2 / 3)
