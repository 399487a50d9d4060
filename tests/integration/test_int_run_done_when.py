"""Issue 3's acceptance run: trials 3, a judge and gates; pass@k / pass^k checked independently."""

from __future__ import annotations

import asyncio
import json
from math import comb
from pathlib import Path

import pytest

from evalsi.runs import execute_run
from evalsi.specs import run_spec_from_yaml
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM

TARGET = '''
from collections import Counter

calls = Counter()

def answer(text):
    """Sample i answers right on its first (i % 4) calls, wrong after: c_i = min(i % 4, 3)."""
    i = int(text[1:])
    j = calls[i]
    calls[i] += 1
    return f"a{i}" if j < i % 4 else "wrong"
'''

SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: done-when}}
spec:
  target: {{python: "donewhen_target:answer"}}
  dataset: {{path: qa.jsonl}}
  trials: 3
  maxConcurrency: 4
  evaluators:
    - ref: exact-match
    - ref: llm-judge
      params: {{rubric: "is the answer right?"}}
  judges:
    default: {{connector: openai-compatible, baseUrl: "{judge}", model: judge-model}}
  gates:
    - "metric('exact-match').passAtK(3) >= 0.5"
    - "metric('exact-match').passHatK(3) <= 0.5"
    - "metric('llm-judge').mean >= 0.5"
"""


def test_trials_judge_and_gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 24
    with (tmp_path / "qa.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"s{i}", "input": f"q{i}", "reference": f"a{i}"}) + "\n")
    (tmp_path / "donewhen_target.py").write_text(TARGET)
    monkeypatch.syspath_prepend(str(tmp_path))
    verdict = '{"score": 0.75, "explanation": "fine"}'
    with StubLLM(default=verdict) as judge:
        spec = run_spec_from_yaml(SPEC.format(judge=judge.openai_url), base_dir=tmp_path)
        result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        judge_calls = judge.calls(OPENAI_PATH)
    em = result.metric("exact-match")
    correct = [min(i % 4, 3) for i in range(n)]  # c_i, computed here, not by evalsi
    for k in (1, 2, 3):
        at_k = sum(1 - comb(3 - c, k) / comb(3, k) for c in correct) / n
        hat_k = sum(comb(c, k) / comb(3, k) for c in correct) / n
        assert em.pass_at_k[str(k)] == pytest.approx(at_k, abs=1e-12)
        assert em.pass_hat_k[str(k)] == pytest.approx(hat_k, abs=1e-12)
    assert em.n == n * 3
    assert em.mean == pytest.approx(sum(correct) / (3 * n))
    assert em.ci.method == "cluster-wilson"  # trials of one sample are correlated
    assert result.metric("llm-judge").mean == pytest.approx(0.75)
    assert result.metric("llm-judge").n == n * 3
    # identical (input, output) pairs are judged once: the cache works inside a run too
    distinct = sum(len({c > j for j in range(3)}) for c in correct)
    assert judge_calls == distinct
    assert [g["verdict"] for g in result.gates] == ["passed", "passed", "passed"]
    assert result.exit_code == 0
