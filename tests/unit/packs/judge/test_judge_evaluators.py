"""The judge-pack evaluators with a fake judge: verdicts, the one repair, errors, skips."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalsi.core import Content, ParamError, Record, Score
from evalsi.evaluators import JudgeClient, RecordRunner, Skip, use_judges
from evalsi.packs import builtin_registry
from evalsi.packs.judge import LLM_JUDGE_TEMPLATE, REPAIR_PROMPT, JudgeFormatError
from tests.unit.packs.judge.judge_support import ScriptedJudge

REG = builtin_registry(entry_points=False)


def _record(output: str = "Paris", **extra: Any) -> Record:
    fields: dict[str, Any] = {"id": "r1", "input": Content.of_text("Capital of France?")}
    fields["output"] = Content.of_text(output)
    for key, value in extra.items():
        fields[key] = Content.of_text(value) if key == "reference" else value
    return Record(**fields)


def _run(name: str, params: dict[str, Any], judge: JudgeClient, record: Record) -> Any:
    bound = REG.resolve(name).bind(params)

    async def go() -> Any:
        with use_judges({"default": judge}):
            return await bound.record_fn()(record)

    return asyncio.run(go())


def test_llm_judge_scores_and_explains() -> None:
    judge = ScriptedJudge('{"score": 4, "explanation": "mostly right"}')
    scores = _run("llm-judge", {"rubric": "correct", "scale": [1, 2, 3, 4, 5]}, judge, _record())
    assert len(judge.asked) == 1
    score = scores[0]
    assert score.number == pytest.approx(0.75)
    assert score.explanation == "mostly right"
    assert score.metadata["raw_score"] == 4
    assert score.metadata["template"] == "llm-judge/v1"
    assert score.metadata["template_hash"] == LLM_JUDGE_TEMPLATE.hash
    assert score.metadata["cached"] is False
    assert score.cost is not None
    assert score.cost.total_tokens == 15
    prompt = judge.asked[0][-1].content or ""
    assert "correct" in prompt
    assert "Capital of France?" in prompt
    assert "Paris" in prompt


def test_pass_threshold_adds_a_verdict() -> None:
    judge = ScriptedJudge('{"score": 0.6, "explanation": "ok"}')
    scores = _run("llm-judge", {"rubric": "r", "pass_threshold": 0.7}, judge, _record())
    assert [s.name for s in scores] == ["", "llm-judge-passed"]
    assert scores[1].passed is False


def test_one_repair_retry_then_scored() -> None:
    judge = ScriptedJudge("I like it a lot!", '{"score": 1, "explanation": "good"}')
    scores = _run("llm-judge", {"rubric": "r"}, judge, _record())
    assert len(judge.asked) == 2
    repair = judge.asked[1]
    assert repair[-2].role == "assistant"
    assert repair[-2].content == "I like it a lot!"
    assert repair[-1].content == REPAIR_PROMPT
    assert scores[0].number == 1.0
    assert scores[0].metadata["repaired"] is True
    assert scores[0].cost.total_tokens == 30  # both calls are paid for


def test_garbage_twice_is_an_error_never_zero() -> None:
    judge = ScriptedJudge("no idea", "still no idea")
    with pytest.raises(JudgeFormatError, match="still no idea"):
        _run("llm-judge", {"rubric": "r"}, judge, _record())
    assert len(judge.asked) == 2  # exactly one repair


def test_garbage_twice_is_error_in_the_runner() -> None:
    bound = REG.resolve("llm-judge").bind({"rubric": "r"})
    runner = RecordRunner(bound)
    judge = ScriptedJudge('{"score": 5}', '{"score": 5}')  # out of 0..1 both times

    async def go() -> Any:
        with use_judges({"default": judge}):
            return await runner.run_async([_record()])

    batch = asyncio.run(go())
    result = batch[0]
    assert result.outcome.name == "ERROR"
    assert "outside 0..1" in result.reason
    assert "JudgeFormatError" in result.reason


def test_no_judge_configured_skips_with_a_reason() -> None:
    bound = REG.resolve("llm-judge").bind({"rubric": "r", "judge": "strict"})
    with pytest.raises(Skip, match="no judge named 'strict' configured"):
        asyncio.run(bound.record_fn()(_record()))


def test_params_are_checked_on_bind() -> None:
    with pytest.raises(ParamError):
        REG.resolve("llm-judge").bind({"rubric": " "})
    with pytest.raises(ParamError):
        REG.resolve("llm-judge").bind({"rubric": "r", "scale": [3]})
    with pytest.raises(ParamError):
        REG.resolve("llm-judge").bind({})


def test_g_eval_normalises_one_to_five() -> None:
    judge = ScriptedJudge('{"steps": "1. fine", "score": 2, "explanation": "weak"}')
    score = _run("g-eval", {"criteria": "Coherence"}, judge, _record())
    assert isinstance(score, Score)
    assert score.number == pytest.approx(0.25)
    prompt = judge.asked[0][-1].content or ""
    assert "Coherence" in prompt
    assert "1. Read the input" in prompt


def test_reference_correctness() -> None:
    judge = ScriptedJudge('{"correct": "true", "explanation": "same city"}')
    score = _run("reference-correctness", {}, judge, _record(reference="paris"))
    assert score.passed is True
    assert "paris" in (judge.asked[0][-1].content or "")


def test_pairwise_consistent_judge() -> None:
    # Prefers whichever response says "Paris", wherever it is.
    class Fair(ScriptedJudge):
        async def complete(self, messages: Any, *, seed: Any = None, template: str = "") -> Any:
            text = messages[-1].content
            a = text.split("# Response A")[1].split("# Response B")[0]
            self.answers = ['{"preferred": "A"}' if "Paris" in a else '{"preferred": "B"}']
            return await super().complete(messages, seed=seed, template=template)

    judge = Fair()
    scores = _run("pairwise", {}, judge, _record(metadata={"baseline": "Lyon"}))
    assert len(judge.asked) == 2
    assert scores[0].label == "output"
    assert scores[1].number == 1.0
    assert scores[2].passed is True


def test_pairwise_always_first_is_inconsistent() -> None:
    judge = ScriptedJudge('{"preferred": "A", "explanation": "first is best"}')
    scores = _run("pairwise", {}, judge, _record(metadata={"baseline": "Lyon"}))
    assert scores[0].label == "tie"
    assert scores[0].metadata["verdicts"] == {
        "output_first": "output",
        "baseline_first": "baseline",
    }
    assert scores[1].number == 0.5
    assert scores[2].name == "position-consistent"
    assert scores[2].passed is False


def test_pairwise_without_baseline_or_reference_skips() -> None:
    with pytest.raises(Skip, match="baseline"):
        _run("pairwise", {}, ScriptedJudge("{}"), _record())
