"""The rag pack's judge metrics with a scripted judge: scores computed from the verdict lists,
evidence in the explanation, the one repair request, errors and skips."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from evalsi.core import Content, Outcome, ParamError, Record, Score
from evalsi.evaluators import JudgeClient, RecordRunner, Registry, Skip, use_judges
from evalsi.packs.judge import REPAIR_PROMPT, JudgeFormatError
from evalsi.packs.rag import EVALUATORS, TEMPLATES
from evalsi.packs.rag._grounding import CLAIMS as CLAIMS_SHAPE
from tests.unit.packs.judge.judge_support import ScriptedJudge

REG = Registry(EVALUATORS)
PASSAGES = [
    {"id": "moon-1", "text": "Apollo 11 landed on the Moon on 20 July 1969."},
    {"id": "moon-2", "text": "Buzz Aldrin joined Armstrong about twenty minutes later."},
    {"id": "mars-1", "text": "Mars has two small moons, Phobos and Deimos."},
]
QUESTION = "Who walked on the Moon first, and when?"
ANSWER = "Neil Armstrong walked on the Moon first, on 20 July 1969 [1]. He was a navy pilot [2]."


def record(**fields: Any) -> Record:
    base: dict[str, Any] = {
        "input": QUESTION,
        "output": ANSWER,
        "context": PASSAGES,
        "reference": {"answer": "Neil Armstrong, in 1969", "context_ids": ["moon-1"]},
    }
    base.update(fields)
    return Record(
        id="r1",
        input=None if base["input"] is None else Content.from_value(base["input"]),
        output=None if base["output"] is None else Content.from_value(base["output"]),
        reference=None if base["reference"] is None else Content.from_value(base["reference"]),
        context=[Content.from_value(c) for c in base["context"]],
    )


def run(name: str, judge: JudgeClient, rec: Record | None = None, **params: Any) -> Any:
    bound = REG.resolve(name).bind(params)

    async def go() -> Any:
        with use_judges({"default": judge}):
            return await bound.record_fn()(rec or record())

    return asyncio.run(go())


def run_in_runner(name: str, judge: JudgeClient, rec: Record, **params: Any) -> Any:
    runner = RecordRunner(REG.resolve(name).bind(params))

    async def go() -> Any:
        with use_judges({"default": judge}):
            return await runner.run_async([rec])

    return asyncio.run(go())[0]


def verdict(**data: Any) -> str:
    return json.dumps(data)


def prompt(judge: ScriptedJudge, call: int = 0) -> str:
    return judge.asked[call][-1].content or ""


# -- faithfulness ----------------------------------------------------------------------------


CLAIMS = verdict(
    score=1.0,  # a number the judge volunteers is ignored: the score comes from the list
    claims=[
        {"claim": "Neil Armstrong walked on the Moon first.", "supported": True, "chunks": [1]},
        {"claim": "It was on 20 July 1969.", "supported": "true"},
        {
            "claim": "Armstrong was a navy pilot.",
            "supported": False,
            "reason": "no passage mentions his career",
        },
    ],
)


def test_faithfulness_counts_supported_claims_and_quotes_the_rest() -> None:
    judge = ScriptedJudge(CLAIMS)
    scores = run("faithfulness", judge)
    assert len(judge.asked) == 1
    score = scores[0]
    assert score.number == pytest.approx(2 / 3)
    assert score.explanation == (
        '1 of 3 claims not supported by the context: "Armstrong was a navy pilot." '
        "(no passage mentions his career)"
    )
    assert [c["supported"] for c in score.metadata["claims"]] == [True, True, False]
    assert score.metadata["claims"][0]["chunks"] == [1]
    assert score.metadata["template"] == "faithfulness/v1"
    assert score.cost is not None
    assert score.cost.total_tokens == 15
    text = prompt(judge)
    assert QUESTION in text
    assert ANSWER in text
    assert "[2] (id: moon-2) Buzz Aldrin joined" in text


def test_faithfulness_all_supported_and_pass_threshold() -> None:
    judge = ScriptedJudge(verdict(claims=[{"claim": "Armstrong was first.", "supported": True}]))
    scores = run("faithfulness", judge, pass_threshold=1.0)
    assert scores[0].number == 1.0
    assert scores[0].explanation == "all 1 claims supported by the context"
    assert scores[1] == Score(name="faithfulness-passed", passed=True)


def test_faithfulness_repairs_once_then_scores() -> None:
    judge = ScriptedJudge("Looks faithful to me!", "```json\n" + CLAIMS + "\n```")
    scores = run("faithfulness", judge)
    assert len(judge.asked) == 2
    assert judge.asked[1][-2].content == "Looks faithful to me!"
    assert judge.asked[1][-1].content == REPAIR_PROMPT
    assert scores[0].metadata["repaired"] is True
    assert scores[0].number == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (
            '{"claims": [{"claim": "x", "supported": "partly"}]}',
            "claims[0] has no boolean 'supported'",
        ),
        ('{"claims": [{"supported": true}]}', "claims[0] has no 'claim' text"),
        ('{"claims": "all fine"}', "no list 'claims'"),
        ('{"score": 0.9}', "no list 'claims'"),
    ],
)
def test_a_malformed_verdict_twice_is_an_error_never_a_score(answer: str, problem: str) -> None:
    judge = ScriptedJudge(answer, answer)
    with pytest.raises(JudgeFormatError, match="did not answer in the format"):
        run("faithfulness", judge)
    result = run_in_runner("faithfulness", ScriptedJudge(answer, answer), record())
    assert result.outcome is Outcome.ERROR
    assert result.reason.startswith("JudgeFormatError: ")
    assert repr(answer) in result.reason  # the judge's answer is quoted
    data = json.loads(answer)
    assert CLAIMS_SHAPE.check()(data) == problem


def test_faithfulness_skips_what_it_cannot_judge() -> None:
    judge = ScriptedJudge(verdict(claims=[]))
    with pytest.raises(Skip, match="no factual claim"):
        run("faithfulness", judge, record(output="I don't know."))
    silent = ScriptedJudge(CLAIMS)
    with pytest.raises(Skip, match="the answer is empty"):
        run("faithfulness", silent, record(output="  "))
    no_context = run_in_runner("faithfulness", silent, record(context=[]))
    assert no_context.outcome is Outcome.SKIPPED
    assert no_context.reason == "record has no context"
    assert silent.asked == []


# -- answer relevance -------------------------------------------------------------------------


def test_answer_relevance_quotes_off_topic_statements() -> None:
    judge = ScriptedJudge(
        verdict(
            statements=[
                {"statement": "Armstrong walked first, in 1969.", "relevant": True},
                {
                    "statement": "He was a navy pilot.",
                    "relevant": False,
                    "reason": "his career was not asked",
                },
            ]
        )
    )
    scores = run("answer-relevance", judge)
    assert scores[0].number == 0.5
    assert scores[0].explanation == (
        '1 of 2 statements do not address the question: "He was a navy pilot." '
        "(his career was not asked)"
    )
    assert "Retrieved" not in prompt(judge)  # the context is not shown: only Q and A matter


def test_answer_relevance_of_an_empty_answer_is_zero_without_a_call() -> None:
    judge = ScriptedJudge("unused")
    scores = run("answer-relevance", judge, record(output=""))
    assert scores[0].number == 0.0
    assert scores[0].explanation == "the answer is empty"
    assert judge.asked == []
    assert run_in_runner("answer-relevance", judge, record(input=None)).reason == (
        "record has no input"
    )


# -- context relevance ------------------------------------------------------------------------


def test_context_relevance_names_the_irrelevant_chunks() -> None:
    judge = ScriptedJudge(
        verdict(
            chunks=[
                {"chunk": 3, "relevant": False, "reason": "about Mars"},
                {"chunk": "1", "relevant": True},
                {"chunk": 2, "relevant": "yes"},
            ]
        )
    )
    scores = run("context-relevance", judge)
    assert scores[0].number == pytest.approx(2 / 3)
    assert (
        scores[0].explanation == "1 of 3 chunks irrelevant to the question: [3] mars-1 (about Mars)"
    )
    assert [c["chunk"] for c in scores[0].metadata["chunks"]] == [1, 2, 3]
    assert "each passage from 1 to 3" in prompt(judge)


@pytest.mark.parametrize(
    "chunks",
    [
        [{"chunk": 1, "relevant": True}, {"chunk": 2, "relevant": True}],
        [
            {"chunk": 1, "relevant": True},
            {"chunk": 1, "relevant": True},
            {"chunk": 2, "relevant": True},
        ],
        [
            {"chunk": 1, "relevant": True},
            {"chunk": 2, "relevant": True},
            {"chunk": 4, "relevant": True},
        ],
    ],
)
def test_context_relevance_refuses_missing_or_repeated_chunks(chunks: list[Any]) -> None:
    good = verdict(chunks=[{"chunk": i, "relevant": i != 2} for i in (1, 2, 3)])
    judge = ScriptedJudge(verdict(chunks=chunks), good)
    scores = run("context-relevance", judge)
    assert len(judge.asked) == 2  # refused, then repaired
    assert scores[0].number == pytest.approx(2 / 3)
    twice = run_in_runner("context-relevance", ScriptedJudge(verdict(chunks=chunks)), record())
    assert twice.outcome is Outcome.ERROR
    assert "chunk" in twice.reason


# -- context sufficiency ----------------------------------------------------------------------


def test_context_sufficiency_quotes_what_is_missing() -> None:
    judge = ScriptedJudge(
        verdict(
            needed=[
                {"information": "who walked first", "in_context": False},
                {"information": "the date", "in_context": True, "chunks": [1]},
            ]
        )
    )
    scores = run("context-sufficiency", judge, pass_threshold=1.0)
    assert scores[0].number == 0.5
    assert scores[0].explanation == (
        'the context lacks 1 of 2 pieces of information the answer needs: "who walked first"'
    )
    assert scores[0].metadata["reference"] is True
    assert scores[1].passed is False
    assert "# Reference answer\nNeil Armstrong, in 1969" in prompt(judge)


def test_context_sufficiency_without_reference_and_empty_lists() -> None:
    judge = ScriptedJudge(
        verdict(needed=[]), verdict(needed=[{"information": "the date", "in_context": True}])
    )
    scores = run("context-sufficiency", judge, record(reference=None))
    assert len(judge.asked) == 2  # an empty list is refused
    assert "Reference answer" not in prompt(judge)
    assert scores[0].number == 1.0
    assert scores[0].explanation == "the context holds all 1 pieces of information needed"


# -- citation accuracy ------------------------------------------------------------------------


def test_citation_accuracy_judges_each_citation_and_flags_unknown_ones() -> None:
    answer = "Armstrong walked first in 1969 [1]. Aldrin followed [moon-2]. He was a pilot [2]. [7]"
    judge = ScriptedJudge(
        verdict(
            citations=[
                {"citation": 1, "supported": True},
                {"citation": 2, "supported": True},
                {"citation": 3, "supported": False, "reason": "passage 2 is about Aldrin"},
            ]
        )
    )
    scores = run("citation-accuracy", judge, record(output=answer))
    assert scores[0].number == pytest.approx(2 / 4)
    assert scores[0].explanation == (
        '2 of 4 citations do not support their sentence: "He was a pilot." cites [2]: '
        'passage 2 is about Aldrin; "He was a pilot." cites [7]: not in the context (3 passages)'
    )
    text = prompt(judge)
    assert '3. Sentence: "He was a pilot."\n   Cites passage [2]' in text
    assert "Mars" not in text  # only cited passages are shown
    assert [c["rank"] for c in scores[0].metadata["citations"]] == [1, 2, 2, None]


def test_citation_accuracy_without_a_judge_call_when_nothing_valid_is_cited() -> None:
    judge = ScriptedJudge("unused")
    scores = run("citation-accuracy", judge, record(output="Armstrong walked first [5]."))
    assert scores[0].number == 0.0
    assert judge.asked == []
    with pytest.raises(Skip, match="cites no passage"):
        run("citation-accuracy", judge, record(output="Armstrong walked first."))


# -- params and judges ------------------------------------------------------------------------

JUDGED = (
    "faithfulness",
    "answer-relevance",
    "context-relevance",
    "context-sufficiency",
    "citation-accuracy",
)


@pytest.mark.parametrize("name", JUDGED)
def test_params_and_the_missing_judge(name: str) -> None:
    with pytest.raises(ParamError, match=f"{name}: param 'pass_threshold' must be between"):
        REG.resolve(name).bind({"pass_threshold": 1.5})
    bound = REG.resolve(name).bind({"judge": "strict"})
    with pytest.raises(Skip, match="no judge named 'strict' configured"):
        asyncio.run(bound.record_fn()(record()))


def test_templates_are_versioned_and_distinct() -> None:
    assert len({t.hash for t in TEMPLATES}) == len(TEMPLATES) == len(JUDGED)
    assert sorted(t.version for t in TEMPLATES) == sorted(f"{n}/v1" for n in JUDGED)
