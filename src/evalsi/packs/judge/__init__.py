"""The judge pack: evaluators that ask a configured judge model (there is no default judge).

``llm-judge`` (a rubric → a score with an explanation), ``g-eval`` (criteria + evaluation
steps, 1–5), ``reference-correctness`` (pass/fail against the reference) and ``pairwise`` (the
output vs a baseline, asked in both orders to measure position bias). Each is
``builtin/<name>@1.0.0`` with a versioned prompt template whose hash is in its scores' metadata.
``Projection`` (``_projection``) declares what of a record a judge sees, within a byte budget.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.judge._ask import (
    EXAMPLE_JUDGES,
    REPAIR_PROMPT,
    Check,
    JudgeFormatError,
    PromptTemplate,
    Verdict,
    ask_template,
    ask_verdict,
    bool_check,
    explanation_of,
    find_json_object,
    judged,
    number_check,
    prompt_identity,
)
from evalsi.packs.judge._compare import (
    PAIRWISE_TEMPLATE,
    REFERENCE_TEMPLATE,
    pairwise,
    reference_correctness,
)
from evalsi.packs.judge._projection import (
    PARTS,
    PROJECTION_VERSION,
    Evidence,
    Projection,
    Unavailable,
    projected,
    projection_param,
)
from evalsi.packs.judge._rubric import G_EVAL_TEMPLATE, LLM_JUDGE_TEMPLATE, g_eval, llm_judge

EVALUATORS: tuple[Evaluator, ...] = (llm_judge, g_eval, reference_correctness, pairwise)
"""Every evaluator of the judge pack."""

__all__ = [
    "EVALUATORS",
    "EXAMPLE_JUDGES",
    "G_EVAL_TEMPLATE",
    "LLM_JUDGE_TEMPLATE",
    "PAIRWISE_TEMPLATE",
    "PARTS",
    "PROJECTION_VERSION",
    "REFERENCE_TEMPLATE",
    "REPAIR_PROMPT",
    "Check",
    "Evidence",
    "JudgeFormatError",
    "Projection",
    "PromptTemplate",
    "Unavailable",
    "Verdict",
    "ask_template",
    "ask_verdict",
    "bool_check",
    "explanation_of",
    "find_json_object",
    "g_eval",
    "judged",
    "llm_judge",
    "number_check",
    "pairwise",
    "projected",
    "projection_param",
    "prompt_identity",
    "reference_correctness",
]
