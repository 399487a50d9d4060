"""The rag pack: retrieval metrics over context and judge-based grounding metrics."""

from evalsi.evaluators import Evaluator

EVALUATORS: tuple[Evaluator, ...] = ()
"""Every evaluator of the rag pack."""

__all__ = ["EVALUATORS"]
