"""Judges over real HTTP: the score scale in the judge's config, malformed verdicts never cached,
and the cache switched off (``cache: false`` / ``--no-cache``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import Outcome, SpecError, UserError
from evalsi.packs.judge import REPAIR_PROMPT
from evalsi.runs import without_cache
from evalsi.runs._judges import judge_specs
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.stub_llm import OPENAI_PATH, StubLLM

ROWS = [{"id": f"r{i}", "input": f"question {i}", "output": f"answer {i}"} for i in range(3)]
FOUR = '{"score": 4, "explanation": "good, one slip"}'
MALFORMED = "I would say it is quite good."


def _judges(stub: StubLLM, **extra: Any) -> dict[str, Any]:
    judge = {"connector": "openai-compatible", "baseUrl": stub.openai_url, "model": "j"}
    return {"default": {**judge, **extra}}


def _grade(stub: StubLLM, store: Path | str, **judge: Any) -> Any:
    return evalsi.evaluate(
        ROWS,
        [{"ref": "llm-judge", "params": {"rubric": "helpful?", "pass_threshold": 0.7}}],
        judges=_judges(stub, **judge),
        store=str(store),
    )


def test_a_judge_answering_1_to_5_is_an_error_without_a_scale() -> None:
    with StubLLM(default=FOUR) as stub:
        result = _grade(stub, ":memory:")
    assert [r.outcome for r in result.results] == [Outcome.ERROR] * 3
    assert "outside 0..1" in (result.results[0].reason or "")


def test_the_judges_scale_scores_and_normalises_a_1_to_5_answer() -> None:
    with StubLLM(default=FOUR) as stub:
        result = _grade(stub, ":memory:", scale={"min": 1, "max": 5})
        prompt = stub.requests(OPENAI_PATH)[0].body["messages"][-1]["content"]
        calls = stub.calls(OPENAI_PATH)
    assert calls == 3  # no repair request: 4 is on the judge's scale
    assert "Give a score from 1 to 5" in prompt
    first = result.results[0]
    assert first.outcome == Outcome.SCORED
    assert first.scores[0].value == pytest.approx(0.75)  # (4 - 1) / (5 - 1)
    assert first.scores[0].metadata["raw_score"] == 4
    assert first.scores[0].metadata["scale"] == [1.0, 5.0]
    assert first.scores[0].metadata["judge_identity"]["scale"] == {"min": 1.0, "max": 5.0}
    assert first.scores[1].passed is True  # 0.75 >= pass_threshold 0.7, on the normalised scale
    assert result.metric("llm-judge").mean == pytest.approx(0.75)


@pytest.mark.parametrize(("answer", "expected"), [('{"score": 1}', 0.0), ('{"score": 5}', 1.0)])
def test_the_ends_of_the_scale(answer: str, expected: float) -> None:
    with StubLLM(default=answer) as stub:
        result = _grade(stub, ":memory:", scale=[1, 5])
    assert [s.scores[0].value for s in result.results] == [expected] * 3


def test_an_answer_off_the_judges_scale_is_still_an_error() -> None:
    with StubLLM(default='{"score": 7}') as stub:
        result = _grade(stub, ":memory:", scale={"min": 1, "max": 5})
    assert result.results[0].outcome == Outcome.ERROR
    assert "outside 1..5" in (result.results[0].reason or "")


def test_the_evaluators_own_scale_wins_over_the_judges() -> None:
    with StubLLM(default='{"score": 2}') as stub:
        result = evalsi.evaluate(
            ROWS[:1],
            [{"ref": "llm-judge", "params": {"rubric": "r", "scale": [0, 1, 2]}}],
            judges=_judges(stub, scale={"min": 1, "max": 5}),
            store=":memory:",
        )
    assert result.results[0].scores[0].value == 1.0  # (2 - 0) / (2 - 0)


@pytest.mark.parametrize(
    "scale", [{"min": 5, "max": 1}, {"min": 1, "max": 1}, {"min": 1}, [1], "1-5", [True, 5]]
)
def test_a_bad_scale_is_a_user_error(scale: Any) -> None:
    with pytest.raises(UserError, match=r"judges\.default\.scale: expected"):
        judge_specs({"default": {"model": "m", "baseUrl": "http://x/v1", "scale": scale}})


def test_the_scale_in_a_run_spec(tmp_path: Path) -> None:
    spec = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {name: scaled}
spec:
  target: {python: "m:f"}
  dataset: {path: qa.jsonl}
  evaluators: [{ref: llm-judge, params: {rubric: r}}]
  judges:
    default: {connector: openai-compatible, baseUrl: "http://x/v1", model: j, %s}
"""
    (tmp_path / "qa.jsonl").write_text('{"input": "q"}\n')
    loaded = run_spec_from_yaml(spec % "scale: {min: 1, max: 10}", base_dir=tmp_path)
    assert loaded.judges["default"].scale == (1.0, 10.0)
    with pytest.raises(SpecError, match=r"spec\.judges\.default\.scale.*min below max"):
        run_spec_from_yaml(spec % "scale: {min: 3, max: 3}", base_dir=tmp_path)
    with pytest.raises(SpecError, match=r"spec\.judges\.default\.scale.*both 'min' and 'max'"):
        run_spec_from_yaml(spec % "scale: {max: 3}", base_dir=tmp_path)
    with pytest.raises(SpecError, match="scal"):
        run_spec_from_yaml(spec % "scale: {min: 1, max: 5, step: 1}", base_dir=tmp_path)
    # without a scale the judge's identity (and so its cache keys) is as it always was
    plain = run_spec_from_yaml(spec % "params: {}", base_dir=tmp_path)
    assert "scale" not in plain.judges["default"].identity()


def test_a_malformed_verdict_is_never_cached(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with StubLLM(default=MALFORMED) as stub:
        bad = _grade(stub, store)
        assert stub.calls(OPENAI_PATH) == 6  # each record: the ask and one repair request
        assert [r.outcome for r in bad.results] == [Outcome.ERROR] * 3
        stub.configure({"default": '{"score": 0.9, "explanation": "fine"}'})
        good = _grade(stub, store)
        assert stub.calls(OPENAI_PATH) == 9  # asked again: nothing malformed came from the cache
        assert [r.outcome for r in good.results] == [Outcome.SCORED] * 3
        assert all(r.scores[0].metadata["cached"] is False for r in good.results)
        warm = _grade(stub, store)
        assert stub.calls(OPENAI_PATH) == 9  # the good verdicts were cached
    assert [r.scores[0].value for r in warm.results] == [0.9] * 3
    db = SqlStore.open(store)
    (texts,) = db.engine.connect().exec_driver_sql("SELECT group_concat(text) FROM judge_cache")
    db.close()
    assert MALFORMED not in texts[0]


def test_a_repaired_verdict_caches_the_repair_only(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    good = '{"score": 0.5, "explanation": "half"}'
    with StubLLM(default=MALFORMED, answers={REPAIR_PROMPT: good}) as stub:
        first = _grade(stub, store)
        assert stub.calls(OPENAI_PATH) == 6
        second = _grade(stub, store)
        # the malformed first answer is asked for again; the repair is then read from the cache
        assert stub.calls(OPENAI_PATH) == 9
    assert [r.scores[0].value for r in first.results] == [0.5] * 3
    assert [r.scores[0].value for r in second.results] == [0.5] * 3
    db = SqlStore.open(store)
    (count,) = db.engine.connect().exec_driver_sql("SELECT count(*) FROM judge_cache").one()
    db.close()
    assert count == 3


def test_cache_off_neither_reads_nor_writes(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with StubLLM(default='{"score": 0.9}') as stub:
        _grade(stub, store)  # a warm cache
        assert stub.calls(OPENAI_PATH) == 3
        off = evalsi.evaluate(
            ROWS,
            [{"ref": "llm-judge", "params": {"rubric": "helpful?", "pass_threshold": 0.7}}],
            judges=without_cache(_judges(stub)),
            store=str(store),
        )
        assert stub.calls(OPENAI_PATH) == 6  # the warm cache was not read
        assert all(r.scores[0].metadata["cached"] is False for r in off.results)
    fresh = tmp_path / "fresh.db"
    with StubLLM(default='{"score": 0.9}') as stub:
        _grade(stub, fresh, cache=False)
        _grade(stub, fresh, cache=False)
        assert stub.calls(OPENAI_PATH) == 6
    db = SqlStore.open(fresh)
    (count,) = db.engine.connect().exec_driver_sql("SELECT count(*) FROM judge_cache").one()
    db.close()
    assert count == 0  # nothing was written either
    with pytest.raises(UserError, match=r"judges\.default\.cache: expected true or false"):
        judge_specs({"default": {"model": "m", "baseUrl": "http://x/v1", "cache": "no"}})
