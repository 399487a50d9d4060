"""The safety pack: PII and secret leakage, prompt injection, refusal and toxicity."""

from evalsi.evaluators import Evaluator

EVALUATORS: tuple[Evaluator, ...] = ()
"""Every evaluator of the safety pack."""

__all__ = ["EVALUATORS"]
