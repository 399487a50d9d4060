"""Promotion from production traces: flagged traces become dataset rows with provenance.

A trace is *flagged* when an online policy's verdict on it failed or errored (its stored
``watch`` results, read as ``runs show --failures`` reads a run's) or when it got negative
feedback (a thumbs down, a negative score). The row is the trace's record (what the policy
graded: input, output, trajectory, usage) with ``metadata.promoted`` (``runs.Provenance``,
``from: trace``); its id is the trace id, so promoting the same traces again adds nothing to a
dataset that dedups by id.

Traces are read a page at a time (newest first), their scores and feedback one query per page,
and the scan stops at ``limit`` rows or ``max_scanned`` traces: never the whole store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from evalsi.core import EvaluationResult, Feedback, UserError
from evalsi.policies._sampling import result_key
from evalsi.runs import (
    PROMOTED_KEY,
    PromoteStats,
    Provenance,
    failures_of,
    iso_now,
    wire_safe,
)
from evalsi.store import SqlStore, TraceStore, trace_scores

PAGE: Final = 200
MAX_SCANNED: Final = 100_000
"""Traces one promotion looks at, at most (newest first)."""

RecordOf = Callable[[str, str], dict[str, Any] | None]
"""``(project, trace id)`` -> the trace's record as a dataset row (``traces.record_row`` of the
stored trace), None when its spans are gone."""


@dataclass(frozen=True, slots=True)
class TraceSelector:
    """Which traces to promote: flagged by failing online scores and/or negative feedback (both
    False: every trace), started in ``[since_ns, until_ns)``, of ``service`` when given."""

    failing: bool = True
    negative_feedback: bool = False
    evaluators: tuple[str, ...] = ()
    since_ns: int | None = None
    until_ns: int | None = None
    service: str | None = None
    limit: int = 100

    def check(self) -> None:
        if self.limit < 1:
            raise UserError(f"limit: must be 1 or more, got {self.limit}")


def feedback_reasons(feedback: Sequence[Feedback]) -> list[dict[str, Any]]:
    """The negative feedback on a trace as provenance reasons."""
    return [
        {"feedback": f.name, "value": f.value, "label": f.label, "comment": f.comment}
        for f in feedback
        if f.negative
    ]


def promote_traces(
    store: SqlStore,
    traces: TraceStore,
    project: str,
    selector: TraceSelector,
    *,
    record_of: RecordOf,
    stats: PromoteStats | None = None,
    max_scanned: int = MAX_SCANNED,
    clock: Callable[[], float] = time.time,
) -> Iterator[dict[str, Any]]:
    """The rows promoted from the project's flagged traces, newest first, lazily.

    ``store`` holds the policies' results, ``traces`` the spans and feedback (the server's
    trace store; the same database by default); ``record_of`` rebuilds a trace's record.
    """
    selector.check()
    stats = stats if stats is not None else PromoteStats()
    at = iso_now(clock)
    flagged_only = selector.failing or selector.negative_feedback
    token = ""
    while stats.seen < max_scanned:
        page, token = traces.list_traces(
            project,
            service=selector.service,
            since_ns=selector.since_ns,
            until_ns=selector.until_ns,
            limit=min(PAGE, max_scanned - stats.seen),
            page_token=token,
        )
        ids = [t.trace_id for t in page]
        scores = (
            trace_scores(store, project, {t: result_key(t) for t in ids})
            if selector.failing
            else {}
        )
        feedback = traces.feedback_for_traces(project, ids) if selector.negative_feedback else {}
        for trace_id in ids:
            stats.seen += 1
            results: list[EvaluationResult] = [s.result for s in scores.get(trace_id, [])]
            reasons = failures_of(results, selector.evaluators or None)
            reasons += feedback_reasons(feedback.get(trace_id, []))
            if flagged_only and not reasons:
                continue
            row = record_of(project, trace_id)
            if row is None:  # its spans expired: nothing left to replay
                continue
            provenance = Provenance(
                "trace", trace_id, at, trace_id=trace_id, reasons=tuple(reasons)
            )
            metadata = {**(row.get("metadata") or {}), PROMOTED_KEY: provenance.to_dict()}
            stats.rows += 1
            stats.ids.append(trace_id)
            yield wire_safe({**row, "id": trace_id, "metadata": metadata})
            if stats.rows >= selector.limit:
                return
        if not token:
            return


__all__ = ["MAX_SCANNED", "RecordOf", "TraceSelector", "feedback_reasons", "promote_traces"]
