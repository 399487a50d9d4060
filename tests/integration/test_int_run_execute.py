"""The Run executor against the stub LLM over real HTTP: trials, pass@k, infra errors, target
errors, concurrency, budgets, dry run and streaming."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import Counter
from pathlib import Path

import pytest

from evalsi.core import Outcome
from evalsi.runs._execute import execute_run
from evalsi.specs import BudgetSpec, DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from tests.integration.run_support import fast_retries, model_spec, write_qa
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, Fault, StubLLM


def _brute_pass_k(counts: list[int], n: int, k: int) -> tuple[float, float]:
    """Average over samples of P(any / all of k trials drawn without replacement pass)."""
    at = hat = 0.0
    for c in counts:
        subsets = list(itertools.combinations([1] * c + [0] * (n - c), k))
        at += sum(any(s) for s in subsets) / len(subsets)
        hat += sum(all(s) for s in subsets) / len(subsets)
    return at / len(counts), hat / len(counts)


def test_trials_pass_at_k_match_the_answer_table(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 12)
    answers = {f"q{i}": f"a{i}" for i in range(12) if i % 3 != 0}  # 8 of 12 right
    with StubLLM(answers=answers) as stub:
        spec = model_spec(
            stub.openai_url, data, trials=3, gates=("metric('exact-match').passHatK(3) >= 0.5",)
        )
        result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        assert stub.calls(OPENAI_PATH) == 36
        seeds = {r.body["seed"] for r in stub.requests(OPENAI_PATH)}
    assert len(seeds) == 36  # one seed per (sample, trial)
    m = result.metric("exact-match")
    counts = [3 if f"q{i}" in answers else 0 for i in range(12)]
    for k in (1, 2, 3):
        at, hat = _brute_pass_k(counts, 3, k)
        assert m.pass_at_k[str(k)] == pytest.approx(at)
        assert m.pass_hat_k[str(k)] == pytest.approx(hat)
    assert (m.n, m.ci.method, m.clusters) == (36, "cluster-wilson", 12)
    assert m.trial_variance == 0.0
    assert result.exit_code == 0
    d = result.to_dict()
    assert set(d["metrics"][0]["pass_at_k"]) == {"1", "2", "3"}
    assert d["infra_errors"] == 0


_CALLS: Counter[str] = Counter()
_LOCK = threading.Lock()


def flaky_answer(question: str) -> str:
    """Right on the first ``int(question[1:]) % 4`` calls for that question, wrong after."""
    with _LOCK:
        _CALLS[question] += 1
        call = _CALLS[question]
    return "a" + question[1:] if call <= int(question[1:]) % 4 else "wrong"


def raising_answer(question: str) -> str:
    if int(question[1:]) % 5 == 0:
        raise ValueError(f"cannot answer {question}")
    return "a" + question[1:]


def _python_spec(ref: str, data: Path, trials: int) -> RunSpec:
    return RunSpec(
        name="py",
        target=TargetSpec(kind="python", python=ref),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
        trials=trials,
        max_concurrency=4,
    )


def test_varied_trials_match_enumeration(tmp_path: Path) -> None:
    _CALLS.clear()
    data = write_qa(tmp_path / "qa.jsonl", 16)
    spec = _python_spec(f"{__name__}:flaky_answer", data, trials=3)
    result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
    m = result.metric("exact-match")
    counts = [min(i % 4, 3) for i in range(16)]
    for k in (1, 2, 3):
        at, hat = _brute_pass_k(counts, 3, k)
        assert m.pass_at_k[str(k)] == pytest.approx(at)
        assert m.pass_hat_k[str(k)] == pytest.approx(hat)
    assert m.trial_variance is not None
    assert m.trial_variance > 0


def test_python_target_raising_is_an_error_not_a_failure(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 20)
    spec = _python_spec(f"{__name__}:raising_answer", data, trials=1)
    result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
    m = result.metric("exact-match")
    assert (m.n, m.errors, m.mean, m.infra_errors) == (16, 4, 1.0, 0)
    assert result.tasks == {"ok": 16, "target_error": 4}
    errors = list(result.iter_results(outcome=Outcome.ERROR))
    assert len(errors) == 4
    assert all("ValueError" in e.reason for e in errors)
    assert result.store is not None
    outputs = [o for o in result.store.iter_outputs(result.run_id) if o.status == "target_error"]
    assert len(outputs) == 4
    assert "cannot answer" in (outputs[0].error or "")


def test_429_and_5xx_are_retried_then_infra_errors(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 6)
    answers = {f"q{i}": f"a{i}" for i in range(6)}
    with StubLLM(answers=answers) as stub:
        stub.schedule(
            Fault(status=429, retry_after="0"),
            Fault(status=503),
            None,  # sample 0: retried twice, then answered
            Fault(status=500),
            Fault(status=502),
            Fault(status=503),  # sample 1: three attempts, all failed
            path=OPENAI_PATH,
        )
        spec = model_spec(stub.openai_url, data, concurrency=1)
        result = asyncio.run(
            execute_run(
                spec, store=tmp_path / "s.db", resilience=fast_retries(3), registry=BUILTINS
            )
        )
        assert stub.calls(OPENAI_PATH) == 6 + 2 + 2
    m = result.metric("exact-match")
    assert (m.n, m.mean, m.errors, m.infra_errors) == (5, 1.0, 0, 1)
    assert result.infra_errors == 1
    assert result.tasks == {"ok": 5, "infra_error": 1}
    assert result.store is not None
    lost = [o for o in result.store.iter_outputs(result.run_id) if o.status == "infra_error"]
    assert [(o.record_id, o.kind, o.attempts) for o in lost] == [("s1", "server_error", 3)]
    retried = [o for o in result.store.iter_outputs(result.run_id) if o.record_id == "s0"]
    assert retried[0].attempts == 3


def test_max_concurrency_is_respected(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 40)
    with StubLLM(latency_ms=20) as stub:
        spec = model_spec(stub.openai_url, data, concurrency=5)
        asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        spans = [(r.started, r.finished or r.started) for r in stub.requests(OPENAI_PATH)]
    events = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans])
    peak = live = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    assert len(spans) == 40
    assert 2 <= peak <= 5


def test_dry_run_calls_nothing_and_stores_nothing(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 10)
    with StubLLM() as stub:
        spec = model_spec(stub.openai_url, data, trials=2, budget=BudgetSpec(tokens=100, usd=1.0))
        result = asyncio.run(
            execute_run(spec, store=tmp_path / "s.db", dry_run=True, registry=BUILTINS)
        )
        assert stub.calls() == 0
    assert not (tmp_path / "s.db").exists()
    plan = result.plan
    assert plan is not None
    assert (plan["samples"], plan["tasks"]) == (10, 20)
    assert plan["projected"]["output_tokens"] == 20 * 16
    assert plan["projected"]["usd"] is None  # stub-model has no price
    assert plan["budget"]["tokens"]["within"] is False
    assert "cost unknown" in plan["budget"]["usd"]["verdict"]
    assert result.exit_code == 0
    assert "tasks" in result.table()


def test_dry_run_prices_from_user_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("stub-model: {input: 1.0, output: 2.0}\n")
    monkeypatch.setenv("EVALSI_PRICING", str(prices))
    data = write_qa(tmp_path / "qa.jsonl", 4)
    spec = model_spec("http://127.0.0.1:9/v1", data, budget=BudgetSpec(usd=1.0))
    plan = asyncio.run(execute_run(spec, dry_run=True, registry=BUILTINS)).plan
    assert plan is not None
    projected = plan["projected"]
    expected = (projected["input_tokens"] * 1.0 + projected["output_tokens"] * 2.0) / 1e6
    assert projected["usd"] == pytest.approx(expected)
    assert plan["budget"]["usd"]["within"] is True


def test_budget_stops_the_run_and_resume_completes_it(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 30)
    answers = {f"q{i}": f"a{i}" for i in range(0, 30, 2)}
    with StubLLM(answers=answers) as stub:
        stopped = asyncio.run(
            execute_run(
                model_spec(stub.openai_url, data, concurrency=2, budget=BudgetSpec(tokens=20)),
                store=tmp_path / "s.db",
                registry=BUILTINS,
            )
        )
        assert stopped.status == "stopped"
        assert stopped.stopped_reason is not None
        assert stopped.stopped_reason.startswith("budget(tokens)")
        assert stopped.exit_code == 3
        assert 0 < sum(stopped.tasks.values()) < 30
        first_calls = stub.calls(OPENAI_PATH)
        resumed = asyncio.run(
            execute_run(
                model_spec(stub.openai_url, data, concurrency=2),
                store=tmp_path / "s.db",
                resume=stopped.run_id,
                registry=BUILTINS,
            )
        )
        assert stub.calls(OPENAI_PATH) == 30  # nothing done twice
        assert first_calls < 30
        full = asyncio.run(
            execute_run(
                model_spec(stub.openai_url, data), store=tmp_path / "other.db", registry=BUILTINS
            )
        )
    assert resumed.status == "done"
    assert resumed.run_id == stopped.run_id
    assert resumed.exit_code == 0
    assert [m.to_dict() for m in resumed.metrics] == [m.to_dict() for m in full.metrics]


def test_resume_with_another_spec_names_the_difference(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 3)
    with StubLLM() as stub:
        first = asyncio.run(
            execute_run(
                model_spec(stub.openai_url, data), store=tmp_path / "s.db", registry=BUILTINS
            )
        )
        other = model_spec(stub.openai_url, data, trials=2)
        with pytest.raises(Exception, match=r"spec\.trials"):
            asyncio.run(
                execute_run(other, store=tmp_path / "s.db", resume=first.run_id, registry=BUILTINS)
            )


def test_manifest_records_target_and_seeds(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 3)
    with StubLLM() as stub:
        result = asyncio.run(
            execute_run(
                model_spec(stub.openai_url, data, seed=7),
                store=tmp_path / "s.db",
                registry=BUILTINS,
            )
        )
    store = SqlStore.open(tmp_path / "s.db")
    manifest = store.get_run(result.run_id).manifest
    assert manifest is not None
    assert manifest["target"]["model"] == "stub-model"
    assert manifest["target"]["unpinned"] is False  # a loopback server, not a closed API
    assert manifest["seeds"]["seed"] == 7
    assert manifest["sandbox"] == "none"
    assert manifest["spec_hash"]
    assert manifest["evaluators"][0]["version"]


def test_twenty_thousand_samples_stream(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 20_000)
    with StubLLM(default="a") as stub:
        result = asyncio.run(
            execute_run(
                model_spec(stub.openai_url, data, concurrency=64),
                store=tmp_path / "s.db",
                registry=BUILTINS,
            )
        )
        assert stub.calls(OPENAI_PATH) == 20_000
    assert result.records == 20_000
    assert result.metric("exact-match").n == 20_000
