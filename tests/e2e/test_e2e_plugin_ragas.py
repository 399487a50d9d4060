"""The RAGAS adapter (examples/plugins/ragas-metrics) installed with `evalsi plugin install`
into a venv of its own with ragas and langchain, graded by `evalsi eval` against the loopback
stub LLM as the judge, equals RAGAS's AspectCritic run directly in that venv on the same
cases and the same fake judge: with the judge given as params, and with the run's own judge on
the anthropic connector (`--judges`), which the host serves to the plugin over OpenAI's wire."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.stub_llm import ANTHROPIC_PATH, StubLLM

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "examples" / "plugins" / "ragas-metrics"
DEFINITION = "Does the response answer the question correctly?"
ROWS = [
    {"id": "a", "input": "Capital of France?", "output": "Paris"},
    {"id": "b", "input": "2 + 2?", "output": "5"},
]
VERDICT = '{"reason": "It answers the question.", "verdict": 1}'

pytestmark = pytest.mark.slow

_DIRECT = """
import asyncio, json, sys
from langchain_openai import ChatOpenAI
from ragas import SingleTurnSample
from ragas.llms import LangchainLLMWrapper
from ragas.metrics import AspectCritic

url, rows, definition = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
llm = LangchainLLMWrapper(ChatOpenAI(base_url=url, model="judge", api_key="none"))
metric = AspectCritic(name="aspect", definition=definition, llm=llm)
out = [asyncio.run(metric.single_turn_ascore(
    SingleTurnSample(user_input=r["input"], response=r["output"]))) for r in rows]
print(json.dumps(out))
"""


def test_ragas_aspect_critic_through_a_plugin_equals_ragas(tmp_path: Path, run_evalsi: Any) -> None:
    done = run_evalsi(tmp_path, "plugin", "install", PACKAGE, "--evalsi", ROOT, timeout=900)
    assert done.returncode == 0, done.stderr
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with StubLLM(default=VERDICT) as stub:
        args = [
            "eval", "--data", "qa.jsonl", "--evaluators", "ragas/aspect-critic",
            "--param", f"ragas/aspect-critic.definition={DEFINITION}", "--format", "json",
        ]  # fmt: skip
        given = [
            "--param", f"ragas/aspect-critic.judge_base_url={stub.openai_url}",
            "--param", "ragas/aspect-critic.judge_model=judge",
        ]  # fmt: skip
        out = run_evalsi(tmp_path, *args, *given, timeout=300)
        assert out.returncode == 0, out.stderr
        calls = stub.calls()
        # the run's own judge, served to the plugin by the host (anthropic's wire behind it)
        (tmp_path / "judges.yaml").write_text(
            f"default: {{connector: anthropic, baseUrl: '{stub.url}', model: claude-j}}\n"
        )
        judged = run_evalsi(tmp_path, *args, "--judges", "judges.yaml", timeout=300)
        assert judged.returncode == 0, judged.stderr
        judge_calls = stub.calls(ANTHROPIC_PATH)
        python = tmp_path / ".evalsi" / "plugins" / "ragas-metrics" / "bin" / "python"
        argv = [str(python), "-W", "ignore", "-c", _DIRECT, stub.openai_url, json.dumps(ROWS)]
        direct = subprocess.run(
            [*argv, DEFINITION],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            env={"PATH": "/usr/bin:/bin", "RAGAS_DO_NOT_TRACK": "true", "HOME": str(tmp_path)},
        )
    assert direct.returncode == 0, direct.stderr[-2000:]
    want = json.loads(direct.stdout.strip().splitlines()[-1])
    assert want == [1, 1]
    assert calls >= 2  # the judge was asked, through the plugin, for every case
    assert judge_calls >= 2  # and by the run's judge, on its own connector
    for run in (out, judged):
        metrics = json.loads(run.stdout)["metrics"]
        metric = next(m for m in metrics if m["evaluator"] == "aspect-critic")
        assert metric["scored"] == 2, run.stdout
        assert metric["mean"] == pytest.approx(sum(want) / len(want))
