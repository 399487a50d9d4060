"""Promotion from a run: its failing tasks become dataset rows, regression cases with provenance.

A row is the sample as the dataset holds it (input, reference, context, metadata) plus the
behaviour the run recorded for it (``output``, ``trajectory``, ``usage``), in the shape
``open_dataset`` reads back, so ``evalsi eval --data rows.jsonl`` grades that behaviour again
and ``evalsi shadow`` replays the inputs against a candidate. ``metadata.promoted`` says where
the row came from and why (``Provenance``).

Row ids are the sample's id for trial 0 and ``<sample id>#<trial>`` for a later trial: stable
(promoting the same run twice gives the same ids, so a dataset that dedups by id takes each
case once) and unique within a run. A task is *failing* when an evaluator's verdict on it did
not pass or errored (``first_failures``, the same reading as ``runs show --failures``). Reads
stream: the run's outputs and results in task order, the dataset batch by batch, and the scan
stops at ``limit`` rows.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from evalsi.core import EvaluationResult, Record, UserError
from evalsi.datasets import record_to_row
from evalsi.runs._failing import FailingRecord, first_failures
from evalsi.runs._grade import source_dataset
from evalsi.runs._outputs import join_outputs, rebuild
from evalsi.runs._run_row import StoreLike, open_store
from evalsi.store import SqlStore

PROVENANCE_FORMAT: Final = 1
"""Version of ``metadata.promoted``; a reader keeps reading rows of an older one."""

PROMOTED_KEY: Final = "promoted"
MAX_PROMOTE: Final = 100_000
"""Rows one promotion writes at most: a bound, not a sample (use ``limit`` for fewer)."""

UNGRADED: Final = ("infra_error", "cancelled")
"""Statuses of tasks that say nothing about the agent (never graded): never promoted."""

Trials = Literal["all", "first"]


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a promoted row came from and why (``metadata.promoted``).

    ``reasons`` are the failures that flagged it: ``{evaluator, metric, outcome, detail}`` for
    a run's verdicts and a trace's online scores, ``{feedback, value, label, comment}`` for a
    negative feedback.
    """

    source: Literal["run", "trace"]
    sample_id: str
    at: str
    run_id: str = ""
    trace_id: str = ""
    trial: int = 0
    reasons: tuple[dict[str, Any], ...] = ()
    format: int = PROVENANCE_FORMAT

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": self.format, "from": self.source}
        if self.run_id:
            out["run_id"] = self.run_id
        if self.trace_id:
            out["trace_id"] = self.trace_id
        out.update(
            sample_id=self.sample_id, trial=self.trial, reasons=list(self.reasons), at=self.at
        )
        return out


@dataclass(slots=True)
class PromoteStats:
    """What a promotion read and wrote."""

    rows: int = 0
    seen: int = 0  # tasks (or traces) looked at
    skipped_duplicates: int = 0
    ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "seen": self.seen, "skipped_duplicates": self.skipped_duplicates}


def iso_now(clock: Callable[[], float] = time.time) -> str:
    """The promotion time as ISO 8601 UTC, to the second."""
    return datetime.fromtimestamp(clock(), UTC).replace(microsecond=0).isoformat()


def row_id(sample_id: str, trial: int) -> str:
    """A promoted row's id: the sample's id, with ``#<trial>`` for a trial after the first."""
    return sample_id if trial == 0 else f"{sample_id}#{trial}"


def promoted_row(record: Record, row_id_: str, provenance: Provenance) -> dict[str, Any]:
    """``record`` (with its recorded behaviour) as a dataset row with ``metadata.promoted``."""
    row = record_to_row(dataclasses.replace(record, id=row_id_))
    row["metadata"] = {**record.metadata, PROMOTED_KEY: provenance.to_dict()}
    return wire_safe(row)


def wire_safe(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its trajectory's step times (``*_unix_nano``) as decimal strings, as
    proto3 JSON writes an int64: a time in ns is past 2**53, which no JSON number on the wire
    (a dataset row is a ``Struct``) holds exactly. ``open_dataset`` reads either form."""
    trajectory = row.get("trajectory")
    if isinstance(trajectory, list):  # a trace's record: the steps as a list
        return {**row, "trajectory": _safe_steps(trajectory)}
    if isinstance(trajectory, dict) and isinstance(trajectory.get("steps"), list):
        return {**row, "trajectory": {**trajectory, "steps": _safe_steps(trajectory["steps"])}}
    return row


def _safe_steps(steps: list[Any]) -> list[Any]:
    return [
        {k: str(v) if k.endswith("_unix_nano") and type(v) is int else v for k, v in s.items()}
        if isinstance(s, dict)
        else s
        for s in steps
    ]


def reason_of(failure: FailingRecord) -> dict[str, Any]:
    return {
        "evaluator": failure.evaluator,
        "metric": failure.metric,
        "outcome": failure.outcome,
        "detail": failure.reason,
    }


def failures_of(
    results: Sequence[EvaluationResult], evaluators: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Why these results flag their task: each failed or errored metric (only ``evaluators``'
    when given), as provenance reasons."""
    chosen = [r for r in results if not evaluators or r.evaluator in evaluators]
    return [reason_of(f) for f in first_failures(chosen, MAX_PROMOTE)]


def promote_run(
    store: StoreLike,
    run_id: str,
    *,
    failing_only: bool = True,
    evaluators: Sequence[str] | None = None,
    trials: Trials = "all",
    limit: int | None = None,
    stats: PromoteStats | None = None,
    clock: Callable[[], float] = time.time,
) -> Iterator[dict[str, Any]]:
    """The rows promoted from run ``run_id``, lazily, in task order.

    Args:
        store: the store holding the run.
        run_id: a Run (``evalsi run``, ``grade``, ``replay``): it stored its target's outputs.
        failing_only: only tasks whose verdict failed or errored (default); else every graded
            task (its reasons, if any, still recorded).
        evaluators: only these evaluators' verdicts decide failing (default: every evaluator).
        trials: ``"all"`` promotes every (failing) trial; ``"first"`` the first of each sample.
        limit: at most this many rows (default and ceiling ``MAX_PROMOTE``).
        stats: filled in as rows are produced (rows, tasks seen, duplicate ids skipped).
        clock: for ``promoted.at``.

    Raises:
        UserError: not a Run with stored outputs, an evaluator the run does not have, a bad
            limit, or the run's dataset changed since it ran.
    """
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be 1 or more, got {limit}")
    cap = min(limit or MAX_PROMOTE, MAX_PROMOTE)
    db = open_store(store, create=False)
    info = db.get_run(run_id)
    if info.kind not in ("run", "grade", "replay"):
        raise UserError(
            f"run {info.id} is a {info.kind} run; promotion reads a Run's stored outputs "
            "(evalsi run, grade or replay)",
            hint="a Score run's data file already holds its outputs: grade it as it is",
        )
    names = [str(e.get("name") or e.get("ref")) for e in info.evaluators]
    unknown = sorted(set(evaluators or ()) - set(names))
    if unknown:
        raise UserError(
            f"--evaluator {', '.join(unknown)}: run {info.id} has no such evaluator",
            hint=f"its evaluators: {', '.join(names) or 'none'}",
        )
    dataset, ds_limit = source_dataset(info)
    stats = stats if stats is not None else PromoteStats()
    at = iso_now(clock)
    seen_ids: set[str] = set()
    seen_samples: set[str] = set()
    results = _results_by_task(db, info.id)
    try:
        for _seq, record, rows in join_outputs(dataset, db.iter_outputs(info.id), ds_limit):
            for out in rows:
                verdicts = results(out.seq, out.trial)
                if out.status in UNGRADED:
                    continue
                stats.seen += 1
                if trials == "first" and out.record_id in seen_samples:
                    continue
                reasons = failures_of(verdicts, evaluators)
                if failing_only and not reasons:
                    continue
                seen_samples.add(out.record_id)
                rid = record.id if trials == "first" else row_id(record.id, out.trial)
                if rid in seen_ids:  # the dataset repeats a sample id
                    stats.skipped_duplicates += 1
                    continue
                seen_ids.add(rid)
                provenance = Provenance(
                    "run",
                    record.id,
                    at,
                    run_id=info.id,
                    trial=out.trial,
                    reasons=tuple(reasons),
                )
                stats.rows += 1
                stats.ids.append(rid)
                yield promoted_row(rebuild(record, out), rid, provenance)
                if stats.rows >= cap:
                    return
    finally:
        results.close()


class _TaskResults:
    """The run's results grouped by task, read in step with its outputs (both in task order)."""

    def __init__(self, stream: Iterator[tuple[int, int, EvaluationResult]]) -> None:
        graded = (((seq, r.trial), r) for seq, _, r in stream if seq >= 0)
        self._stream = stream
        self._groups = itertools.groupby(graded, key=lambda kr: kr[0])
        self._pending = next(self._groups, None)

    def __call__(self, seq: int, trial: int) -> list[EvaluationResult]:
        key = (seq, trial)
        while self._pending is not None and self._pending[0] < key:
            self._pending = next(self._groups, None)
        if self._pending is None or self._pending[0] != key:
            return []
        found = [r for _, r in self._pending[1]]
        self._pending = next(self._groups, None)
        return found

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


def _results_by_task(db: SqlStore, run_id: str) -> _TaskResults:
    return _TaskResults(db.iter_results(run_id))


__all__ = [
    "MAX_PROMOTE",
    "PROMOTED_KEY",
    "PROVENANCE_FORMAT",
    "PromoteStats",
    "Provenance",
    "failures_of",
    "iso_now",
    "promote_run",
    "promoted_row",
    "row_id",
    "wire_safe",
]
