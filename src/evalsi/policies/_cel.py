"""The CEL conditions of an online policy: what each may name, checked when the policy loads.

Four places hold CEL: the selector and the ``always`` rules (over ``resource``, ``span`` and
``trace``), a cascade step's ``when`` and ``promote.when`` (over the scores so far, with
``score('x')`` and ``passed('x')``), and an alert's ``when`` (over the window: ``mean('x')``,
``rate('x')``, ``count('x')`` and ``n``). The checks every condition gets (length, names,
functions, a dry run on made-up data) are ``core``'s (``compile_condition``); this module holds
the policies' vocabularies.
"""

from __future__ import annotations

from typing import Any

from evalsi.core import ConditionError, Vocabulary, compile_condition, evaluate_condition

__all__ = [
    "ConditionError",
    "Vocabulary",
    "compile_condition",
    "evaluate",
    "scores_vocabulary",
    "trace_vocabulary",
    "window_vocabulary",
]

evaluate = evaluate_condition


# -- the vocabularies -----------------------------------------------------------------------------

TRACE_VARIABLES = ("resource", "span", "trace")


def _trace_samples() -> tuple[dict[str, Any], ...]:
    out = []
    for error in (False, True):
        span: dict[str, Any] = {
            "name": "agent", "type": "agent", "attributes": {}, "service": "svc",
            "error": error, "duration_ms": 1200.0 if error else 35.0,
        }  # fmt: skip
        trace = {
            "error": error, "duration_ms": span["duration_ms"], "span_count": 3,
            "service": "svc", "session_id": "s1",
        }  # fmt: skip
        out.append({"resource": {"service.name": "svc"}, "span": span, "trace": trace})
    return tuple(out)


def trace_vocabulary() -> Vocabulary:
    """The selector and ``always`` rules."""
    return Vocabulary(TRACE_VARIABLES, _trace_samples(), {})


def scores_vocabulary() -> Vocabulary:
    """A cascade step's ``when``, an ``onFeedback`` step's ``when`` and ``promote.when``."""
    samples = []
    for base, ok in zip(_trace_samples(), (True, False), strict=True):
        made_up = {
            "evaluator": "e", "metric": "e", "value": 1.0 if ok else 0.0, "passed": ok,
            "outcome": "scored", "label": "",
        }  # fmt: skip
        feedback = {"name": "feedback", "value": -1.0, "label": "", "negative": True}
        samples.append({**base, "scores": [made_up], "feedback": feedback})

    def score(name: Any, *_: Any) -> float:
        return 0.5

    def passed(name: Any, *_: Any) -> bool:
        return True

    return Vocabulary(
        (*TRACE_VARIABLES, "scores", "feedback"),
        tuple(samples),
        {"score": score, "passed": passed},
        named=("score", "passed"),
    )


def window_vocabulary() -> Vocabulary:
    """An alert's ``when``."""

    def number(*_: Any) -> float:
        return 0.5

    def count(*_: Any) -> int:
        return 10

    return Vocabulary(
        ("n",),
        ({"n": 10}, {"n": 0}),
        {"mean": number, "rate": number, "count": count},
        named=("mean", "rate", "count"),
    )
