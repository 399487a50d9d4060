"""Judges over real HTTP (the loopback stub as the judge): evaluate(judges=...), run specs with
spec.judges, the repair retry, errors never scored 0, the judge cache and the accounting."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

import evalsi
from evalsi.core import Outcome, SpecError, UserError
from evalsi.packs.judge import REPAIR_PROMPT
from evalsi.runs import execute_run
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from tests.integration.run_support import write_qa
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM

GOOD = '{"score": 0.8, "explanation": "mostly right"}'
ROWS = [
    {"id": f"r{i}", "input": f"question {i}", "output": f"answer {i}", "reference": f"answer {i}"}
    for i in range(6)
]


def _judges(stub: StubLLM, **extra: Any) -> dict[str, Any]:
    return {
        "default": {
            "connector": "openai-compatible",
            "baseUrl": stub.openai_url,
            "model": "judge-model",
            "params": {"temperature": 0},
            **extra,
        }
    }


def _judge_scores(result: Any) -> list[tuple[str, Any]]:
    return [
        (r.record_id, (r.outcome.name, [s.value for s in r.scores], r.reason))
        for r in sorted(result.results, key=lambda r: r.record_id)
    ]


def _grade(stub: StubLLM, store: Path, rubric: str = "correct and concise") -> Any:
    return evalsi.evaluate(
        ROWS,
        [{"ref": "llm-judge", "params": {"rubric": rubric}}],
        judges=_judges(stub),
        store=str(store),
    )


def test_llm_judge_scores_with_cost_and_accounting(tmp_path: Path) -> None:
    with StubLLM(default=GOOD) as stub:
        result = _grade(stub, tmp_path / "s.db")
        calls = stub.calls(OPENAI_PATH)
        sent = stub.requests(OPENAI_PATH)[0].body
    assert calls == len(ROWS)
    assert sent["model"] == "judge-model"
    assert sent["temperature"] == 0
    metric = result.metric("llm-judge")
    assert metric.n == len(ROWS)
    assert metric.mean == pytest.approx(0.8)
    first = result.results[0].scores[0]
    assert first.explanation == "mostly right"
    assert first.cost is not None
    assert (first.cost.total_tokens or 0) > 0
    assert first.metadata["cached"] is False
    assert first.metadata["judge_identity"]["model"] == "judge-model"
    run = SqlStore.open(tmp_path / "s.db").get_run(result.run_id)
    assert run.summary is not None
    account = run.summary["judges"]["default"]
    assert account["calls"] == len(ROWS)
    assert account["cached"] == 0
    total = sum(r.scores[0].cost.total_tokens for r in result.results)  # type: ignore[union-attr]
    assert account["tokens"] == total
    assert run.manifest is not None
    assert run.manifest["judges"]["default"]["model"] == "judge-model"
    assert "secret" not in orjson.dumps(run.manifest).decode().lower().replace("secret_ref", "")


def test_warm_cache_makes_no_calls_and_gives_identical_scores(tmp_path: Path) -> None:
    with StubLLM(default=GOOD) as stub:
        cold = _grade(stub, tmp_path / "s.db")
        cold_calls = stub.calls(OPENAI_PATH)
        warm = _grade(stub, tmp_path / "s.db")
        warm_calls = stub.calls(OPENAI_PATH) - cold_calls
        changed = _grade(stub, tmp_path / "s.db", rubric="a different rubric")
        changed_calls = stub.calls(OPENAI_PATH) - cold_calls - warm_calls
    assert cold_calls == len(ROWS)
    assert warm_calls == 0
    assert _judge_scores(warm) == _judge_scores(cold)
    cached = warm.results[0].scores[0]
    assert cached.metadata["cached"] is True
    assert cached.cost is not None
    assert cached.cost.total_tokens == 0
    account = SqlStore.open(tmp_path / "s.db").get_run(warm.run_id).summary["judges"]["default"]  # type: ignore[index]
    assert account["calls"] == 0
    assert account["cached"] == len(ROWS)
    assert changed_calls == len(ROWS)  # a new rubric is a new key
    assert changed.metric("llm-judge").n == len(ROWS)


def test_repair_retry_over_http(tmp_path: Path) -> None:
    with StubLLM(default="Great answer, 10/10!", answers={REPAIR_PROMPT: GOOD}) as stub:
        result = _grade(stub, tmp_path / "s.db")
        calls = stub.calls(OPENAI_PATH)
    assert calls == 2 * len(ROWS)
    assert result.metric("llm-judge").n == len(ROWS)
    assert all(r.scores[0].metadata["repaired"] for r in result.results)


def test_garbage_twice_is_error_not_zero(tmp_path: Path) -> None:
    with StubLLM(default="I refuse to use JSON.") as stub:
        result = _grade(stub, tmp_path / "s.db")
        calls = stub.calls(OPENAI_PATH)
    assert calls == 2 * len(ROWS)
    assert all(r.outcome is Outcome.ERROR for r in result.results)
    assert "I refuse to use JSON." in result.results[0].reason
    metric = result.metric("llm-judge")
    assert metric.n == 0
    assert metric.errors == len(ROWS)


def test_no_default_judge(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="needs a judge named 'default'") as info:
        evalsi.evaluate(
            ROWS, [{"ref": "llm-judge", "params": {"rubric": "r"}}], store=str(tmp_path / "s")
        )
    assert "spec.judges.default" in (info.value.hint or "")
    with StubLLM(default=GOOD) as stub, pytest.raises(UserError, match="'strict'"):
        evalsi.evaluate(
            ROWS,
            [{"ref": "llm-judge", "params": {"rubric": "r", "judge": "strict"}}],
            judges=_judges(stub),
            store=str(tmp_path / "s"),
        )


def test_pairwise_measures_position_bias(tmp_path: Path) -> None:
    rows = [{**r, "metadata": {"baseline": "something else"}} for r in ROWS]
    with StubLLM(default='{"preferred": "A", "explanation": "the first"}') as stub:
        result = evalsi.evaluate(rows, ["pairwise"], judges=_judges(stub), store=":memory:")
        calls = stub.calls(OPENAI_PATH)
    assert calls == 2 * len(ROWS)
    assert result.metric("pairwise", "position-consistent").mean == 0.0
    assert result.metric("pairwise", "pairwise-win").mean == 0.5


def test_reference_correctness_and_g_eval(tmp_path: Path) -> None:
    answer = '{"correct": true, "score": 5, "steps": "ok", "explanation": "right"}'
    with StubLLM(default=answer) as stub:
        result = evalsi.evaluate(
            ROWS,
            [
                "reference-correctness",
                {"ref": "g-eval", "params": {"criteria": "Coherence"}},
            ],
            judges=_judges(stub),
            store=":memory:",
        )
    assert result.metric("reference-correctness").mean == 1.0
    assert result.metric("g-eval").mean == 1.0


SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: judged}}
spec:
  target:
    model: {{connector: openai-compatible, baseUrl: "{target}", model: target-model}}
  dataset: {{path: qa.jsonl}}
  evaluators:
    - ref: llm-judge
      params: {{rubric: "answers the question"}}
    - ref: exact-match
  judges:
    default:
      connector: openai-compatible
      baseUrl: "{judge}"
      model: judge-model
      params: {{temperature: 0}}
  gates:
    - "metric('llm-judge').mean >= 0.5"
"""


def test_judges_in_a_run_spec(tmp_path: Path) -> None:
    write_qa(tmp_path / "qa.jsonl", 8)
    with StubLLM() as target, StubLLM(default=GOOD) as judge:
        text = SPEC.format(target=target.openai_url, judge=judge.openai_url)
        spec = run_spec_from_yaml(text, base_dir=tmp_path)
        assert spec.judges["default"].model == "judge-model"
        first = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        cold = judge.calls(OPENAI_PATH)
        second = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        warm = judge.calls(OPENAI_PATH) - cold
    assert first.status == "done"
    assert cold == 8
    assert warm == 0  # the target is called again (its answers are not cached), the judge not
    assert first.metric("llm-judge").mean == pytest.approx(0.8)
    assert second.metric("llm-judge").mean == pytest.approx(0.8)
    assert first.exit_code == 0
    db = SqlStore.open(tmp_path / "s.db")
    assert db.get_run(first.run_id).summary["judges"]["default"]["calls"] == 8  # type: ignore[index]
    assert db.get_run(second.run_id).summary["judges"]["default"]["cached"] == 8  # type: ignore[index]
    assert db.get_run(first.run_id).manifest["judges"]["default"]["model"] == "judge-model"  # type: ignore[index]


def test_run_spec_without_the_judge_is_refused(tmp_path: Path) -> None:
    write_qa(tmp_path / "qa.jsonl", 2)
    text = SPEC.format(target="http://127.0.0.1:9/v1", judge="http://127.0.0.1:9/v1")
    text = text.replace("    default:\n", "    other:\n")
    spec = run_spec_from_yaml(text, base_dir=tmp_path)
    with pytest.raises(UserError, match="needs a judge named 'default'"):
        asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("model: judge-model", "modle: judge-model"), "spec.judges.default.modle: unknown field"),
        (
            ("connector: openai-compatible\n      baseUrl", "connector: openai\n      baseUrl"),
            "spec.judges.default.connector: expected one of",
        ),
        (
            ("params: {temperature: 0}", "secretRef: sk-live-123"),
            "spec.judges.default.secretRef: expected env:NAME or file:PATH",
        ),
    ],
)
def test_judge_spec_errors(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    write_qa(tmp_path / "qa.jsonl", 2)
    text = SPEC.format(target="http://127.0.0.1:9/v1", judge="http://127.0.0.1:9/v1")
    assert change[0] in text
    with pytest.raises(SpecError) as info:
        run_spec_from_yaml(text.replace(change[0], change[1]), base_dir=tmp_path)
    assert message in str(info.value)
    assert "sk-live-123" not in str(info.value)


def test_code_built_spec_with_judges_reruns_from_the_cache(tmp_path: Path) -> None:
    from evalsi.runs import JudgeSpec, rerun_run
    from evalsi.specs import EvaluatorEntry
    from tests.integration.run_support import model_spec

    data = write_qa(tmp_path / "qa.jsonl", 5)
    with StubLLM() as target, StubLLM(default=GOOD) as judge:
        spec = dataclasses.replace(
            model_spec(target.openai_url, data),
            evaluators=(EvaluatorEntry(ref="llm-judge", params={"rubric": "r"}),),
            judges={"default": JudgeSpec(model="judge-model", base_url=judge.openai_url)},
        )
        first = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
        again = asyncio.run(
            rerun_run(SqlStore.open(tmp_path / "s.db"), first.run_id, registry=BUILTINS)
        )
        calls = judge.calls(OPENAI_PATH)
    assert calls == 5
    assert again.metric("llm-judge").mean == first.metric("llm-judge").mean
