"""Budgets count the judges' tokens too; progress reports tokens, spend and an ETA."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalsi.runs import execute_run, run_spec_from_yaml
from tests.support.stub_llm import StubLLM

SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: judged-budget}}
spec:
  target: {{python: "judgebudget_target:answer"}}
  dataset: {{path: qa.jsonl}}
  maxConcurrency: 1
  evaluators:
    - ref: llm-judge
      params: {{rubric: "right?"}}
  judges:
    default: {{connector: openai-compatible, baseUrl: "{judge}", model: j, maxConcurrency: 1}}
  {budget}
"""


def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    with (tmp_path / "qa.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"s{i}", "input": f"q{i}"}) + "\n")
    (tmp_path / "judgebudget_target.py").write_text("def answer(text):\n    return text + '!'\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_judge_tokens_count_against_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(tmp_path, monkeypatch, 200)
    with StubLLM(default='{"score": 1, "explanation": "ok"}') as judge:
        text = SPEC.format(judge=judge.openai_url, budget="budget: {tokens: 300}")
        spec = run_spec_from_yaml(text, base_dir=tmp_path)
        result = asyncio.run(execute_run(spec, store=tmp_path / "s.db"))
    # the Python target reports no tokens: only the judge's calls can have hit the budget
    assert result.status == "stopped"
    assert result.stopped_reason is not None
    assert result.stopped_reason.startswith("budget(tokens)")
    assert sum(result.tasks.values()) < 200


def test_progress_reports_tokens_and_an_eta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(tmp_path, monkeypatch, 150)
    seen: list[tuple[int, int, str]] = []
    with StubLLM(default='{"score": 1, "explanation": "ok"}') as judge:
        spec = run_spec_from_yaml(SPEC.format(judge=judge.openai_url, budget=""), base_dir=tmp_path)
        result = asyncio.run(
            execute_run(spec, store=tmp_path / "s.db", progress=lambda *a: seen.append(a))
        )
    assert result.status == "done"
    assert seen
    assert seen[-1][0] == 150
    assert all("tokens" in text for _, _, text in seen)
    assert any("ETA ~" in text for _, _, text in seen[:-1])
