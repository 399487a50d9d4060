"""Streaming aggregation: results in, one MetricSummary per (evaluator, metric) out.

Only SCORED values enter a metric; SKIPPED, ERROR and CANCELLED are counted beside it. Values
are kept as packed doubles (8 bytes each) so that intervals that need them (clustered,
bootstrap) can be computed at the end while memory stays small.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.core import (
    LABEL,
    NUMBER,
    EvaluationResult,
    Interval,
    MetricSummary,
    Outcome,
    OutputSpec,
    Record,
    ResultBatch,
    Score,
    ScoreKind,
)

_KIND_NAMES: dict[int, ScoreKind] = {1: "number", 2: "passed", 3: "label", 4: "structured"}

_SCORED = Outcome.SCORED


@dataclass(slots=True)
class _Metric:
    kind: ScoreKind
    values: array[float] = field(default_factory=lambda: array("d"))
    clusters: list[Hashable] = field(default_factory=list)
    labels: Counter[str] = field(default_factory=Counter)
    higher_is_better: bool | None = None


@dataclass(slots=True)
class _Evaluator:
    name: str
    outputs: tuple[OutputSpec, ...]
    counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])  # by Outcome value
    metrics: dict[str, _Metric] = field(default_factory=dict)
    dataset_n: int | None = None  # records a dataset-scope value summarises


class Aggregator:
    """Collects results of a run's evaluators, in order, and summarises them."""

    def __init__(
        self, evaluators: Sequence[tuple[str, tuple[OutputSpec, ...]]], *, cluster_by: str | None
    ) -> None:
        self._evaluators = [_Evaluator(name, outputs) for name, outputs in evaluators]
        self.cluster_by = cluster_by
        for ev in self._evaluators:
            for spec in ev.outputs:
                if spec.type in ("passed", "number", "label"):
                    ev.metrics[spec.name] = _Metric(
                        spec.type, higher_is_better=spec.higher_is_better
                    )

    def add(self, index: int, batch: ResultBatch, records: Sequence[Record]) -> None:
        """Add one evaluator's results for a batch (``batch[i]`` belongs to ``records[i]``)."""
        ev = self._evaluators[index]
        counts, metrics = ev.counts, ev.metrics
        outcome, kind, value, scores = batch.outcome, batch.kind, batch.value, batch.scores
        for code in (1, 2, 3, 4):
            counts[code] += outcome.count(code)
        cluster_by = self.cluster_by
        simple = [
            i for i, (o, s) in enumerate(zip(outcome, scores, strict=True)) if o == 1 and s is None
        ]
        if simple:
            # The common case, one unnamed score per record: straight into the default metric.
            metric = metrics.get(batch.metric)
            if metric is None:
                first_kind = kind[simple[0]]
                metric = metrics[batch.metric] = _Metric(_KIND_NAMES[first_kind or LABEL])
            numeric = [i for i in simple if kind[i] != LABEL]
            if numeric:
                metric.values.extend([value[i] for i in numeric])  # type: ignore[misc]
                if metric.kind == "passed" and any(kind[i] == NUMBER for i in numeric):
                    metric.kind = "number"  # mixed bool/number under one name: a number
                if cluster_by is not None:
                    metric.clusters.extend(_cluster_key(records[i], cluster_by) for i in numeric)
            if len(numeric) < len(simple):
                label = batch.label
                metric.labels.update(label[i] for i in simple if kind[i] == LABEL)  # type: ignore[misc]
        for i, full in enumerate(scores):
            if full is None or outcome[i] != 1:
                continue
            for score in full:
                self._add_score(metrics, score, records[i] if cluster_by is not None else None)

    def _add_score(self, metrics: dict[str, _Metric], score: Score, record: Record | None) -> None:
        metric = metrics.get(score.name)
        if metric is None:
            metric = metrics[score.name] = _Metric(score.kind)
        if score.passed is not None:
            metric.values.append(1.0 if score.passed else 0.0)
        elif score.number is not None:
            metric.values.append(score.number)
            if metric.kind == "passed":
                metric.kind = "number"
        elif score.label is not None:
            metric.labels[score.label] += 1
            return
        else:
            return
        if record is not None and self.cluster_by is not None:
            metric.clusters.append(_cluster_key(record, self.cluster_by))

    def add_dataset(self, index: int, result: EvaluationResult, n_records: int) -> None:
        """Add a dataset-scope evaluator's single result."""
        ev = self._evaluators[index]
        ev.dataset_n = n_records
        ev.counts[result.outcome] += 1
        if result.outcome is _SCORED:
            for score in result.scores:
                metric = ev.metrics.get(score.name) or ev.metrics.setdefault(
                    score.name, _Metric(score.kind)
                )
                if score.label is not None:
                    metric.labels[score.label] += 1
                elif score.number is not None:
                    metric.values.append(float(score.number))
                elif score.passed is not None:
                    metric.values.append(1.0 if score.passed else 0.0)

    def summaries(
        self,
        *,
        bootstrap: Literal["percentile", "bca"] | None = None,
        seed: int = 0,
        dataset_intervals: dict[int, dict[str, Interval]] | None = None,
    ) -> list[MetricSummary]:
        """One summary per metric, in evaluator order then metric declaration order."""
        from evalsi.stats import summarize  # numpy/scipy only when a run ends

        out: list[MetricSummary] = []
        for index, ev in enumerate(self._evaluators):
            scored, skipped, errors, cancelled = (
                ev.counts[1],
                ev.counts[2],
                ev.counts[3],
                ev.counts[4],
            )
            metrics = ev.metrics or {ev.name: _Metric("passed")}
            for name, metric in metrics.items():
                if scored and not metric.values and not metric.labels and len(metrics) > 1:
                    continue  # a declared output this configuration never emits
                base: dict[str, Any] = {
                    "evaluator": ev.name,
                    "metric": name,
                    "kind": metric.kind,
                    "scored": scored,
                    "skipped": skipped,
                    "errors": errors,
                    "cancelled": cancelled,
                    "higher_is_better": metric.higher_is_better,
                }
                if ev.dataset_n is not None:
                    value = metric.values[0] if metric.values else None
                    interval = (dataset_intervals or {}).get(index, {}).get(name) or Interval(
                        None, None, "none"
                    )
                    out.append(
                        MetricSummary(
                            n=ev.dataset_n if value is not None else 0,
                            mean=value,
                            std=None,
                            ci=interval,
                            labels=dict(metric.labels),
                            **base,
                        )
                    )
                    continue
                if metric.kind == "label" or (not metric.values and metric.labels):
                    n = sum(metric.labels.values())
                    out.append(
                        MetricSummary(
                            n=n,
                            mean=None,
                            std=None,
                            ci=Interval(None, None, "none"),
                            labels=dict(metric.labels),
                            **base,
                        )
                    )
                    continue
                summary = summarize(
                    metric.values,
                    kind="passed" if metric.kind == "passed" else "number",
                    clusters=metric.clusters if self.cluster_by is not None else None,
                    bootstrap=bootstrap,
                    seed=seed,
                )
                out.append(
                    MetricSummary(
                        n=summary.n,
                        mean=summary.mean,
                        std=summary.std,
                        ci=summary.interval,
                        clusters=summary.clusters,
                        **base,
                    )
                )
        return out


def _cluster_key(record: Record, key: str) -> Hashable:
    value = record.metadata.get(key)
    if value is None:
        return ("\0record", record.id)  # no key: the record is its own cluster
    return value if isinstance(value, (str, int, float, bool)) else repr(value)
