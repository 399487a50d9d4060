"""Server answers as the embedded API's result types. A remote result has no local store, so
its ``results`` come from the response (Evaluate) or from ``ListRunResults`` pages (runs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev_pb
from evalsi.core import EvaluationResult, Outcome
from evalsi.runs import RunResult, ScoreResult, isolation_of_results
from evalsi.wire import result_from_proto, summary_from_proto, warnings_from_proto

ResultPages = Callable[[str], Iterator[EvaluationResult]]
"""Every stored result of a run, by run id (``ListRunResults`` page after page)."""


@dataclass(repr=False)
class RemoteScoreResult(ScoreResult):
    """A ``ScoreResult`` computed by a server; ``results`` needs no local store."""

    fetched: list[EvaluationResult] | None = field(default=None, compare=False)
    pages: ResultPages | None = field(default=None, compare=False)

    @property
    def has_results(self) -> bool:
        return self.fetched is not None or self.pages is not None

    def iter_results(self, *, outcome: Outcome | None = None) -> Any:
        return _iter(self.run_id, self.fetched, self.pages, outcome)


@dataclass(repr=False)
class RemoteRunResult(RunResult):
    """A ``RunResult`` kept by a server; ``results`` reads its pages from the server."""

    pages: ResultPages | None = field(default=None, compare=False)

    @property
    def has_results(self) -> bool:
        # A dry run's plan has no run to read results of.
        return self.pages is not None and self.plan is None and bool(self.run_id)

    def iter_results(self, *, outcome: Outcome | None = None) -> Any:
        return _iter(self.run_id, None, self.pages, outcome)


def _iter(
    run_id: str,
    fetched: list[EvaluationResult] | None,
    pages: ResultPages | None,
    outcome: Outcome | None,
) -> Iterator[EvaluationResult]:
    if fetched is not None:
        source: Iterable[EvaluationResult] = fetched
    elif pages is not None:
        source = pages(run_id)
    else:
        raise RuntimeError("this result is not attached to a server")
    for result in source:
        if outcome is None or result.outcome == outcome:
            yield result


def ordered_results(
    messages: Iterable[Any], ids: Sequence[str], evaluators: Sequence[str]
) -> list[EvaluationResult]:
    """Results in record order, then evaluator order, as the embedded store returns them (the
    server promises no order across evaluators).

    An id that several records share (a warning, not an error) is placed by occurrence: the
    n-th result of one evaluator and trial under that id belongs to the n-th record holding it,
    as the server grades each evaluator's records in the order they were sent.
    """
    results = [result_from_proto(m) for m in messages]
    positions: dict[str, list[int]] = {}
    for i, rid in enumerate(ids):
        positions.setdefault(rid, []).append(i)
    rank = {name: i for i, name in enumerate(evaluators)}
    far = len(ids) + len(evaluators)
    seen: dict[tuple[str, str, int], int] = {}
    keys: list[tuple[int, int, int]] = []
    for r in results:
        at = positions.get(r.record_id)
        nth = seen.get((r.record_id, r.evaluator, r.trial), 0)
        seen[(r.record_id, r.evaluator, r.trial)] = nth + 1
        position = at[min(nth, len(at) - 1)] if at else far
        keys.append((position, rank.get(r.evaluator, far), r.trial))
    order = sorted(range(len(results)), key=keys.__getitem__)
    return [results[i] for i in order]


def score_result(
    response: ev_pb.EvaluateResponse,
    *,
    source: str,
    local_version: str | None,
    bad_records: int,
    bad_examples: list[tuple[int, str]],
    evaluators: list[dict[str, Any]],
    results: list[EvaluationResult],
    gates: list[dict[str, Any]],
    pages: ResultPages | None,
    warnings: Sequence[dict[str, Any]] = (),
) -> RemoteScoreResult:
    return RemoteScoreResult(
        run_id=str(response.run_id),
        status=str(response.status or "done"),
        records=int(response.records),
        metrics=[summary_from_proto(m) for m in response.metrics],
        dataset_source=source,
        dataset_version=str(response.dataset_version) or local_version,
        bad_records=bad_records,
        bad_examples=bad_examples,
        evaluators=evaluators,
        gates=gates,
        fetched=results,
        pages=pages,
        dataset_results=[r for r in results if not r.record_id],
        isolation=isolation_of_results(results),
        warnings=merged_warnings(warnings, warnings_from_proto(response.warnings)),
    )


def merged_warnings(
    local: Sequence[dict[str, Any]], served: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The warnings of reading the data here (named by file line, as embedded), then the
    server's of kinds reading did not report (it names records by their position in the
    request, so its repeated ids give way to the same ids named by line)."""
    seen = {w.get("kind") for w in local}
    return [*map(dict, local), *(w for w in served if w.get("kind") not in seen)]


def remote_run_result(result: RunResult, pages: ResultPages | None) -> RemoteRunResult:
    """The wire converter's ``RunResult`` with results read from the server."""
    values = {f.name: getattr(result, f.name) for f in dataclasses.fields(RunResult) if f.init}
    values["store"] = None
    return RemoteRunResult(**values, pages=pages)
