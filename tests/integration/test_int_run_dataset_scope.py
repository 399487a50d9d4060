"""Dataset-scope evaluators grade a Run and a grade of one (issue 17): corpus BLEU and chrF
over every answered sample x trial equal sacrebleu's ``corpus_bleu`` / ``corpus_chrf`` on the
same outputs, beside record-scope metrics from the store, with gates on both."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
import sacrebleu

import evalsi
from evalsi.runs import execute_run, grade_run
from evalsi.specs import EvaluatorEntry
from evalsi.store import SqlStore
from tests.integration.run_support import model_spec
from tests.support.registry import BUILTINS
from tests.support.stub_llm import StubLLM

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "text"
PAIRS = [json.loads(line) for line in (EXAMPLES / "translations.jsonl").read_text().splitlines()]
EVALUATORS = (
    EvaluatorEntry(ref="exact-match"),
    EvaluatorEntry(ref="bleu"),
    EvaluatorEntry(ref="chrf"),
)


def _data(tmp: Path) -> Path:
    path = tmp / "pairs.jsonl"
    rows = [{"id": p["id"], "input": p["input"], "reference": p["reference"]} for p in PAIRS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _answers() -> dict[str, str]:
    return {p["input"]: p["output"] for p in PAIRS}


def _reference(trials: int) -> tuple[float, float]:
    hyps = [p["output"] for p in PAIRS] * trials
    refs = [p["reference"] for p in PAIRS] * trials
    return sacrebleu.corpus_bleu(hyps, [refs]).score, sacrebleu.corpus_chrf(hyps, [refs]).score


@pytest.mark.parametrize("trials", [1, 3])
def test_a_run_grades_corpus_metrics_over_every_answer(tmp_path: Path, trials: int) -> None:
    gates = ("metric('bleu').mean >= 1", "metric('exact-match').n >= 1")
    with StubLLM(answers=_answers()) as stub:
        spec = model_spec(stub.openai_url, _data(tmp_path), trials=trials, gates=gates)
        spec = dataclasses.replace(spec, evaluators=EVALUATORS)
        result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
    bleu, chrf = _reference(trials)
    assert result.status == "done"
    assert [m.evaluator for m in result.metrics] == ["exact-match", "bleu", "chrf"]
    assert result.metric("bleu").mean == pytest.approx(bleu, abs=1e-9)
    assert result.metric("chrf").mean == pytest.approx(chrf, abs=1e-9)
    assert result.metric("bleu").n == len(PAIRS) * trials  # every answer, as in a Score run
    ci = result.metric("bleu").ci
    assert ci is not None
    assert ci.low is not None
    assert ci.high is not None
    assert ci.low <= bleu <= ci.high
    assert result.metric("exact-match").n == len(PAIRS) * trials  # per sample, from the store
    assert [g["passed"] for g in result.gates] == [True, True]
    # the corpus result is stored under the run, at no sample's position
    stored = SqlStore.open(tmp_path / "s.db")
    corpus = [r for _, _, r in stored.iter_results(result.run_id) if r.evaluator == "bleu"]
    assert len(corpus) == 1
    assert corpus[0].record_id == ""


def test_grading_a_run_again_gives_the_same_corpus_metrics(tmp_path: Path) -> None:
    with StubLLM(answers=_answers()) as stub:
        spec = model_spec(stub.openai_url, _data(tmp_path), trials=2)
        executed = asyncio.run(
            execute_run(spec, store=tmp_path / "s.db", execute_only=True, registry=BUILTINS)
        )
    graded = asyncio.run(
        grade_run(tmp_path / "s.db", executed.run_id, ["bleu", "exact-match"], registry=BUILTINS)
    )
    bleu, _ = _reference(2)
    assert graded.metric("bleu").mean == pytest.approx(bleu, abs=1e-9)
    assert graded.metric("exact-match").n == len(PAIRS) * 2
    # and through the public API, as `evalsi grade` calls it
    again = evalsi.grade(executed.run_id, ["chrf"], store=tmp_path / "s.db")
    assert again.metric("chrf").mean == pytest.approx(_reference(2)[1], abs=1e-9)


def test_a_run_whose_target_answered_nothing_has_no_corpus_score(tmp_path: Path) -> None:
    # Every call answers HTTP 401 (no key sent): nothing was answered, so no corpus to score
    # (the run fails as any run with nothing scored does).
    with StubLLM(answers=_answers(), require_key="not-sent") as stub:
        spec = dataclasses.replace(
            model_spec(stub.openai_url, _data(tmp_path)), evaluators=EVALUATORS
        )
        result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=BUILTINS))
    assert result.status == "failed"
    assert result.metric("bleu").n == 0
