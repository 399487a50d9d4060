"""``llm-judge`` (a rubric → a score with an explanation) and ``g-eval`` (criteria + steps)."""

from __future__ import annotations

from typing import Any

from evalsi.core import ParamError, Record, Score
from evalsi.evaluators import UsesJudge, get_judge
from evalsi.packs._declare import builtin, number, passed
from evalsi.packs.judge._ask import (
    EXAMPLE_JUDGES,
    Check,
    PromptTemplate,
    ask_template,
    explanation_of,
    judged,
    number_check,
)
from evalsi.packs.judge._projection import Evidence, Projection, projected, projection_param

_SYSTEM = (
    "You are a careful, impartial evaluator. Judge only what you are asked to judge, and answer "
    "in exactly the JSON format requested."
)

LLM_JUDGE_TEMPLATE = PromptTemplate(
    version="llm-judge/v1",
    system=_SYSTEM,
    user="""Grade the response below against the rubric.

# Rubric
$rubric
$context
# Response
$output

Give a score from $low to $high ($meaning), where $high means the response fully meets the \
rubric. Answer with only a JSON object:
{"score": <number from $low to $high>, "explanation": "<one or two sentences>"}""",
)
"""The versioned prompt of ``llm-judge``; its hash is in every score's metadata."""

G_EVAL_TEMPLATE = PromptTemplate(
    version="g-eval/v1",
    system=_SYSTEM,
    user="""You will be given a response to evaluate on one criterion.

# Evaluation criteria
$criteria

# Evaluation steps
$steps
$context
# Response
$output

Follow the evaluation steps, then give a score from 1 (worst) to 5 (best). Answer with only a \
JSON object:
{"steps": "<what you found at each step, briefly>", "score": <1 to 5>, \
"explanation": "<one sentence>"}""",
)
"""The versioned prompt of ``g-eval``."""

DEFAULT_G_EVAL_STEPS = (
    "Read the input (if any) and the response carefully.",
    "Check how well the response meets the evaluation criteria, noting every shortfall.",
    "Weigh the shortfalls and assign a score from 1 to 5.",
)


SHOWN = ("input", "output", "reference")
"""The parts the judge-pack prompts have a section of their own for, and so what they show
without an ``evidence`` param; any other part a projection includes gets a ``# <part>``
section in the prompt's context."""


def context_block(
    record: Record, *, reference: bool = True, evidence: Evidence | None = None
) -> str:
    """The input (and reference) sections of a prompt, for the record's fields present, then
    a section for each part of ``evidence`` the prompt has no section for."""
    parts = []
    if record.input is not None:
        parts.append(f"\n# Input\n{record.input.as_text()}\n")
    if reference and record.reference is not None:
        parts.append(f"\n# Reference answer\n{record.reference.as_text()}\n")
    if evidence is not None:
        parts.append(evidence.sections(SHOWN))
    return "".join(parts)


def judge_projection(
    evaluator: str, evidence: dict[str, Any] | None, requires: tuple[str, ...] = ("output",)
) -> Projection | None:
    """The ``evidence`` param of a judge-pack evaluator, checked (see ``projection_param``)."""
    return projection_param(evaluator, evidence, default=SHOWN, requires=requires)


class LlmJudge(UsesJudge):
    """A judge model grades the output against a rubric: a score in [0, 1] with an explanation.

    The prompt (template ``llm-judge/v1``, its hash in each score's metadata) shows the rubric,
    the input and the reference when the record has them, and the output, and asks for
    ``{"score": ..., "explanation": ...}``. A JSON object anywhere in the answer is accepted
    (fenced or with text around it); otherwise the judge is asked once to answer in the format,
    and then the record is an ERROR quoting its answer, never a silent 0. Answers are cached in
    the store: an unchanged re-run makes no judge call. Each score's ``cost`` holds the tokens
    of its judge calls (zero when cached, with ``metadata.cached`` true).

    There is no default judge: configure one (``spec.judges`` in a run spec, ``judges=`` in
    ``evalsi.evaluate``); a run refuses to start when the named judge is missing.

    Args:
        rubric: what a good response is (required).
        judge: the name of the configured judge to ask.
        scale: the allowed scores, e.g. ``[1, 2, 3, 4, 5]``; the score is normalised to [0, 1]
            (``(s - min) / (max - min)``). Default: the judge's own scale (``scale: {min, max}``
            in its config: any number from min to max), else a number from 0 to 1.
        pass_threshold: also emit ``llm-judge-passed``: the normalised score is at least this.
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``
            (default: input, reference, output, no limit; ``include`` must list ``output``);
            over ``max_bytes`` the record is SKIPPED unavailable, the judge not asked.
    """

    def __init__(
        self,
        *,
        rubric: str,
        judge: str = "default",
        scale: list[int] | None = None,
        pass_threshold: float | None = None,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        if not rubric.strip():
            raise ParamError("llm-judge: param 'rubric' must not be empty")
        if scale is not None and (len(set(scale)) < 2):
            raise ParamError("llm-judge: param 'scale' needs at least two distinct values")
        if pass_threshold is not None and not 0.0 <= pass_threshold <= 1.0:
            raise ParamError("llm-judge: param 'pass_threshold' is on the normalised 0..1 scale")
        self.rubric = rubric
        self.judge = judge
        self.scale = sorted(set(scale)) if scale is not None else None
        self.pass_threshold = pass_threshold
        self.projection = judge_projection("llm-judge", evidence)

    def _bounds(self) -> tuple[float, float, str, Check]:
        """The scale asked for: this evaluator's ``scale``, else the judge's, else 0 to 1."""
        if self.scale:
            choices = self.scale
            in_range = number_check(choices[0], choices[-1])

            def check(data: dict[str, Any]) -> str | None:
                problem = in_range(data)
                if problem is None and data["score"] not in choices:
                    return f"'score' {data['score']} is not one of {choices}"
                return problem

            return choices[0], choices[-1], "one of " + ", ".join(map(str, choices)), check
        low, high = _judge_scale(self.judge)
        return low, high, "any number in between", number_check(low, high)

    async def __call__(self, record: Record) -> list[Score]:
        record, evidence = projected(self.projection, record)
        assert record.output is not None
        low, high, meaning, check = self._bounds()
        verdict = await ask_template(
            self.judge,
            LLM_JUDGE_TEMPLATE,
            check,
            evidence=evidence,
            rubric=self.rubric,
            context=context_block(record, evidence=evidence),
            output=record.output.as_text(),
            low=f"{low:g}",
            high=f"{high:g}",
            meaning=meaning,
        )
        raw = float(verdict.data["score"])
        number = (raw - low) / (high - low)
        metadata = {"raw_score": raw, "scale": [low, high]}
        score = Score(number=number, explanation=explanation_of(verdict.data), metadata=metadata)
        scores = [judged(score, self.judge, LLM_JUDGE_TEMPLATE, verdict.replies, evidence)]
        if self.pass_threshold is not None:
            scores.append(Score(name="llm-judge-passed", passed=number >= self.pass_threshold))
        return scores


def _judge_scale(name: str) -> tuple[float, float]:
    """The ``(min, max)`` the judge's config declares (``identity()["scale"]``), else 0 to 1."""
    scale = get_judge(name).identity().get("scale")
    if isinstance(scale, dict) and {"min", "max"} <= scale.keys():
        return float(scale["min"]), float(scale["max"])
    return 0.0, 1.0


llm_judge = builtin(
    "judge",
    "llm-judge",
    number("llm-judge", "the judge's score, normalised"),
    passed("llm-judge-passed", "score >= pass_threshold"),
    example='evalsi.evaluate("answers.jsonl", [{"ref": "llm-judge", "params": {"rubric": '
    '"Answers correctly and politely"}}], ' + EXAMPLE_JUDGES + ")",
)(LlmJudge)


class GEval(UsesJudge):
    """G-Eval style grading: criteria and explicit evaluation steps, a 1–5 score in [0, 1].

    The judge follows the evaluation steps (given, or three generic ones) and answers
    ``{"steps", "score", "explanation"}`` (template ``g-eval/v1``); the score is normalised as
    ``(s - 1) / 4``. Unlike the paper, no token probabilities weight the score (most endpoints
    do not return them). Parsing, the repair request, caching and cost are as for
    ``llm-judge``.

    Args:
        criteria: what to grade (required), e.g. "Coherence: the answer is well structured".
        steps: the evaluation steps, in order.
        judge: the name of the configured judge to ask.
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``, as
            for ``llm-judge``.
    """

    def __init__(
        self,
        *,
        criteria: str,
        steps: list[str] | None = None,
        judge: str = "default",
        evidence: dict[str, Any] | None = None,
    ) -> None:
        if not criteria.strip():
            raise ParamError("g-eval: param 'criteria' must not be empty")
        self.criteria = criteria
        self.steps = list(steps) if steps else list(DEFAULT_G_EVAL_STEPS)
        self.judge = judge
        self.projection = judge_projection("g-eval", evidence)
        self._check = number_check(1, 5)

    async def __call__(self, record: Record) -> Score:
        record, evidence = projected(self.projection, record)
        assert record.output is not None
        verdict = await ask_template(
            self.judge,
            G_EVAL_TEMPLATE,
            self._check,
            evidence=evidence,
            criteria=self.criteria,
            steps="\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1)),
            context=context_block(record, evidence=evidence),
            output=record.output.as_text(),
        )
        raw = float(verdict.data["score"])
        why = explanation_of(verdict.data)
        score = Score(number=(raw - 1.0) / 4.0, explanation=why, metadata={"raw_score": raw})
        return judged(score, self.judge, G_EVAL_TEMPLATE, verdict.replies, evidence)


g_eval = builtin(
    "judge",
    "g-eval",
    number("g-eval", "1–5 judge score, normalised"),
    example='evalsi.evaluate("answers.jsonl", [{"ref": "g-eval", "params": {"criteria": '
    '"Coherence: the answer is well structured"}}], ' + EXAMPLE_JUDGES + ")",
)(GEval)
