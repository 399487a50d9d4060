"""``reference-correctness`` (output vs reference) and ``pairwise`` (output vs a baseline)."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import orjson

from evalsi.core import OutputSpec, Record, Score
from evalsi.evaluators import Skip, UsesJudge
from evalsi.packs._declare import builtin, number, passed
from evalsi.packs.judge._ask import (
    EXAMPLE_JUDGES,
    PromptTemplate,
    ask_template,
    bool_check,
    explanation_of,
    judged,
)
from evalsi.packs.judge._projection import projected
from evalsi.packs.judge._rubric import _SYSTEM, context_block, judge_projection

REFERENCE_TEMPLATE = PromptTemplate(
    version="reference-correctness/v1",
    system=_SYSTEM,
    user="""Decide whether the response is correct, taking the reference answer as the truth.
A response is correct when it states the same answer as the reference (wording, length and \
extra harmless detail do not matter) and contradicts it nowhere.
$context
# Reference answer
$reference

# Response
$output

Answer with only a JSON object:
{"correct": true or false, "explanation": "<one sentence>"}""",
)

PAIRWISE_TEMPLATE = PromptTemplate(
    version="pairwise/v1",
    system=_SYSTEM,
    user="""Compare two responses and say which is better.
$criteria$context
# Response A
$a

# Response B
$b

Do not let the order of the responses, their length or their style sway you. Answer with only \
a JSON object:
{"preferred": "A" or "B" or "tie", "explanation": "<one sentence>"}""",
)

_DEFAULT_PAIRWISE_CRITERIA = "Which response answers the input better: correct, complete, clear."


_check_correct = bool_check("correct")


class ReferenceCorrectness(UsesJudge):
    """A judge decides whether the output states the same answer as the reference: pass/fail.

    Template ``reference-correctness/v1``; the judge answers ``{"correct", "explanation"}``.
    Parsing, the repair request, caching and cost are as for ``llm-judge``.

    Args:
        judge: the name of the configured judge to ask.
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``, as
            for ``llm-judge`` (``include`` must list ``output`` and ``reference``).
    """

    def __init__(self, *, judge: str = "default", evidence: dict[str, Any] | None = None) -> None:
        self.judge = judge
        self.projection = judge_projection(
            "reference-correctness", evidence, requires=("output", "reference")
        )

    async def __call__(self, record: Record) -> Score:
        record, evidence = projected(self.projection, record)
        assert record.output is not None
        assert record.reference is not None
        verdict = await ask_template(
            self.judge,
            REFERENCE_TEMPLATE,
            _check_correct,
            evidence=evidence,
            context=context_block(record, reference=False, evidence=evidence),
            reference=record.reference.as_text(),
            output=record.output.as_text(),
        )
        why = explanation_of(verdict.data)
        score = Score(passed=bool(verdict.data["correct"]), explanation=why)
        return judged(score, self.judge, REFERENCE_TEMPLATE, verdict.replies, evidence)


reference_correctness = builtin(
    "judge",
    "reference-correctness",
    passed("reference-correctness", "the judge finds it correct"),
    requires=("output", "reference"),
    example='evalsi.evaluate("qa.jsonl", ["reference-correctness"], ' + EXAMPLE_JUDGES + ")",
)(ReferenceCorrectness)


def _check_preferred(data: dict[str, Any]) -> str | None:
    value = data.get("preferred")
    if isinstance(value, str) and value.strip().upper() in ("A", "B", "TIE"):
        data["preferred"] = value.strip().upper()
        return None
    return "no 'preferred' of A, B or tie"


class Pairwise(UsesJudge):
    """A judge compares the output with a baseline, asked twice with the order swapped.

    The baseline is ``metadata.baseline`` (e.g. the previous model's answer), else the
    reference; a record with neither is SKIPPED. The judge sees (output, baseline) as (A, B),
    then (B, A) swapped. Scores: ``pairwise`` (label ``output``, ``baseline`` or ``tie``; a
    tie when the two orders disagree), ``pairwise-win`` (1 / 0.5 / 0 for the output) and
    ``position-consistent`` (pass when both orders gave the same verdict: its mean measures
    the judge's position bias). Template ``pairwise/v1``.

    Args:
        criteria: what "better" means (default: correct, complete, clear).
        judge: the name of the configured judge to ask.
    """

    def __init__(self, *, criteria: str = "", judge: str = "default") -> None:
        self.criteria = criteria or _DEFAULT_PAIRWISE_CRITERIA
        self.judge = judge

    async def __call__(self, record: Record) -> list[Score]:
        assert record.output is not None
        baseline = record.metadata.get("baseline")
        if baseline is not None:
            other = baseline if isinstance(baseline, str) else orjson.dumps(baseline).decode()
        elif record.reference is not None:
            other = record.reference.as_text()
        else:
            raise Skip("record has no metadata.baseline or reference to compare with")
        output = record.output.as_text()
        ask = partial(
            ask_template,
            self.judge,
            PAIRWISE_TEMPLATE,
            _check_preferred,
            criteria=f"\n# Criteria\n{self.criteria}\n",
            context=context_block(record, reference=False),
        )
        first, second = await asyncio.gather(ask(a=output, b=other), ask(a=other, b=output))
        straight = {"A": "output", "B": "baseline", "TIE": "tie"}[first.data["preferred"]]
        swapped = {"A": "baseline", "B": "output", "TIE": "tie"}[second.data["preferred"]]
        consistent = straight == swapped
        preferred = straight if consistent else "tie"
        explanation = (
            f"output first: {straight} ({explanation_of(first.data)}); baseline first: "
            f"{swapped} ({explanation_of(second.data)})"
        )
        verdicts = {"output_first": straight, "baseline_first": swapped}
        score = Score(label=preferred, explanation=explanation, metadata={"verdicts": verdicts})
        return [
            judged(score, self.judge, PAIRWISE_TEMPLATE, [*first.replies, *second.replies]),
            Score(
                name="pairwise-win",
                number={"output": 1.0, "tie": 0.5, "baseline": 0.0}[preferred],
            ),
            Score(name="position-consistent", passed=consistent),
        ]


pairwise = builtin(
    "judge",
    "pairwise",
    OutputSpec("pairwise", "label", None, None, "output, baseline or tie"),
    number("pairwise-win", "1 win, 0.5 tie, 0 loss"),
    passed("position-consistent", "same verdict in both orders"),
    example='evalsi.evaluate("ab.jsonl", ["pairwise"], ' + EXAMPLE_JUDGES + ")",
)(Pairwise)
