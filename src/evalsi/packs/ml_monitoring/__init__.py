"""The ml-monitoring pack: drift, data quality and fairness gaps over a dataset."""

from evalsi.evaluators import Evaluator

EVALUATORS: tuple[Evaluator, ...] = ()
"""Every evaluator of the ml-monitoring pack."""

__all__ = ["EVALUATORS"]
