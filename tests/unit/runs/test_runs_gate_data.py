"""Gates that read beyond the metrics: ``flaky_cases()`` from the stored tasks, and
``delta('m', baseline='RUN')`` from the paired comparison ``evalsi compare`` computes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

import evalsi
from evalsi.core import UserError
from evalsi.runs import compare_runs
from evalsi.runs._execute import execute_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS

ANSWERS: dict[str, list[str]] = {}
CALLS: dict[str, int] = {}


def agent(question: str) -> str:
    n = CALLS.get(question, 0)
    CALLS[question] = n + 1
    return ANSWERS[question][n % len(ANSWERS[question])]


def _run(
    tmp: Path, answers: dict[str, list[str]], gates: tuple[str, ...], trials: int = 2
) -> dict[str, Any]:
    ANSWERS.clear()
    ANSWERS.update(answers)
    CALLS.clear()
    data = tmp / "q.jsonl"
    data.write_bytes(
        b"".join(orjson.dumps({"id": q, "input": q, "reference": "ok"}) + b"\n" for q in answers)
    )
    spec = RunSpec(
        name="g",
        target=TargetSpec(kind="python", python=f"{__name__}:agent"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
        trials=trials,
        max_concurrency=1,
        gates=gates,
    )
    db = SqlStore.open(tmp / "s.db")
    try:
        result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    finally:
        db.close()
    return {"run_id": result.run_id, "gates": result.gates, "exit": result.exit_code}


def test_flaky_cases_counts_scenarios_whose_trials_disagree(tmp_path: Path) -> None:
    answers = {"a": ["ok", "ok"], "b": ["ok", "no"], "c": ["no", "ok"], "d": ["no", "no"]}
    out = _run(tmp_path, answers, ("flaky_cases() == 0", "flaky_cases() <= 2"))
    first, second = out["gates"]
    assert (first["verdict"], first["value"]) == ("failed", 2)
    assert second["verdict"] == "passed"
    assert out["exit"] == 1


def test_one_trial_is_never_flaky(tmp_path: Path) -> None:
    out = _run(tmp_path, {"a": ["ok"], "b": ["no"]}, ("flaky_cases() == 0",), trials=1)
    assert out["gates"][0]["verdict"] == "passed"


def test_delta_reads_the_paired_comparison_with_a_baseline(tmp_path: Path) -> None:
    worse = {f"q{i}": ["ok" if i % 2 else "no"] for i in range(40)}
    base = _run(tmp_path, worse, (), trials=1)["run_id"]
    better = {f"q{i}": ["ok"] for i in range(40)}
    gates = (
        f"delta('exact-match', baseline='{base}').ci.low > 0",
        f"delta('exact-match', baseline='{base}').mean >= 0.5",
        f"delta('exact-match', baseline='{base}').mean > 0.6",
    )
    out = _run(tmp_path, better, gates, trials=1)
    verdicts = [g["verdict"] for g in out["gates"]]
    assert verdicts == ["passed", "passed", "failed"]
    db = SqlStore.open(tmp_path / "s.db")
    try:
        expected = compare_runs(db, base, out["run_id"]).metric("exact-match")
    finally:
        db.close()
    assert out["gates"][0]["value"] == pytest.approx(expected.ci.low)
    assert out["gates"][1]["value"] == pytest.approx(expected.delta) == pytest.approx(0.5)


def test_delta_against_a_missing_baseline_is_inconclusive(tmp_path: Path) -> None:
    out = _run(tmp_path, {"a": ["ok"]}, ("delta('exact-match', baseline='no-such-run').mean > 0",))
    gate = out["gates"][0]
    assert gate["verdict"] == "inconclusive"
    assert "no-such-run" in gate["reason"]
    assert out["exit"] == 2


def test_a_score_run_gates_on_a_delta_too(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "output": "x" if i % 4 else "y", "reference": "x"} for i in range(20)]
    base = evalsi.evaluate(rows, ["exact-match"], store=str(tmp_path / "s.db")).run_id
    better = [{**r, "output": "x"} for r in rows]
    result = evalsi.evaluate(
        better,
        ["exact-match"],
        store=str(tmp_path / "s.db"),
        gates=[f"delta('exact-match', baseline='{base}').mean == 0.25", "flaky_cases() == 0"],
    )
    assert [g["verdict"] for g in result.gates] == ["passed", "passed"]


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ("delta('exact-match').mean > 0", "delta() takes a metric and the baseline run"),
        ("delta('nope', baseline='r').mean > 0", "no evaluator 'nope'"),
        ("flaky_cases(1) == 0", "flaky_cases() takes no argument"),
        ("delta('exact-match', baseline='r').p > 0", "unknown field 'p'"),
        ("delta('exact-match', baseline='').mean > 0", "delta() takes a metric and the baseline"),
    ],
)
def test_bad_delta_and_flaky_gates_are_named_before_any_data(gate: str, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        evalsi.evaluate([{"output": "x"}], ["exact-match"], store=":memory:", gates=[gate])
