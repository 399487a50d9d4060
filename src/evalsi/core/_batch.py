"""ResultBatch: one evaluator's results for a batch of records, stored column by column.

Millions of (record, evaluator) results flow from the runner to the aggregator and the store.
Keeping them as parallel lists (outcome, the first score's kind and value, one text) instead
of one object graph per result is what lets that path run at the speed of a plain loop. The
text is the reason when a result is not SCORED, the label of a label score, or else the score's
explanation. Full ``Score`` lists are kept only for results those columns cannot describe
(several scores, a confidence, a cost...). Indexing a batch still gives an
``EvaluationResult``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from evalsi.core._score import EvaluationResult, Outcome, Score

NUMBER, PASSED, LABEL, STRUCTURED = 1, 2, 3, 4

INFRA_PREFIX = "infra_error("
"""How an ERROR's reason starts when infrastructure failed (a judge's 5xx after retries...):
such results are counted as ``infra_errors``, apart from the evaluator's own errors."""

_OUTCOMES = {int(o): o for o in Outcome}


class ResultBatch(Sequence[EvaluationResult]):
    """Parallel columns, one entry per record of the batch (see the module docstring)."""

    __slots__ = (
        "duration",
        "evaluator",
        "ids",
        "kind",
        "metric",
        "outcome",
        "ref",
        "scores",
        "text",
        "trial",
        "value",
    )

    def __init__(
        self, evaluator: str, ref: str, metric: str, ids: list[str], *, trial: int = 0
    ) -> None:
        n = len(ids)
        self.evaluator = evaluator
        self.ref = ref
        self.metric = metric  # the name an unnamed score takes
        self.ids = ids
        self.trial = trial
        self.outcome: list[int] = [1] * n
        self.kind: list[int | None] = [None] * n
        self.value: list[float | None] = [None] * n
        self.text: list[str | None] = [None] * n
        self.scores: list[list[Score] | None] = [None] * n
        self.duration = 0.0  # seconds per record, averaged over the batch

    def set_scores(self, i: int, scores: list[Score]) -> None:
        """Record well-formed scores for entry ``i`` (first score in the columns)."""
        first = scores[0]
        if first.passed is not None:
            self.kind[i], self.value[i] = PASSED, 1.0 if first.passed else 0.0
        elif first.number is not None:
            self.kind[i], self.value[i] = NUMBER, float(first.number)
        elif first.label is not None:
            self.kind[i], self.text[i] = LABEL, first.label
        else:
            self.kind[i] = STRUCTURED
        if first.explanation and self.text[i] is None:
            self.text[i] = first.explanation
        elif first.explanation:
            self.scores[i] = scores  # a label and an explanation: both need keeping
            return
        if (
            len(scores) > 1
            or self.kind[i] == STRUCTURED
            or first.name != self.metric
            or first.confidence is not None
            or first.cost is not None
            or first.metadata
        ):
            self.scores[i] = scores

    def set_outcome(self, i: int, outcome: Outcome, reason: str) -> None:
        self.outcome[i] = int(outcome)
        self.text[i] = reason

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> EvaluationResult: ...
    @overload
    def __getitem__(self, i: slice) -> list[EvaluationResult]: ...

    def __getitem__(self, i: int | slice) -> EvaluationResult | list[EvaluationResult]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return EvaluationResult(
            record_id=self.ids[i],
            evaluator=self.evaluator,
            evaluator_ref=self.ref,
            outcome=_OUTCOMES[self.outcome[i]],
            scores=self.score_list(i),
            reason=(self.text[i] or "") if self.outcome[i] != 1 else "",
            duration_s=self.duration,
            trial=self.trial,
        )

    def score_list(self, i: int) -> list[Score]:
        """The scores of entry ``i`` as ``Score`` objects (rebuilt from the columns if needed)."""
        full = self.scores[i]
        if full is not None:
            return list(full)
        if self.outcome[i] != 1:
            return []
        return decode_score(self.metric, self.kind[i], self.value[i], self.text[i])

    @classmethod
    def of(cls, results: Sequence[EvaluationResult], metric: str) -> ResultBatch:
        """A batch from ready-made results (dataset scope, tests)."""
        first = results[0] if results else None
        batch = cls(
            first.evaluator if first else "",
            first.evaluator_ref if first else "",
            metric,
            [r.record_id for r in results],
            trial=first.trial if first else 0,
        )
        for i, r in enumerate(results):
            if r.outcome is Outcome.SCORED and r.scores:
                batch.set_scores(i, r.scores)
            elif r.outcome is not Outcome.SCORED:
                batch.set_outcome(i, r.outcome, r.reason)
            batch.duration = r.duration_s
        return batch


def decode_score(
    metric: str, kind: int | None, value: float | None, text: str | None
) -> list[Score]:
    """The score a (kind, value, text) column triple stands for (see ``ResultBatch``)."""
    if kind == PASSED:
        return [Score(name=metric, passed=value == 1.0, explanation=text or "")]
    if kind == NUMBER:
        return [Score(name=metric, number=value, explanation=text or "")]
    if kind == LABEL:
        return [Score(name=metric, label=text)]
    return []
