"""An evalsi evaluator as an MLflow GenAI scorer (``mlflow.genai.scorers``; ``pip install
'evalsi[mlflow]'``), for ``mlflow.genai.evaluate(data, scorers=[...])``.

MLflow calls a scorer with ``inputs``, ``outputs`` and ``expectations`` (and a trace); they
become a record's ``input``, ``output`` and ``reference`` (``expectations["expected_response"]``,
else the only expectation). The verdict is a ``Feedback``: pass/fail as ``yes``/``no`` (MLflow's
convention for pass/fail judges), a number or a label as is, the explanation as rationale; a
record evalsi skips or errors is a ``Feedback`` carrying that error, which MLflow reports
instead of a value.
"""

from __future__ import annotations

from typing import Any

from evalsi.adapters._grade import bind, grade_sync, plain, runner_of
from evalsi.core import Content, Outcome, Record, UserError


def _content(value: Any) -> Content | None:
    if value is None:
        return None
    if isinstance(value, dict) and len(value) == 1:
        (value,) = value.values()  # {"question": "..."}: the one field is the content
    return Content.of_text(value) if isinstance(value, str) else Content.from_value(value)


def mlflow_scorer(ev: Any, params: dict[str, Any] | None = None, *, name: str = "") -> Any:
    """An MLflow scorer that grades with the evalsi evaluator ``ev`` (and ``params``).

    Example::

        import mlflow
        from evalsi.adapters import mlflow_scorer

        mlflow.genai.evaluate(data=rows, scorers=[mlflow_scorer(exact, {"ignore_case": True})])
    """
    try:
        from mlflow.entities import Feedback
        from mlflow.genai.scorers import scorer
    except ImportError:
        raise UserError(
            "the MLflow adapter needs mlflow", hint="pip install 'evalsi[mlflow]'"
        ) from None
    bound = bind(ev, params)
    runner = runner_of(bound)
    label = name or bound.manifest.ref.name

    def grade(inputs: Any = None, outputs: Any = None, expectations: Any = None) -> Any:
        expected = expectations
        if isinstance(expectations, dict):
            expected = expectations.get("expected_response", expectations)
        record = Record(
            id="mlflow",
            input=_content(inputs),
            output=_content(outputs),
            reference=_content(expected),
        )
        result = grade_sync(runner, record)
        if result.outcome is not Outcome.SCORED:
            return Feedback(name=label, error=f"{result.outcome.name.lower()}: {result.reason}")
        feedback = []
        for score in result.scores:
            value = plain(score)
            if isinstance(value, bool):
                value = "yes" if value else "no"
            feedback.append(
                Feedback(
                    name=label if len(result.scores) == 1 else score.name,
                    value=value,
                    rationale=score.explanation or None,
                )
            )
        return feedback[0] if len(feedback) == 1 else feedback

    grade.__name__ = label.replace("-", "_")
    return scorer(grade, name=label)
