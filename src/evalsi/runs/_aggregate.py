"""Streaming aggregation: result batches in, one MetricSummary per (evaluator, metric) out.

Only SCORED values enter a metric; SKIPPED, ERROR and CANCELLED are counted beside it. Each
metric folds its values into running moments (and per-cluster sums when clustering), so memory
stays flat however many records stream by. Values themselves are kept only when a bootstrap
interval is requested, since resampling needs them.
"""

from __future__ import annotations

import difflib
from array import array
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.core import (
    INFRA_PREFIX,
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
    UserError,
)
from evalsi.runs._isolation import IsolationSummary, IsolationTally
from evalsi.stats import Moments

_KIND_NAMES: dict[int, ScoreKind] = {1: "number", 2: "passed", 3: "label", 4: "structured"}


@dataclass(slots=True)
class _Metric:
    kind: ScoreKind
    moments: Moments = field(default_factory=Moments)
    values: array[float] | None = None  # kept only for bootstrap intervals
    labels: Counter[str] = field(default_factory=Counter)
    higher_is_better: bool | None = None
    range: tuple[float, float] | None = None  # declared bounds: intervals never leave them
    structured: bool = False  # a dataset-scope structure (a confusion matrix): no mean

    def add(self, values: list[float], clusters: list[Hashable] | None) -> None:
        self.moments.add(values, clusters)
        if self.values is not None:
            self.values.extend(values)


@dataclass(slots=True)
class _Evaluator:
    name: str
    outputs: tuple[OutputSpec, ...]
    counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])  # by Outcome value
    metrics: dict[str, _Metric] = field(default_factory=dict)
    dataset_n: int | None = None  # records a dataset-scope value summarises
    infra: int = 0  # results lost to infrastructure (counted apart from errors, never in n)
    isolation: IsolationTally = field(default_factory=IsolationTally)  # sandboxed results


class Aggregator:
    """Collects a run's results, evaluator by evaluator, and summarises them at the end."""

    def __init__(
        self,
        evaluators: Sequence[tuple[str, tuple[OutputSpec, ...]]],
        *,
        cluster_by: str | None,
        keep_values: bool = False,
    ) -> None:
        self._evaluators = [_Evaluator(name, outputs) for name, outputs in evaluators]
        self.cluster_by = cluster_by
        self.keep_values = keep_values
        for ev in self._evaluators:
            for spec in ev.outputs:
                if spec.type in ("passed", "number", "label"):
                    ev.metrics[spec.name] = self._metric(
                        spec.type, spec.higher_is_better, spec.range
                    )

    def _metric(
        self,
        kind: ScoreKind,
        higher_is_better: bool | None = None,
        bounds: tuple[float, float] | None = None,
    ) -> _Metric:
        values = array("d") if self.keep_values else None
        return _Metric(kind, values=values, higher_is_better=higher_is_better, range=bounds)

    def _clusters(self, records: Sequence[Record], indexes: list[int]) -> list[Hashable] | None:
        if self.cluster_by is None:
            return None
        return [cluster_key(records[i], self.cluster_by) for i in indexes]

    def add(self, index: int, batch: ResultBatch, records: Sequence[Record]) -> None:
        """Add one evaluator's results for a batch (``batch[i]`` belongs to ``records[i]``)."""
        ev = self._evaluators[index]
        counts, metrics = ev.counts, ev.metrics
        outcome, kind, value, scores = batch.outcome, batch.kind, batch.value, batch.scores
        n = len(outcome)
        scored = outcome.count(1)
        counts[1] += scored
        if scored < n:
            counts[2] += outcome.count(2)
            counts[4] += outcome.count(4)
            errors = outcome.count(3)
            if errors:
                infra = sum(
                    1
                    for o, t in zip(outcome, batch.text, strict=True)
                    if o == 3 and t is not None and t.startswith(INFRA_PREFIX)
                )
                counts[3] += errors - infra
                ev.infra += infra
        if scored == n and scores.count(None) == n and LABEL not in kind:
            # Fast path: every record scored one plain value (most batches of most runs).
            metric = metrics.get(batch.metric)
            if metric is None:
                metric = metrics[batch.metric] = self._metric(_KIND_NAMES[kind[0] or NUMBER])
            metric.add(value, self._clusters(records, list(range(n))))  # type: ignore[arg-type]
            if metric.kind == "passed" and NUMBER in kind:
                metric.kind = "number"
            return
        simple = [
            i for i, (o, s) in enumerate(zip(outcome, scores, strict=True)) if o == 1 and s is None
        ]
        if simple:
            # The common case, one unnamed score per record: straight into the default metric.
            metric = metrics.get(batch.metric)
            if metric is None:
                metric = metrics[batch.metric] = self._metric(_KIND_NAMES[kind[simple[0]] or LABEL])
            numeric = [i for i in simple if kind[i] != LABEL]
            if numeric:
                metric.add([value[i] for i in numeric], self._clusters(records, numeric))  # type: ignore[misc]
                if metric.kind == "passed" and any(kind[i] == NUMBER for i in numeric):
                    metric.kind = "number"  # mixed bool/number under one name: a number
            if len(numeric) < len(simple):
                text = batch.text
                metric.labels.update(text[i] for i in simple if kind[i] == LABEL)  # type: ignore[misc]
        for i, full in enumerate(scores):
            if full is not None and outcome[i] == 1:
                for score in full:
                    self._add_score(metrics, score, records[i])
                # A score with metadata (an isolation report) is always kept in full, so the
                # fast path above never skips one.
                ev.isolation.add(full)

    def _add_score(self, metrics: dict[str, _Metric], score: Score, record: Record) -> None:
        metric = metrics.get(score.name)
        if metric is None:
            metric = metrics[score.name] = self._metric(score.kind)
        if score.label is not None:
            metric.labels[score.label] += 1
            return
        if score.passed is not None:
            number = 1.0 if score.passed else 0.0
        elif score.number is not None:
            number = float(score.number)
            if metric.kind == "passed":
                metric.kind = "number"
        else:
            return
        metric.add([number], self._clusters([record], [0]))

    def add_dataset(
        self, index: int, result: EvaluationResult, *, mapped: int, skipped: int, errors: int
    ) -> None:
        """Add a dataset-scope evaluator's result; the counts are per record, as elsewhere.

        ``mapped`` records went into the reduce (all ERROR if the reduce failed), ``skipped``
        lacked a required field or raised Skip, ``errors`` raised in ``map``.
        """
        ev = self._evaluators[index]
        ev.dataset_n = mapped
        reduced = result.outcome is Outcome.SCORED
        ev.counts[1] += mapped if reduced else 0
        ev.counts[2] += skipped
        ev.counts[3] += errors + (0 if reduced else mapped)
        if reduced:
            ev.isolation.add(result.scores)
            for score in result.scores:
                metric = ev.metrics.get(score.name) or ev.metrics.setdefault(
                    score.name, self._metric(score.kind)
                )
                if score.label is not None:
                    metric.labels[score.label] += 1
                elif score.number is not None:
                    metric.moments.add([float(score.number)])
                elif score.passed is not None:
                    metric.moments.add([1.0 if score.passed else 0.0])
                elif score.structured is not None:
                    metric.structured = True

    def isolation(self) -> list[IsolationSummary]:
        """Per evaluator that ran anything sandboxed: how its scored results were isolated."""
        out: list[IsolationSummary] = []
        for ev in self._evaluators:
            scored = 1 if ev.dataset_n is not None else ev.counts[1]  # one reduce per dataset
            found = ev.isolation.summary(ev.name, scored)
            if found is not None:
                out.append(found)
        return out

    def summaries(
        self,
        *,
        bootstrap: Literal["percentile", "bca"] | None = None,
        seed: int = 0,
        dataset_intervals: dict[int, dict[str, Interval]] | None = None,
    ) -> list[MetricSummary]:
        """One summary per metric, in evaluator order then metric declaration order."""
        from evalsi.stats import bootstrap_interval, with_wilson

        out: list[MetricSummary] = []
        for index, ev in enumerate(self._evaluators):
            counts = ev.counts
            metrics = ev.metrics or {ev.name: self._metric("passed")}
            main = next(iter(metrics))
            for name, metric in metrics.items():
                moments = metric.moments
                # A declared output this configuration never emits (llm-judge-passed without
                # a pass_threshold). With nothing scored there is no telling which it emits:
                # the main metric alone carries the counts, as a run that scored shows them.
                never = not moments.n and not metric.labels and len(metrics) > 1
                if never and (counts[1] or name != main):
                    continue
                summary: dict[str, Any] = {
                    "evaluator": ev.name,
                    "metric": name,
                    "kind": metric.kind,
                    "mean": None,
                    "std": None,
                    "ci": Interval(None, None, "none"),
                    "scored": counts[1],
                    "skipped": counts[2],
                    "errors": counts[3],
                    "cancelled": counts[4],
                    "infra_errors": ev.infra,
                    "higher_is_better": metric.higher_is_better,
                }
                if ev.dataset_n is not None:
                    found = (dataset_intervals or {}).get(index, {}).get(name)
                    summary.update(
                        n=ev.dataset_n if moments.n or metric.structured else 0,
                        mean=moments.mean if moments.n else None,
                        ci=found or summary["ci"],
                        labels=dict(metric.labels),
                    )
                elif metric.kind == "label" or (not moments.n and metric.labels):
                    n = sum(metric.labels.values())
                    summary.update(kind="label", n=n, labels=dict(metric.labels))
                else:
                    kind: Literal["passed", "number"] = (
                        "passed" if metric.kind == "passed" else "number"
                    )
                    folded = moments.summary(kind, clustered=self.cluster_by is not None)
                    interval = folded.interval
                    if bootstrap is not None and metric.values is not None:
                        interval = bootstrap_interval(metric.values, method=bootstrap, seed=seed)
                        if kind == "passed":  # never narrower than Wilson (the boundary rule)
                            interval = with_wilson(
                                interval, round(moments.mean * moments.n), moments.n
                            )
                    summary.update(
                        n=folded.n,
                        mean=folded.mean,
                        std=folded.std,
                        ci=_clip(interval, metric.range),
                        clusters=folded.clusters,
                    )
                out.append(MetricSummary(**summary))
        return out


def _clip(interval: Interval, bounds: tuple[float, float] | None) -> Interval:
    """Keep an interval inside the metric's declared range (a t interval can overshoot)."""
    if bounds is None or interval.low is None or interval.high is None:
        return interval
    low, high = bounds
    return Interval(
        min(max(interval.low, low), high),
        max(min(interval.high, high), low),
        interval.method,
        interval.level,
    )


def cluster_key(record: Record, key: str) -> Hashable:
    """A record's cluster under ``--cluster-by key``: ``metadata[key]``, else the record alone."""
    value = record.metadata.get(key)
    if value is None:
        return ("\0record", record.id)  # no key: the record is its own cluster
    return value if isinstance(value, (str, int, float, bool)) else repr(value)


class ClusterKeys:
    """Whether the records of a clustered run carry the cluster key at all.

    A mistyped key would otherwise give every record its own cluster: a clustered interval
    that looks fine and clusters nothing. Fed every record once (one pass, a counter and a few
    key names), ``check`` stops a run where no record has the key and warns when some lack it.
    """

    __slots__ = ("key", "keys", "lacking", "records")

    MAX_KEYS = 50
    """Metadata key names kept to suggest from."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.records = 0
        self.lacking = 0
        self.keys: set[str] = set()

    def add(self, records: Sequence[Record]) -> None:
        key, keys = self.key, self.keys
        self.records += len(records)
        for record in records:
            metadata = record.metadata
            if metadata.get(key) is None:
                self.lacking += 1
                if len(keys) < self.MAX_KEYS:
                    keys.update(metadata)

    def check(self) -> dict[str, Any] | None:
        """Raise if no record has the key; a warning (a dict, as dataset warnings) if some do."""
        if not self.lacking:
            return None
        if self.lacking == self.records:
            have = sorted(self.keys)
            close = difflib.get_close_matches(self.key, have, n=1)
            listed = ", ".join(repr(k) for k in have) if have else "none"
            raise UserError(
                f"cluster key {self.key!r}: no record has it in its metadata "
                f"(the records' metadata keys: {listed})",
                hint=f"did you mean {close[0]!r}?"
                if close
                else "cluster by a metadata key the records have, or leave --cluster-by out",
            )
        return {
            "kind": "cluster_key_missing",
            "message": f"{self.lacking} of {self.records} record(s) have no metadata "
            f"{self.key!r}: each counts as its own cluster",
            "count": self.lacking,
            "examples": [],
        }
