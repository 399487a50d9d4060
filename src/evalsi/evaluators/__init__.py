"""The evaluator SDK: the decorator, params, the registry and the batching runner."""

from evalsi.evaluators._decorator import BoundEvaluator, Evaluator, Skip, evaluator
from evalsi.evaluators._params import ParamSpec, validate_params
from evalsi.evaluators._registry import ENTRY_POINT_GROUP, Registry
from evalsi.evaluators._runner import (
    DatasetRunner,
    RecordRunner,
    Runner,
    make_runner,
    missing_checker,
    to_scores,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "BoundEvaluator",
    "DatasetRunner",
    "Evaluator",
    "ParamSpec",
    "RecordRunner",
    "Registry",
    "Runner",
    "Skip",
    "evaluator",
    "make_runner",
    "missing_checker",
    "to_scores",
    "validate_params",
]
