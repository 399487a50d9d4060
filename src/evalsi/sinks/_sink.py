"""What every results sink takes: a stored run's header, its results as flat rows in batches,
its summary at the end; and what it gives back, a receipt.

A sink is fed by ``runs.export_run``, which streams a stored run from the store, so a sink
never holds a run in memory and the store stays the one source of truth: sending a run again
(``evalsi export RUN``) gives the same remote state, never a duplicate — every sink finds its
remote objects again by the evalsi run id (an MLflow tag, a W&B run id, fixed S3 keys, a
webhook delivery id).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from evalsi.core import EvaluationResult, Outcome

RESULT_COLUMNS = (
    "run_id",
    "record_id",
    "trial",
    "evaluator",
    "metric",
    "outcome",
    "value",
    "label",
    "explanation",
)


@dataclass(frozen=True, slots=True)
class RunHeader:
    """The run a sink receives: who it is and what it ran."""

    run_id: str
    name: str
    kind: str  # score | run | watch
    status: str
    project: str
    created_at: float
    finished_at: float | None
    dataset_version: str
    labels: Mapping[str, str] = field(default_factory=dict)
    spec_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The header as the S3 summary and the webhook body carry it."""
        return {**asdict(self), "labels": dict(self.labels)}


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One score of one result (a result with several scores gives several rows; a result
    with none — skipped, errored — one row with no value)."""

    record_id: str
    trial: int
    evaluator: str
    metric: str
    outcome: str  # scored | skipped | error
    value: float | None  # a number, or 1.0 / 0.0 for pass / fail
    label: str | None
    explanation: str
    passed: bool | None = None  # the verdict, when the score is pass/fail (value 1.0 / 0.0)

    def as_list(self, run_id: str) -> list[Any]:
        """The row in ``RESULT_COLUMNS`` order."""
        return [
            run_id,
            self.record_id,
            self.trial,
            self.evaluator,
            self.metric,
            self.outcome,
            self.value,
            self.label,
            self.explanation,
        ]


_OUTCOME = {
    Outcome.SCORED: "scored",
    Outcome.SKIPPED: "skipped",
    Outcome.ERROR: "error",
    Outcome.CANCELLED: "cancelled",
}


def result_rows(result: EvaluationResult) -> list[ResultRow]:
    """A result as the rows a sink receives: one per score, or one with no value."""
    outcome = _OUTCOME.get(result.outcome, str(result.outcome.name).lower())
    if not result.scores:
        return [ResultRow(result.record_id, result.trial, result.evaluator, result.evaluator,
                          outcome, None, None, result.reason)]  # fmt: skip
    out = []
    for s in result.scores:
        value = float(s.passed) if s.passed is not None else s.number
        out.append(
            ResultRow(result.record_id, result.trial, result.evaluator, s.name or result.evaluator,
                      outcome, None if value is None else float(value), s.label, s.explanation,
                      s.passed)
        )  # fmt: skip
    return out


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a sink did: where it sent, how many rows, and the remote ids of what it made or
    updated (an MLflow run id, S3 keys, a delivery id)."""

    sink: str
    target: str
    rows: int
    remote: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TraceScore:
    """One score an online policy gave a live trace, as a trace sink receives it."""

    score_id: str  # stable: the same score sent again carries the same id (a sink dedupes on it)
    trace_id: str  # the OTel trace id, 32 hex digits
    span_id: str  # the scored (root) span's id, 16 hex digits, or ""
    project: str
    policy: str
    run_id: str  # the policy's watch run in the store
    evaluator: str
    metric: str
    outcome: str  # scored | skipped | error
    value: float | None  # a number, or 1.0 / 0.0 for pass / fail
    label: str | None
    explanation: str
    created_at: float  # seconds since the epoch
    passed: bool | None = None  # the verdict, when the score is pass/fail

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TraceSink(Protocol):
    """One destination of an online policy's scores: each score attached to the remote
    tool's own record of the same trace. ``send`` is called from a worker thread with
    batches in order; it may raise (the batch is retried later, so it must be idempotent on
    ``score_id``); ``close`` once, last."""

    kind: str
    target: str

    def send(self, scores: Sequence[TraceScore]) -> Receipt: ...

    def close(self) -> None: ...


class Sink(Protocol):
    """One destination. ``begin`` once, ``write`` any number of batches, then ``finish`` with
    the run's summary (the stored JSON form: ``metrics``, ``gates``, ...); ``close`` always,
    last (it removes what the sink staged locally)."""

    kind: str
    target: str

    def begin(self, run: RunHeader) -> None: ...

    def write(self, rows: Sequence[ResultRow]) -> None: ...

    def finish(self, summary: Mapping[str, Any]) -> Receipt: ...

    def close(self) -> None: ...


def metric_key(metric: Mapping[str, Any]) -> str:
    """``evaluator/metric``, or the evaluator alone when the two are the same name."""
    evaluator, name = str(metric.get("evaluator", "")), str(metric.get("metric", ""))
    return evaluator if name in ("", evaluator) else f"{evaluator}/{name}"


def gate_lines(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each gate's (expression, verdict)."""
    return [
        (
            str(g.get("expr", "")),
            str(g.get("verdict") or ("passed" if g.get("passed") else "failed")),
        )
        for g in summary.get("gates", ()) or ()
    ]


__all__ = [
    "RESULT_COLUMNS",
    "Receipt",
    "ResultRow",
    "RunHeader",
    "Sink",
    "TraceScore",
    "TraceSink",
    "gate_lines",
    "metric_key",
    "result_rows",
]
