"""The text pack: BLEU, chrF, TER, ROUGE, edit distance and perplexity."""

from evalsi.evaluators import Evaluator

EVALUATORS: tuple[Evaluator, ...] = ()
"""Every evaluator of the text pack."""

__all__ = ["EVALUATORS"]
