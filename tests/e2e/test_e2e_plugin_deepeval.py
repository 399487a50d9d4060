"""The DeepEval adapter (examples/plugins/deepeval-metrics) installed with `evalsi plugin
install` into a venv of its own with deepeval, graded by `evalsi eval` against the loopback
stub LLM as the judge, equals DeepEval's G-Eval run directly in that venv on the same cases and
the same fake judge."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.stub_llm import StubLLM

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "examples" / "plugins" / "deepeval-metrics"
CRITERIA = "Is the answer factually correct for the question?"
STEP = "Compare the answer with the expected one."
ROWS = [
    {"id": "a", "input": "Capital of France?", "output": "Paris", "reference": "Paris"},
    {"id": "b", "input": "2 + 2?", "output": "5", "reference": "4"},
]

pytestmark = pytest.mark.slow

_DIRECT = """
import json, sys
from deepeval.metrics import GEval
from deepeval.test_case import LLMTestCase, SingleTurnParams
from evalsi_deepeval import Endpoint

url, rows, criteria, step = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
out = []
for r in rows:
    metric = GEval(name="geval", criteria=criteria, model=Endpoint(url, "judge"), async_mode=False,
                   evaluation_steps=[step],
                   evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT,
                                      SingleTurnParams.EXPECTED_OUTPUT])
    metric.measure(LLMTestCase(input=r["input"], actual_output=r["output"],
                               expected_output=r["reference"]))
    out.append([metric.score, metric.reason])
print(json.dumps(out))
"""


def test_deepeval_geval_through_a_plugin_equals_deepeval(tmp_path: Path, run_evalsi: Any) -> None:
    done = run_evalsi(tmp_path, "plugin", "install", PACKAGE, "--evalsi", ROOT, timeout=900)
    assert done.returncode == 0, done.stderr
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    # G-Eval's steps are given, so every judge call scores one case: 7/10 from the stub
    with StubLLM(default='{"score": 7, "reason": "Close, one detail off."}') as stub:
        out = run_evalsi(
            tmp_path,
            "eval",
            "--data",
            "qa.jsonl",
            "--evaluators",
            "deepeval/geval",
            "--param",
            f"deepeval/geval.criteria={CRITERIA}",
            "--param",
            f"deepeval/geval.judge_base_url={stub.openai_url}",
            "--param",
            "deepeval/geval.judge_model=judge",
            "--param",
            f"deepeval/geval.evaluation_steps={json.dumps([STEP])}",
            "--format",
            "json",
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        python = tmp_path / ".evalsi" / "plugins" / "deepeval-metrics" / "bin" / "python"
        direct = subprocess.run(
            [
                str(python),
                "-W",
                "ignore",
                "-c",
                _DIRECT,
                stub.openai_url,
                json.dumps(ROWS),
                CRITERIA,
                STEP,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            env={
                "PATH": "/usr/bin:/bin",
                "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
                "HOME": str(tmp_path),
            },
        )
    assert direct.returncode == 0, direct.stderr[-2000:]
    want = json.loads(direct.stdout.strip().splitlines()[-1])
    results = json.loads(out.stdout)
    metric = next(m for m in results["metrics"] if m["evaluator"] == "geval")
    assert metric["scored"] == 2
    assert metric["mean"] == pytest.approx(sum(s for s, _ in want) / len(want))
    assert want[0][0] == pytest.approx(0.7)
