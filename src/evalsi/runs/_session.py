"""``ScoreSession``: the grading of one Score run, whoever feeds it its records.

``evalsi.evaluate`` feeds it batches read from a dataset; the server's Evaluate feeds it the
records of a request (or of each message of a stream). Either way the session grades each batch
with the record-scope evaluators, feeds the dataset-scope ones, keeps the aggregate, and at the
end (``conclude``) reduces the dataset scope and gives the summaries, the gate verdicts and the
run's stored summary and manifest. Where the records come from, how the run row is stored and
how sync evaluators are called (inline, or in a thread under a time limit) stay with the caller.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from evalsi.core import (
    DatasetPin,
    EvaluationResult,
    MetricSummary,
    Record,
    ResultBatch,
    RunManifest,
    Seeds,
    content_hash,
)
from evalsi.evaluators import BoundEvaluator, DatasetRunner, RecordRunner, Runner, use_judges
from evalsi.runs._aggregate import Aggregator, ClusterKeys
from evalsi.runs._dataset_scope import cluster_dataset_runners, finish_dataset_scope
from evalsi.runs._isolation import IsolationSummary
from evalsi.runs._judges import judges_manifest, judges_summary
from evalsi.runs._plan import runners_for
from evalsi.runs.gates import Gate, GateData, evaluate_gates

Graded = list[tuple[int, int, ResultBatch]]
"""``(evaluator index, position of the batch's first record, results)`` as the store takes them."""

SyncCall = Callable[[Callable[[], Any]], Awaitable[Any]]
"""How to run a blocking call from the session's loop (the server: in a grading thread)."""


@dataclasses.dataclass(slots=True)
class Conclusion:
    """What a finished Score run stores and answers with."""

    metrics: list[MetricSummary]
    gates: list[dict[str, Any]]
    isolation: list[IsolationSummary]
    summary: dict[str, Any]
    manifest: dict[str, Any]
    dataset_rows: Graded
    dataset_results: list[EvaluationResult]


class ScoreSession:
    """Grades batches of records for one Score run and concludes it."""

    def __init__(
        self,
        bound: Sequence[BoundEvaluator],
        *,
        spec: Mapping[str, Any],
        runners: Sequence[Runner | None] | None = None,
        cluster_by: str | None = None,
        bootstrap: Literal["percentile", "bca"] | None = None,
        seed: int = 0,
        gates: Sequence[Gate] = (),
        rates: Mapping[str, float] | None = None,
        judges: Mapping[str, Any] | None = None,
        time_limit: float | None = None,
    ) -> None:
        """``runners``: record runners to reuse (they hold no state between batches), ``None``
        where a fresh dataset-scope runner is needed; default, all made here. ``time_limit``:
        seconds a sync evaluator's call may take before its records are ERROR (none: inline,
        unlimited)."""
        self.bound = list(bound)
        self.spec = spec
        given = runners if runners is not None else runners_for(self.bound)
        self.runners: list[Runner] = [
            r if r is not None else DatasetRunner(b) for r, b in zip(given, self.bound, strict=True)
        ]
        cluster_dataset_runners(self.runners, cluster_by)
        self.bootstrap = bootstrap
        self.seed = seed
        self.gates = tuple(gates)
        self.rates = dict(rates or {})
        self.judges = dict(judges or {})
        self.time_limit = time_limit
        self.has_async = any(isinstance(r, RecordRunner) and r.is_async for r in self.runners)
        self.aggregator = Aggregator(
            [(b.name, b.manifest.outputs) for b in self.bound],
            cluster_by=cluster_by,
            keep_values=bootstrap is not None,
        )
        # --cluster-by KEY that no record has is an error, one that some lack a warning
        self.cluster_keys = ClusterKeys(cluster_by) if cluster_by is not None else None
        self.records = 0

    async def grade(self, records: Sequence[Record], *, off_loop: SyncCall | None = None) -> Graded:
        """Grade one batch: async evaluators (judges) on this loop, sync ones inline or through
        ``off_loop``; dataset-scope runners are fed."""
        graded: Graded = []
        if self.cluster_keys is not None:
            self.cluster_keys.add(records)
        with use_judges(self.judges):
            for index, runner in enumerate(self.runners):
                if isinstance(runner, DatasetRunner):
                    feed = functools.partial(runner.feed, records)
                    await off_loop(feed) if off_loop is not None else feed()
                    continue
                if runner.is_async:
                    batch = await runner.run_async(records)
                else:
                    run = functools.partial(runner.run, records, time_limit=self.time_limit)
                    batch = await off_loop(run) if off_loop is not None else run()
                self.aggregator.add(index, batch, records)
                graded.append((index, self.records, batch))
        self.records += len(records)
        return graded

    def grade_sync(self, records: Sequence[Record]) -> Graded:
        """``grade`` for sessions without async evaluators, blocking (a worker thread, or a
        loop that has nothing else to do): with nothing to await, the coroutine runs to its
        end on the first step, with no event loop."""
        step = self.grade(records)
        try:
            step.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        step.close()
        raise RuntimeError("grade_sync on a session with async evaluators")

    def conclude(
        self,
        *,
        source: str,
        version: str | None,
        warnings: Sequence[Mapping[str, Any]] = (),
        bad_records: int = 0,
        bad_examples: Sequence[Sequence[Any]] = (),
        data: GateData | None = None,
    ) -> Conclusion:
        """Reduce the dataset scope (after the last record), then the summaries, the gates, and
        the run's summary and manifest as the store keeps them (``data``: what gates read
        besides the metrics, when the run's results are stored already).

        Raises:
            UserError: ``cluster_by`` names a key no record has.
        """
        found = list(warnings)
        lacking = self.cluster_keys.check() if self.cluster_keys is not None else None
        if lacking is not None:
            found.append(lacking)
        reduced = finish_dataset_scope(self.runners, self.aggregator, seed=self.seed)
        metrics = self.aggregator.summaries(
            bootstrap=self.bootstrap, seed=self.seed, dataset_intervals=reduced.intervals
        )
        isolation = self.aggregator.isolation()
        gates = evaluate_gates(self.gates, metrics, **self.rates, isolation=isolation, data=data)
        isolation_dicts = [i.to_dict() for i in isolation]
        summary: dict[str, Any] = {
            "metrics": [m.to_dict() for m in metrics],
            "gates": gates,
            "dataset": {"source": source, "version": version},
            "bad_records": bad_records,
            "bad_examples": [list(b) for b in bad_examples],
            "isolation": isolation_dicts,
            "warnings": [dict(w) for w in found],
        }
        if self.judges:
            summary["judges"] = judges_summary(self.judges)
        manifest = RunManifest.capture(
            spec_hash=content_hash(dict(self.spec)),
            evaluators=[b.manifest_entry() for b in self.bound],
            dataset=DatasetPin(source, version, self.records),
            seeds=Seeds(self.seed),
        ).finished(
            isolation=isolation_dicts,
            judges=judges_manifest(self.judges) if self.judges else None,
        )
        return Conclusion(
            metrics, gates, isolation, summary, manifest.to_dict(), reduced.rows, reduced.results
        )
