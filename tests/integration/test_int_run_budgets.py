"""The usd and wall-clock budgets stop a run cleanly, and the stopped run resumes to completion."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalsi.runs._execute import execute_run
from evalsi.runs._pricing import _user_table
from evalsi.specs import BudgetSpec
from tests.integration.run_support import model_spec, write_qa
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM


def test_usd_budget_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.json"
    # 1,000,000 USD per 1M tokens: each call costs about as many dollars as it has tokens.
    prices.write_text(json.dumps({"stub-model": {"input": 1e6, "output": 1e6}}))
    monkeypatch.setenv("EVALSI_PRICING", str(prices))
    _user_table.cache_clear()
    data = write_qa(tmp_path / "qa.jsonl", 40)
    with StubLLM() as stub:
        spec = model_spec(stub.openai_url, data, concurrency=2, budget=BudgetSpec(usd=50.0))
        stopped = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        calls = stub.calls(OPENAI_PATH)
        resumed = asyncio.run(
            execute_run(
                model_spec(stub.openai_url, data),
                store=tmp_path / "s.db",
                resume=stopped.run_id,
                registry=BUILTINS,
            )
        )
        total = stub.calls(OPENAI_PATH)
    _user_table.cache_clear()
    assert stopped.status == "stopped"
    assert stopped.stopped_reason is not None
    assert stopped.stopped_reason.startswith("budget(usd)")
    assert stopped.exit_code == 3
    assert 0 < calls < 40
    assert resumed.status == "done"
    assert total == 40  # the resumed run did only what was left


def test_wall_clock_budget_stops_the_run(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 60)
    with StubLLM(latency_ms=100) as stub:
        spec = model_spec(stub.openai_url, data, concurrency=2, budget=BudgetSpec(wall_clock_s=0.5))
        stopped = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        calls = stub.calls(OPENAI_PATH)
    assert stopped.status == "stopped"
    assert stopped.stopped_reason is not None
    assert stopped.stopped_reason.startswith("budget(wall")
    assert 0 < calls < 60
    # every task is accounted for: done, or cancelled / never started (resumable)
    assert sum(stopped.tasks.values()) <= 60
