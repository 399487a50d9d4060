"""The rag pack: retrieval metrics over context and judge-based grounding metrics.

Retrieval (no judge; relevance labels in the record): ``context-precision``,
``context-recall``, ``context-ndcg``, ``context-mrr``, each at an optional cutoff ``k``.
Judge-based (a configured judge; the score computed from the judge's verdict list, with the
evidence in the explanation): ``faithfulness`` (also known as groundedness),
``answer-relevance``, ``context-relevance``, ``context-sufficiency``, ``citation-accuracy``.
Each is ``builtin/<name>@1.0.0``; the record shape is in ``docs/guides/packs/rag.md``.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.rag._grounding import (
    CITATION_TEMPLATE,
    FAITHFULNESS_TEMPLATE,
    citation_accuracy,
    faithfulness,
)
from evalsi.packs.rag._relevance import (
    ANSWER_RELEVANCE_TEMPLATE,
    CONTEXT_RELEVANCE_TEMPLATE,
    CONTEXT_SUFFICIENCY_TEMPLATE,
    answer_relevance,
    context_relevance,
    context_sufficiency,
)
from evalsi.packs.rag._retrieval import (
    context_mrr,
    context_ndcg,
    context_precision,
    context_recall,
)

EVALUATORS: tuple[Evaluator, ...] = (
    context_precision,
    context_recall,
    context_ndcg,
    context_mrr,
    faithfulness,
    answer_relevance,
    context_relevance,
    context_sufficiency,
    citation_accuracy,
)
"""Every evaluator of the rag pack."""

TEMPLATES = (
    FAITHFULNESS_TEMPLATE,
    ANSWER_RELEVANCE_TEMPLATE,
    CONTEXT_RELEVANCE_TEMPLATE,
    CONTEXT_SUFFICIENCY_TEMPLATE,
    CITATION_TEMPLATE,
)
"""The versioned prompt templates of the judge-based metrics."""

__all__ = ["EVALUATORS", "TEMPLATES"]
