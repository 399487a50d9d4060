"""Dataset scope at the end of a run: reduce each evaluator, then bootstrap its interval.

A corpus metric (ROC-AUC, corpus BLEU, R²…) has no closed-form interval, so every
dataset-scope metric gets a percentile bootstrap by default. Two paths:

- **weighted** (fast): an evaluator with ``prepare(values)`` and ``reduce_weighted(prepared,
  weights)`` converts its values to arrays once; a resample is then just a vector of
  multinomial counts, so each replicate costs one vectorised reduction.
- **re-reduce** (any evaluator): each replicate builds the resampled list and calls ``reduce``.

Replicates are capped by a work budget so a million-record dataset still finishes in seconds;
the count used is a function of n only (deterministic for a seed). BCa would need a jackknife
of n more reductions, so dataset scope always uses the percentile method and says so.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter

import numpy as np

from evalsi.core import EvaluationResult, Interval, MetricSummary, Record, ResultBatch
from evalsi.evaluators import BoundEvaluator, DatasetRunner, RecordRunner
from evalsi.runs._aggregate import Aggregator, cluster_key
from evalsi.stats import degenerate

RESAMPLES = 1000
"""Replicates for small and medium datasets."""
MIN_RESAMPLES = 100
"""Never fewer, however large the dataset."""
WEIGHTED_BUDGET = 100_000_000
"""Values visited in total on the weighted path (replicates x n)."""
REREDUCE_BUDGET = 20_000_000
"""Values copied in total on the re-reduce path, which is ~10x slower per value."""


def resample_count(n: int, *, weighted: bool, cap: int | None = None) -> int:
    """How many replicates a dataset of ``n`` values gets (1000, fewer past the budget, at
    most ``cap``: an evaluator whose replicate is costly declares ``max_resamples``)."""
    budget = WEIGHTED_BUDGET if weighted else REREDUCE_BUDGET
    count = max(MIN_RESAMPLES, min(RESAMPLES, budget // max(n, 1)))
    return count if cap is None else max(1, min(count, cap))


def dataset_bootstrap(
    runner: DatasetRunner, *, seed: int, level: float = 0.95
) -> dict[str, Interval]:
    """Percentile intervals per metric of one dataset-scope evaluator after ``feed``.

    A replicate the metric cannot reduce (e.g. one class only for ROC-AUC) is dropped; a metric
    with fewer than half its replicates left gets no interval rather than a misleading one, and
    a metric whose replicates all agree gets both bounds None (never a zero-width interval).
    """
    n = runner.mapped
    if n == 0:
        return {}
    rng = np.random.default_rng(seed)
    # --cluster-by: resample whole clusters (records of one cluster are not independent)
    clustered = runner.cluster_key is not None and len(runner.clusters) == n
    if clustered:
        index: dict[Hashable, int] = {}
        ids = np.fromiter((index.setdefault(c, len(index)) for c in runner.clusters), np.intp, n)
        groups = len(index)
    weighted = runner.weighted
    cap = getattr(runner.bound.instance, "max_resamples", None)
    count = resample_count(n, weighted=weighted, cap=cap if isinstance(cap, int) else None)
    draws: dict[str, list[float]] = {}
    if weighted:
        reduce = runner.weighted_reducer()
    else:  # a plain list; the values of an evaluator that maps whole batches, expanded once
        mapped = runner.values
        values = mapped if isinstance(mapped, list) else list(mapped)
    for _ in range(count):  # a replicate is how often each value is drawn
        if clustered:
            drawn = np.bincount(rng.integers(0, groups, groups), minlength=groups)[ids]
        else:
            drawn = np.bincount(rng.integers(0, n, n), minlength=n)
        if weighted:
            scores = reduce(drawn.astype(np.float64))
        else:
            picks = np.repeat(np.arange(n), drawn)
            scores = runner.reduce([values[i] for i in picks.tolist()])
        if isinstance(scores, str):
            continue
        for score in scores:
            value = score.number if score.number is not None else score.passed
            if value is not None and math.isfinite(float(value)):
                draws.setdefault(score.name, []).append(float(value))
    alpha = (1 - level) / 2
    out = {}
    for name, got in draws.items():
        if len(got) < count / 2:
            continue
        method = "cluster-bootstrap-percentile" if clustered else "bootstrap-percentile"
        replicates = np.asarray(got)
        if degenerate(replicates):
            # Every replicate reduced to the same value (a perfect classifier's accuracy):
            # resampling says nothing about spread, and [v, v] would claim certainty.
            out[name] = Interval(None, None, method, level)
            continue
        lo, hi = np.quantile(replicates, [alpha, 1 - alpha])
        out[name] = Interval(float(lo), float(hi), method, level)
    return out


@dataclass(slots=True)
class DatasetScope:
    """What reducing the dataset-scope evaluators produced: rows to store (at position -1),
    the results themselves and each evaluator's intervals by runner index."""

    rows: list[tuple[int, int, ResultBatch]] = field(default_factory=list)
    results: list[EvaluationResult] = field(default_factory=list)
    intervals: dict[int, dict[str, Interval]] = field(default_factory=dict)


def cluster_dataset_runners(
    runners: Sequence[RecordRunner | DatasetRunner], cluster_by: str | None
) -> None:
    """Have each dataset-scope runner note its records' clusters, for a cluster bootstrap."""
    if cluster_by is None:
        return
    for runner in runners:
        if isinstance(runner, DatasetRunner):
            runner.cluster_key = partial(cluster_key, key=cluster_by)


def finish_dataset_scope(
    runners: Sequence[RecordRunner | DatasetRunner], aggregator: Aggregator, *, seed: int
) -> DatasetScope:
    """Reduce every dataset-scope runner, add it to ``aggregator`` and bootstrap its CI."""
    out = DatasetScope()
    for index, runner in enumerate(runners):
        if not isinstance(runner, DatasetRunner):
            continue
        result = runner.finish()
        aggregator.add_dataset(
            index, result, mapped=runner.mapped, skipped=runner.skipped, errors=runner.errors
        )
        out.rows.append((index, -1, ResultBatch.of([result], runner.bound.manifest.ref.name)))
        out.results.append(result)
        if result.scores:
            out.intervals[index] = dataset_bootstrap(runner, seed=seed)
    return out


FEED_BATCH = 2048


def dataset_scope_of_outputs(
    runners: Sequence[RecordRunner | DatasetRunner],
    bound: Sequence[BoundEvaluator],
    answered: Iterable[Record],
    *,
    trials: int,
    seed: int,
) -> tuple[list[MetricSummary], DatasetScope]:
    """The dataset-scope evaluators of a Run (or a grade of one) over its answered samples.

    ``answered`` is every sample x trial the target answered, with its output; a corpus metric
    is computed over all of them. With trials, the trials of one sample are not independent:
    the bootstrap resamples whole samples. Returns the metric summaries of the dataset-scope
    evaluators only (record-scope ones come from the store) and what to store.
    """
    feeding = [r for r in runners if isinstance(r, DatasetRunner)]
    if not feeding:
        return [], DatasetScope()
    if trials > 1:
        for runner in feeding:
            runner.cluster_key = attrgetter("id")  # the sample: its trials are not independent
    samples = iter(answered)
    while batch := list(itertools.islice(samples, FEED_BATCH)):
        for runner in feeding:
            runner.feed(batch)
    aggregator = Aggregator([(b.name, b.manifest.outputs) for b in bound], cluster_by=None)
    reduced = finish_dataset_scope(runners, aggregator, seed=seed)
    names = {r.name for r in feeding}
    summaries = aggregator.summaries(seed=seed, dataset_intervals=reduced.intervals)
    return [m for m in summaries if m.evaluator in names], reduced


def in_run_order(
    bound: Sequence[BoundEvaluator], *groups: Sequence[MetricSummary]
) -> list[MetricSummary]:
    """Summaries from several sources (the store, the dataset phase) in evaluator order."""
    order = {b.name: i for i, b in enumerate(bound)}
    merged = [m for group in groups for m in group]
    return sorted(merged, key=lambda m: order.get(m.evaluator, len(order)))  # stable in a group
