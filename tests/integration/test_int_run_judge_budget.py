"""Budgets count the judges' tokens too; progress reports tokens, spend and an ETA."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalsi.runs import execute_run
from evalsi.specs import run_spec_from_yaml
from tests.support.registry import BUILTINS
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
        result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
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
            execute_run(
                spec, store=tmp_path / "s.db", progress=lambda *a: seen.append(a), registry=BUILTINS
            )
        )
    assert result.status == "done"
    assert seen
    assert seen[-1][0] == 150
    assert all("tokens" in text for _, _, text in seen)
    assert any("ETA ~" in text for _, _, text in seen[:-1])


def test_dry_run_projects_judge_calls_tokens_and_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsi.runs._pricing import _user_table

    setup(tmp_path, monkeypatch, 10)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"j": {"input": 1.0, "output": 2.0}}))
    monkeypatch.setenv("EVALSI_PRICING", str(prices))
    _user_table.cache_clear()
    text = SPEC.format(judge="http://127.0.0.1:9/v1", budget="budget: {tokens: 1000}")
    text = text.replace(
        "  evaluators:\n",
        "  trials: 2\n  evaluators:\n    - ref: pairwise\n",
    )
    spec = run_spec_from_yaml(text, base_dir=tmp_path)
    with StubLLM() as never_called:
        result = asyncio.run(
            execute_run(spec, store=tmp_path / "s.db", dry_run=True, registry=BUILTINS)
        )
        assert never_called.calls() == 0
    _user_table.cache_clear()
    judge = result.plan["projected"]["judges"]["default"]  # type: ignore[index]
    assert judge["calls"] == 10 * 2 * (1 + 2)  # llm-judge once, pairwise twice, per task
    assert judge["tokens"] > 0
    assert judge["usd"] is not None
    assert judge["usd"] > 0
    assert result.plan["projected"]["tokens"] >= judge["tokens"]  # type: ignore[index]
    assert result.plan["budget"]["tokens"]["within"] is False  # type: ignore[index]
    assert "judge       default" in result.table()
