"""A policy's sliding window: every result of the last ``window`` seconds, per metric.

Alerts read it (``mean('judge') < 0.7``) and stats report it as metric summaries with the
same statistics as offline runs: n, mean, a 95% interval (Wilson for pass/fail, Student t for
numbers, from ``evalsi.stats``) and the scored/skipped/errors counts. Entries older than the
window are dropped on every write and read; ``max_entries`` bounds memory per metric under a
burst (the oldest go first, and ``dropped`` says how many).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalsi.core import (
    INFRA_PREFIX,
    LABEL,
    NUMBER,
    PASSED,
    Interval,
    MetricSummary,
    Outcome,
    ResultBatch,
)
from evalsi.stats import t_interval_from_moments, wilson

DEFAULT_MAX_ENTRIES = 100_000
_SCORED, _SKIPPED, _ERROR = int(Outcome.SCORED), int(Outcome.SKIPPED), int(Outcome.ERROR)
_INFRA = -1  # an ERROR lost to infrastructure: counted apart, as offline (never in n)
_KIND_NAMES = {NUMBER: "number", PASSED: "passed", LABEL: "label"}


@dataclass(slots=True)
class _Entry:
    at: float
    outcome: int
    kind: int | None
    value: float | None
    label: str | None


@dataclass(slots=True)
class _Series:
    evaluator: str
    metric: str
    entries: deque[_Entry] = field(default_factory=deque)


class Window:
    """Results of the last ``seconds``, by (evaluator instance, metric)."""

    def __init__(
        self,
        seconds: float,
        *,
        clock: Callable[[], float],
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        self.seconds = seconds
        self.clock = clock
        self.max_entries = max_entries
        self.dropped = 0
        self._series: dict[tuple[str, str], _Series] = {}
        self._traces: deque[float] = deque()
        self._own: dict[str, str] = {}

    def declare(self, evaluator: str, own_metric: str) -> None:
        """Name an instance's own metric: what ``mean('instance')`` reads."""
        self._own[evaluator] = own_metric

    # -- writing --------------------------------------------------------------------------------
    def add_trace(self) -> None:
        """Count one graded trace (``n`` in alerts)."""
        now = self.clock()
        self._traces.append(now)
        if len(self._traces) > self.max_entries:
            self._traces.popleft()
        self._prune(now)

    def add(self, batch: ResultBatch, i: int = 0) -> None:
        """Entry ``i`` of ``batch``: every score it holds, or its skip/error outcome."""
        now = self.clock()
        outcome = batch.outcome[i]
        if outcome == _ERROR and (batch.text[i] or "").startswith(INFRA_PREFIX):
            outcome = _INFRA
        if outcome != _SCORED:
            self._put(now, batch.evaluator, batch.metric, _Entry(now, outcome, None, None, None))
        else:
            for score in batch.score_list(i):
                kind, value, label = _columns(score)
                entry = _Entry(now, outcome, kind, value, label)
                self._put(now, batch.evaluator, score.name or batch.metric, entry)
        self._prune(now)

    def _put(self, now: float, evaluator: str, metric: str, entry: _Entry) -> None:
        series = self._series.get((evaluator, metric))
        if series is None:
            series = self._series[(evaluator, metric)] = _Series(evaluator, metric)
        series.entries.append(entry)
        if len(series.entries) > self.max_entries:
            series.entries.popleft()
            self.dropped += 1

    def _prune(self, now: float) -> None:
        horizon = now - self.seconds
        while self._traces and self._traces[0] < horizon:
            self._traces.popleft()
        for series in self._series.values():
            entries = series.entries
            while entries and entries[0].at < horizon:
                entries.popleft()

    # -- reading --------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Traces graded in the window."""
        self._prune(self.clock())
        return len(self._traces)

    def summaries(self) -> list[MetricSummary]:
        """One summary per (evaluator, metric) with anything in the window."""
        self._prune(self.clock())
        out = []
        for (evaluator, metric), series in sorted(self._series.items()):
            if series.entries:
                out.append(_summarize(evaluator, metric, series.entries))
        return out

    def find(self, name: str, metric: str | None = None) -> MetricSummary | None:
        """The summary ``mean('name')`` reads: ``name`` is an instance (its own metric, or its
        only one), ``instance/metric``, or an instance with ``metric`` given apart."""
        self._prune(self.clock())
        evaluator = name
        if metric is None and (evaluator, self._own.get(evaluator, "")) not in self._series:
            head, sep, tail = name.partition("/")
            if sep and any(k[0] == head for k in self._series):
                evaluator, metric = head, tail
        if metric is None:
            metric = self._own.get(evaluator)
            if metric is None or (evaluator, metric) not in self._series:
                mine = [k for k in self._series if k[0] == evaluator]
                metric = mine[0][1] if len(mine) == 1 else metric
        series = self._series.get((evaluator, metric or ""))
        if series is None or not series.entries:
            return None
        return _summarize(evaluator, metric or "", series.entries)

    def functions(self) -> dict[str, Callable[..., Any]]:
        """``mean``, ``rate`` and ``count`` for an alert's CEL; undefined values are None (a
        comparison with them fails, and the alert is not judged true)."""

        def summary(args: tuple[Any, ...]) -> MetricSummary | None:
            name = str(args[0]) if args else ""
            metric = str(args[1]) if len(args) > 1 else None
            return self.find(name, metric)

        def mean(*args: Any) -> float | None:
            m = summary(args)
            return m.mean if m is not None and m.n else None

        def rate(*args: Any) -> float | None:
            m = summary(args)
            return m.mean if m is not None and m.n and m.kind == "passed" else None

        def count(*args: Any) -> int:
            m = summary(args)
            return m.n if m is not None else 0

        return {"mean": mean, "rate": rate, "count": count}


def _columns(score: Any) -> tuple[int | None, float | None, str | None]:
    if score.passed is not None:
        return PASSED, 1.0 if score.passed else 0.0, None
    if score.number is not None:
        return NUMBER, float(score.number), None
    if score.label is not None:
        return LABEL, None, str(score.label)
    return None, None, None


def _summarize(evaluator: str, metric: str, entries: deque[_Entry]) -> MetricSummary:
    outcomes = Counter(e.outcome for e in entries)
    scored = [e for e in entries if e.outcome == _SCORED]
    kinds = Counter(e.kind for e in scored if e.kind is not None)
    kind_code = kinds.most_common(1)[0][0] if kinds else NUMBER
    kind = _KIND_NAMES.get(kind_code, "number")
    values = [e.value for e in scored if e.kind == kind_code and e.value is not None]
    labels = Counter(e.label for e in scored if e.kind == LABEL and e.label is not None)
    n = len(values) if kind != "label" else sum(labels.values())
    mean: float | None = None
    std: float | None = None
    ci = Interval(None, None, "wilson" if kind == "passed" else "t")
    if kind == "passed" and values:
        successes = sum(1 for v in values if v >= 0.5)
        mean = successes / len(values)
        ci = wilson(successes, len(values))
        std = _std(values, mean)
    elif kind == "number" and values:
        mean = math.fsum(values) / len(values)
        std = _std(values, mean)
        ci = t_interval_from_moments(len(values), mean, std if std is not None else 0.0)
    elif kind == "label":
        ci = Interval(None, None, "none")
    return MetricSummary(
        evaluator=evaluator,
        metric=metric,
        kind=kind,  # type: ignore[arg-type]
        n=n,
        mean=mean,
        std=std,
        ci=ci,
        scored=len(scored),
        skipped=outcomes.get(_SKIPPED, 0),
        errors=outcomes.get(_ERROR, 0),
        infra_errors=outcomes.get(_INFRA, 0),
        labels=dict(labels),
    )


def _std(values: list[float], mean: float) -> float | None:
    if len(values) < 2:
        return None
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
