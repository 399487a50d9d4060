"""evalsi: self-hosted evaluation for LLM apps, RAG, agents and ML models.

The public surface is small and lazily imported, so ``import evalsi`` stays fast:

    >>> import evalsi
    >>> result = evalsi.evaluate(
    ...     data=[{"id": "1", "output": "Paris", "reference": "Paris"}],
    ...     evaluators=["exact-match"],
    ...     store=":memory:",
    ... )
    >>> result.metric("exact-match").mean
    1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalsi._api import (
        calibrate,
        calibrate_async,
        evaluate,
        evaluate_async,
        grade,
        run,
        run_async,
    )
    from evalsi.core import VERSION as __version__
    from evalsi.core import (
        Content,
        DatasetError,
        EvalsiError,
        EvaluationResult,
        Message,
        MetricSummary,
        Outcome,
        OutputSpec,
        ParamError,
        Record,
        Score,
        ToolCall,
        UnknownEvaluatorError,
        Usage,
        UserError,
    )
    from evalsi.datasets import FieldMap
    from evalsi.evaluators import Evaluator, Registry, Skip, evaluator
    from evalsi.runs import CalibrationResult, RunResult, RunSpec, ScoreResult

__all__ = [
    "AsyncClient",
    "CalibrationResult",
    "Client",
    "Content",
    "DatasetError",
    "EvalsiError",
    "EvaluationResult",
    "Evaluator",
    "FieldMap",
    "Message",
    "MetricSummary",
    "Outcome",
    "OutputSpec",
    "ParamError",
    "Record",
    "Registry",
    "RunResult",
    "RunSpec",
    "Score",
    "ScoreResult",
    "Skip",
    "ToolCall",
    "UnknownEvaluatorError",
    "Usage",
    "UserError",
    "__version__",
    "calibrate",
    "calibrate_async",
    "evaluate",
    "evaluate_async",
    "evaluator",
    "grade",
    "run",
    "run_async",
]

# The client is named only here, never imported at type-checking time: layers below it import
# ``evalsi`` (import-linter counts TYPE_CHECKING imports), and the client must stay above them.
_WHERE = {
    "AsyncClient": "evalsi.client",
    "Client": "evalsi.client",
    "calibrate": "evalsi._api",
    "calibrate_async": "evalsi._api",
    "CalibrationResult": "evalsi.runs",
    "evaluate": "evalsi._api",
    "evaluate_async": "evalsi._api",
    "grade": "evalsi._api",
    "run": "evalsi._api",
    "run_async": "evalsi._api",
    "RunResult": "evalsi.runs",
    "RunSpec": "evalsi.runs",
    "FieldMap": "evalsi.datasets",
    "Evaluator": "evalsi.evaluators",
    "Registry": "evalsi.evaluators",
    "Skip": "evalsi.evaluators",
    "evaluator": "evalsi.evaluators",
    "ScoreResult": "evalsi.runs",
}


def __getattr__(name: str) -> Any:
    import importlib
    import importlib.util

    if name not in __all__:
        # a sub-package read as an attribute (`evalsi.runs.grade_run`, as the guides write it)
        # is imported then, like the names above
        public = name.isidentifier() and not name.startswith("_")
        if public and importlib.util.find_spec(f"evalsi.{name}") is not None:
            return importlib.import_module(f"evalsi.{name}")
        raise AttributeError(f"module 'evalsi' has no attribute {name!r}")
    # ``__version__`` too is read on first use: importing evalsi.core costs ~0.2 s
    original = "VERSION" if name == "__version__" else name
    value = getattr(importlib.import_module(_WHERE.get(name, "evalsi.core")), original)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
