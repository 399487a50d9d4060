"""A Run's metric summaries rebuilt from the store, so a resumed run reports exactly what an
uninterrupted one would (and ``runs show`` can recompute them).

Results stream from the store in (sample, trial, evaluator) order into the ``Aggregator``
(grouped per evaluator and trial, as the runners produced them), while each sample's scored
trial values fold into ``TrialStats``. With more than one trial, intervals are clustered by
sample: the trials of one sample are correlated. Tasks lost to infrastructure or cancelled
have no results; the ``outputs`` table counts them and every metric reports those counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping, Sequence
from typing import TYPE_CHECKING

from evalsi.core import EvaluationResult, MetricSummary, OutputSpec, Record, ResultBatch
from evalsi.runs._aggregate import Aggregator
from evalsi.runs._isolation import IsolationSummary
from evalsi.runs._trials import TrialStats

if TYPE_CHECKING:
    from evalsi.store import SqlStore

SAMPLE_KEY = "__sample"
FLUSH = 2048


@dataclasses.dataclass(slots=True)
class StoredSummary:
    """The metrics of a run, per (evaluator, metric) its trial statistics, and per sandboxed
    evaluator how its results were isolated."""

    metrics: list[MetricSummary]
    trials: dict[tuple[str, str], TrialStats]
    isolation: list[IsolationSummary] = dataclasses.field(default_factory=list)

    def pass_k_samples(self) -> dict[str, dict[str, int]]:
        """Per ``evaluator/metric``: the samples pass@k averages over, and those left out."""
        return {
            f"{ev}/{metric}": {"samples": t.samples, "excluded": t.excluded}
            for (ev, metric), t in self.trials.items()
        }

    def without(self, others: Sequence[MetricSummary]) -> list[MetricSummary]:
        """These metrics less those of the evaluators ``others`` summarise (dataset scope:
        the store holds one result for the whole dataset, not one per sample)."""
        names = {m.evaluator for m in others}
        return [m for m in self.metrics if m.evaluator not in names]


def summarize_stored(
    db: SqlStore,
    run_id: str,
    evaluators: Sequence[tuple[str, str, tuple[OutputSpec, ...]]],
    *,
    trials: int,
    task_counts: Mapping[str, int],
    samples: Container[int] | None = None,
) -> StoredSummary:
    """Summaries of ``run_id`` from its stored results.

    ``evaluators`` is ``(instance name, default metric name, declared outputs)`` in run order;
    ``task_counts`` the stored output statuses (``SqlStore.output_counts``); ``samples``, when
    given, the positions (seq) of the samples to summarise (a category's), else every one.
    """
    clustered = trials > 1
    aggregator = Aggregator(
        [(name, outputs) for name, _, outputs in evaluators],
        cluster_by=SAMPLE_KEY if clustered else None,
    )
    pending: dict[tuple[int, int], tuple[list[EvaluationResult], list[Record]]] = {}
    stats: dict[tuple[int, str], TrialStats] = {}
    current: dict[tuple[int, str], list[float]] = {}
    current_seq = -1

    def flush(key: tuple[int, int]) -> None:
        results, records = pending.pop(key)
        aggregator.add(key[0], ResultBatch.of(results, evaluators[key[0]][1]), records)

    def end_sample() -> None:
        for key, values in current.items():
            stats.setdefault(key, TrialStats(trials)).add(values)
        current.clear()

    for seq, index, result in db.iter_results(run_id):
        if seq < 0:  # a dataset-scope result: its evaluator is summarised apart
            continue
        if samples is not None and seq not in samples:
            continue
        if seq != current_seq:
            end_sample()
            current_seq = seq
        key = (index, result.trial)
        entry = pending.get(key)
        if entry is None:
            entry = pending[key] = ([], [])
        entry[0].append(result)
        entry[1].append(
            Record(id=result.record_id, metadata={SAMPLE_KEY: seq}) if clustered else _NO_RECORD
        )
        if len(entry[0]) >= FLUSH:
            flush(key)
        if result.outcome.value == 1:  # SCORED
            for score in result.scores:
                number = score.number if score.passed is None else float(score.passed)
                if number is not None:
                    current.setdefault((index, score.name), []).append(float(number))
    end_sample()
    for key in list(pending):
        flush(key)

    infra = int(task_counts.get("infra_error", 0))
    cancelled = int(task_counts.get("cancelled", 0))
    metrics = aggregator.summaries()
    by_name: dict[tuple[str, str], TrialStats] = {}
    names = [name for name, _, _ in evaluators]
    for m in metrics:
        m.infra_errors += infra
        m.cancelled += cancelled
        index = names.index(m.evaluator)
        found = stats.get((index, m.metric))
        if trials > 1 and found is not None:
            by_name[(m.evaluator, m.metric)] = found
            m.trial_variance = found.trial_variance
            if m.kind == "passed":
                m.pass_at_k = found.pass_at_k()
                m.pass_hat_k = found.pass_hat_k()
    return StoredSummary(metrics, by_name, aggregator.isolation())


_NO_RECORD = Record(id="")
