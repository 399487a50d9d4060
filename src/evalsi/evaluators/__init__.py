"""The evaluator SDK: the decorator, params, the registry and the batching runner."""

from evalsi.evaluators._code import is_code_ref, load_code_evaluator
from evalsi.evaluators._decorator import BoundEvaluator, Evaluator, Skip, evaluator
from evalsi.evaluators._judges import (
    JudgeClient,
    JudgeReply,
    UsesJudge,
    current_judges,
    get_judge,
    judges_needed,
    no_judge_reason,
    use_judges,
)
from evalsi.evaluators._packs import DEFAULT_PACKS, Pack, PackOptIn, pack_of
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
from evalsi.evaluators._weighted import WeightedReduce

__all__ = [
    "DEFAULT_PACKS",
    "ENTRY_POINT_GROUP",
    "BoundEvaluator",
    "DatasetRunner",
    "Evaluator",
    "JudgeClient",
    "JudgeReply",
    "Pack",
    "PackOptIn",
    "ParamSpec",
    "RecordRunner",
    "Registry",
    "Runner",
    "Skip",
    "UsesJudge",
    "WeightedReduce",
    "current_judges",
    "evaluator",
    "get_judge",
    "is_code_ref",
    "judges_needed",
    "load_code_evaluator",
    "make_runner",
    "missing_checker",
    "no_judge_reason",
    "pack_of",
    "to_scores",
    "use_judges",
    "validate_params",
]
