"""The first failing records of a run and why: what ``--format json`` lists under
``"failures"`` and the table prints after the metrics.

A metric's mean says how often; this says which records and why, with the evaluator's own
explanation (``expected "Paris", got "paris."``, ``latency 2310 ms > budget 2000 ms``) or the
reason an evaluator errored. Only the first few are read: the results stream in task-key order
and the scan stops at the limit, so a run of a million records that fails early costs little.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from evalsi.core import EvaluationResult, Outcome

if TYPE_CHECKING:
    from evalsi.store import SqlStore

SHOWN_FAILURES: Final = 5
"""Failing records listed by default (``--show-failures N`` changes it, 0 lists none)."""

FAILURE_COLUMNS: Final = ("record", "metric", "reason")
_REASON_CHARS: Final = 300


@dataclass(frozen=True, slots=True)
class FailingRecord:
    """One failed (or errored) metric of one record, and why."""

    id: str
    evaluator: str
    metric: str
    reason: str
    outcome: str  # "failed" (scored, did not pass) or "error"
    trial: int = 0

    def to_dict(self) -> dict[str, Any]:
        # The keys of `evalsi runs show --failures` (record_id, evaluator, outcome, detail),
        # plus the metric and trial: one shape wherever failures are listed.
        return {
            "record_id": self.id,
            "evaluator": self.evaluator,
            "metric": self.metric,
            "trial": self.trial,
            "outcome": self.outcome,
            "detail": self.reason,
        }


def failing_records(db: SqlStore, run_id: str, limit: int = SHOWN_FAILURES) -> list[FailingRecord]:
    """The first ``limit`` failures of ``run_id`` in record order (none when ``limit`` <= 0)."""
    # Stopping early is safe: iter_results closes its cursor when the generator is dropped.
    return first_failures((result for _seq, _index, result in db.iter_results(run_id)), limit)


def first_failures(results: Iterable[EvaluationResult], limit: int) -> list[FailingRecord]:
    """The first ``limit`` failures among ``results`` (a store's, or a server's pages), in the
    order given; reading stops once they are found."""
    failures = itertools.chain.from_iterable(map(_failures_of, results))
    return list(itertools.islice(failures, max(limit, 0)))


def _failures_of(result: EvaluationResult) -> list[FailingRecord]:
    def failing(metric: str, reason: str, outcome: str) -> FailingRecord:
        return FailingRecord(
            result.record_id, result.evaluator, metric, _cut(reason), outcome, result.trial
        )

    if result.outcome == Outcome.ERROR:
        return [failing(result.evaluator, result.reason or "error", "error")]
    if result.outcome != Outcome.SCORED:
        return []
    return [
        failing(s.name or result.evaluator, s.explanation or "did not pass", "failed")
        for s in result.scores
        if s.passed is False
    ]


def failure_rows(failures: Sequence[FailingRecord]) -> list[tuple[str, ...]]:
    """Table rows: the record (with its trial when there are several), the metric, why."""
    rows: list[tuple[str, ...]] = []
    for f in failures:
        record = f"{f.id} (trial {f.trial})" if f.trial else f.id
        metric = f.metric if f.metric == f.evaluator else f"{f.evaluator}/{f.metric}"
        reason = f.reason if f.outcome == "failed" else f"ERROR: {f.reason}"
        rows.append((record, metric, reason))
    return rows


_HINT = "\n  hint: "


def _cut(reason: str) -> str:
    """``reason`` in about ``_REASON_CHARS``: a long message is cut, never its hint (what to do
    about it), which a cut at the end took first ("hint: check the API key the…")."""
    if len(reason) <= _REASON_CHARS:
        return reason
    message, sep, hint = reason.partition(_HINT)
    room = max(_REASON_CHARS - len(sep) - len(hint), _REASON_CHARS // 3)
    return (message if len(message) <= room else message[: room - 1] + "…") + sep + hint


__all__ = [
    "FAILURE_COLUMNS",
    "SHOWN_FAILURES",
    "FailingRecord",
    "failing_records",
    "failure_rows",
    "first_failures",
]
