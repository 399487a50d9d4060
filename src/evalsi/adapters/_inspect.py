"""evalsi and Inspect AI scorers, both ways (``pip install 'evalsi[inspect]'``).

``inspect_scorer(ev)``: an evalsi evaluator as an Inspect scorer. Each sample becomes a record
(``input`` the sample's input text, ``output`` the model's completion, ``reference`` the
target, the sample's metadata), graded by evalsi's runner. A pass/fail score is Inspect's
``CORRECT``/``INCORRECT`` (metrics ``accuracy`` and ``stderr``), a number is a number (``mean``),
a label a string; several scores are a dict. A record evalsi skips is ``NOANSWER`` with the
reason as explanation; an error raises, so Inspect marks the sample as errored.

``from_inspect_scorer(scorer)``: an Inspect scorer as an evalsi evaluator (record scope,
batched): each record becomes a ``TaskState`` and a ``Target`` and the scorer's value comes
back as a score (``C``/``I`` pass/fail, numbers, labels). Served from a plugin
(docs/guides/adapters.md), Inspect's pins stay in the plugin's venv.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalsi.adapters._grade import bind, failed, grade, plain, runner_of
from evalsi.core import Content, Record, Score, UserError
from evalsi.evaluators import Evaluator, Skip, evaluator


def _inspect() -> Any:
    try:
        import inspect_ai.scorer as scorers
    except ImportError:
        raise UserError(
            "the Inspect adapter needs inspect-ai", hint="pip install 'evalsi[inspect]'"
        ) from None
    return scorers


def inspect_scorer(ev: Any, params: dict[str, Any] | None = None, *, name: str = "") -> Any:
    """An Inspect scorer that grades with the evalsi evaluator ``ev`` (and ``params``).

    Example::

        from inspect_ai import Task
        from evalsi.adapters import inspect_scorer
        from evalsi.packs import builtin_registry

        exact = builtin_registry().resolve("exact-match")
        task = Task(dataset=samples, scorer=inspect_scorer(exact, {"ignore_case": True}))
    """
    s = _inspect()
    bound = bind(ev, params)
    runner = runner_of(bound)
    kinds = {o.type for o in bound.manifest.outputs}
    metrics = [s.accuracy(), s.stderr()] if kinds == {"passed"} else [s.mean(), s.stderr()]

    @s.scorer(metrics=metrics, name=name or bound.manifest.ref.name)  # type: ignore[untyped-decorator]
    def adapted() -> Any:
        async def score(state: Any, target: Any) -> Any:
            text = target.text if target is not None else ""
            record = Record(
                id=str(state.sample_id),
                input=Content.of_text(state.input_text),
                output=Content.of_text(state.output.completion if state.output else ""),
                reference=Content.of_text(text) if text else None,
                metadata=dict(state.metadata or {}),
            )
            result = await grade(runner, record)
            why = failed(result)
            if why is not None:
                if why.startswith("skipped"):
                    return s.Score(value=s.NOANSWER, explanation=result.reason)
                raise RuntimeError(f"{bound.name}: {result.reason}")
            values = [(sc.name, _inspect_value(s, sc)) for sc in result.scores]
            value = values[0][1] if len(values) == 1 else dict(values)
            explanation = "\n".join(sc.explanation for sc in result.scores if sc.explanation)
            return s.Score(value=value, explanation=explanation or None)

        return score

    return adapted()


def _inspect_value(s: Any, score: Score) -> Any:
    if score.passed is not None:
        return s.CORRECT if score.passed else s.INCORRECT
    return plain(score)


def from_inspect_scorer(
    scorer: Any, *, name: str, version: str = "1.0.0", requires: Sequence[str] = ("output",)
) -> Evaluator:
    """The Inspect scorer ``scorer`` (an instance: ``match()``, ``includes()``...) as an
    evalsi evaluator named ``name`` (``namespace/name``)."""
    s = _inspect()
    from inspect_ai.model import ModelName, ModelOutput
    from inspect_ai.solver import TaskState

    async def score_batch(records: list[Record]) -> list[Any]:
        out: list[Any] = []
        for record in records:
            completion = record.output.as_text() if record.output else ""
            reference = record.reference.as_text() if record.reference else ""
            state = TaskState(
                model=ModelName("evalsi/record"),
                sample_id=record.id,
                epoch=1,
                input=record.input.as_text() if record.input else "",
                messages=[],
                target=s.Target(reference),
                output=ModelOutput.from_content("evalsi/record", completion),
                metadata=dict(record.metadata),
            )
            result = await scorer(state, s.Target(reference))
            out.append(_evalsi_score(s, result))
        return out

    score_batch.__doc__ = f"Inspect's {getattr(scorer, '__name__', 'scorer')} scorer."
    return evaluator(name=name, version=version, batch=True, requires=tuple(requires))(score_batch)


def _evalsi_score(s: Any, result: Any) -> Any:
    if result is None:
        return Skip("the Inspect scorer returned no score")
    value = result.value
    explanation = result.explanation or ""
    if value == s.NOANSWER:
        return Skip(explanation or "no answer")
    if value in (s.CORRECT, s.INCORRECT):
        return Score(passed=value == s.CORRECT, explanation=explanation)
    if isinstance(value, bool):
        return Score(passed=value, explanation=explanation)
    if isinstance(value, (int, float)):
        return Score(number=float(value), explanation=explanation)
    if isinstance(value, str):
        return Score(label=value, explanation=explanation)
    return Score(structured=value, explanation=explanation)
