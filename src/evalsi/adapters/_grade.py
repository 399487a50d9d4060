"""Grading one record with a bound evaluator, for the libraries that call a scorer per sample
(Inspect, MLflow): the batching runner, so skips, errors and score checks are evalsi's own."""

from __future__ import annotations

import asyncio
from typing import Any

from evalsi.core import EvaluationResult, Outcome, Record, Score, UserError
from evalsi.evaluators import BoundEvaluator, Evaluator, RecordRunner


def bind(ev: Any, params: dict[str, Any] | None) -> BoundEvaluator:
    """``ev`` bound with ``params``: an ``Evaluator``, or an already bound one."""
    if isinstance(ev, BoundEvaluator):
        if params:
            raise UserError(f"{ev.name}: already bound; pass params to bind() instead")
        return ev
    if not isinstance(ev, Evaluator):
        raise UserError(f"not an evalsi evaluator (decorate it @evaluator): {ev!r}")
    return ev.bind(params or {})


def runner_of(bound: BoundEvaluator) -> RecordRunner:
    try:
        return RecordRunner(bound)
    except ValueError as e:
        raise UserError(f"{bound.ref}: {e}; only record-scope evaluators adapt") from None


async def grade(runner: RecordRunner, record: Record) -> EvaluationResult:
    if runner.is_async:
        batch = await runner.run_async([record])
    else:
        batch = await asyncio.to_thread(runner.run, [record])
    return batch[0]


def grade_sync(runner: RecordRunner, record: Record) -> EvaluationResult:
    if runner.is_async:
        return asyncio.run(runner.run_async([record]))[0]
    return runner.run([record])[0]


def plain(score: Score) -> Any:
    """A score's value as plain data: a bool, a number, a label or the structured value."""
    for value in (score.passed, score.number, score.label, score.structured):
        if value is not None:
            return value
    return None


def failed(result: EvaluationResult) -> str | None:
    """Why ``result`` has no score (skipped or errored), or None when it was scored."""
    if result.outcome is Outcome.SCORED:
        return None
    return f"{result.outcome.name.lower()}: {result.reason}"
