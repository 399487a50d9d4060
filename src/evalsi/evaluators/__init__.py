"""The evaluator SDK: the decorator, params, the registry and the batching runner."""

from evalsi.evaluators._code import is_code_ref, load_code_evaluator
from evalsi.evaluators._decorator import (
    BoundEvaluator,
    Evaluator,
    NotMeasured,
    RecordError,
    Skip,
    evaluator,
)
from evalsi.evaluators._judges import (
    JudgeClient,
    JudgeReply,
    UsesJudge,
    find_judge,
    get_judge,
    judges_needed,
    use_judges,
)
from evalsi.evaluators._packs import DEFAULT_PACKS, Pack, PackOptIn, pack_of
from evalsi.evaluators._params import params_from_schema, validate_params
from evalsi.evaluators._registry import Registry
from evalsi.evaluators._runner import DatasetRunner, RecordRunner, Runner, make_runner
from evalsi.evaluators._weighted import WeightedReduce

__all__ = [
    "DEFAULT_PACKS",
    "BoundEvaluator",
    "DatasetRunner",
    "Evaluator",
    "JudgeClient",
    "JudgeReply",
    "NotMeasured",
    "Pack",
    "PackOptIn",
    "RecordError",
    "RecordRunner",
    "Registry",
    "Runner",
    "Skip",
    "UsesJudge",
    "WeightedReduce",
    "evaluator",
    "find_judge",
    "get_judge",
    "is_code_ref",
    "judges_needed",
    "load_code_evaluator",
    "make_runner",
    "pack_of",
    "params_from_schema",
    "use_judges",
    "validate_params",
]
