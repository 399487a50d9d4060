"""The DeepEval adapter (examples/plugins/deepeval-metrics) installed with `evalsi plugin
install` into a venv of its own with deepeval, graded by `evalsi eval` against the loopback
stub LLM as the judge, equals DeepEval's G-Eval run directly in that venv on the same cases and
the same fake judge: with the judge given as params, and with the run's own judge (`--judges`),
which the host serves to the plugin through its judge layer (a re-run asks the stub nothing)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.stub_llm import OPENAI_PATH, StubLLM

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
        args = [
            "eval", "--data", "qa.jsonl", "--evaluators", "deepeval/geval",
            "--param", f"deepeval/geval.criteria={CRITERIA}",
            "--param", f"deepeval/geval.evaluation_steps={json.dumps([STEP])}",
            "--format", "json",
        ]  # fmt: skip
        given = [
            "--param", f"deepeval/geval.judge_base_url={stub.openai_url}",
            "--param", "deepeval/geval.judge_model=judge",
        ]  # fmt: skip
        out = run_evalsi(tmp_path, *args, *given, timeout=300)
        assert out.returncode == 0, out.stderr
        (tmp_path / "judges.yaml").write_text(
            f"default: {{connector: openai-compatible, baseUrl: '{stub.openai_url}', model: j}}\n"
        )
        before = stub.calls(OPENAI_PATH)
        judged = run_evalsi(tmp_path, *args, "--judges", "judges.yaml", timeout=300)
        assert judged.returncode == 0, judged.stderr
        judge_calls = stub.calls(OPENAI_PATH) - before
        again = run_evalsi(tmp_path, *args, "--judges", "judges.yaml", timeout=300)
        assert again.returncode == 0, again.stderr
        assert stub.calls(OPENAI_PATH) - before == judge_calls  # the re-run: from the cache
        judge_model = {r.body["model"] for r in stub.requests(OPENAI_PATH)[before:]}
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
    assert want[0][0] == pytest.approx(0.7)
    assert judge_calls == len(ROWS)  # one G-Eval call per case, by the run's judge
    assert judge_model == {"j"}  # the run's judge's own connector made them
    for run in (out, judged, again):
        metric = next(m for m in json.loads(run.stdout)["metrics"] if m["evaluator"] == "geval")
        assert metric["scored"] == 2, run.stdout
        assert metric["mean"] == pytest.approx(sum(s for s, _ in want) / len(want))
