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
from collections.abc import Callable, Sequence
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
    gone: bool = False  # superseded (a feedback step graded the trace again): not counted
    key: tuple[str, str] | None = None  # (trace id, evaluator) when added with a key


@dataclass(slots=True)
class _Series:
    """One metric's entries in time order, with running totals of them, so a summary costs
    the same at 10 entries and at 100,000 (alerts read it after every trace)."""

    evaluator: str
    metric: str
    entries: deque[_Entry] = field(default_factory=deque)
    outcomes: Counter[int] = field(default_factory=Counter)
    kinds: Counter[int] = field(default_factory=Counter)  # of the scored entries
    # kind -> [sum, sum of squares] of the values as exact integers (value * 2**1074): adding
    # and taking out entries for hours leaves no rounding behind
    sums: dict[int, list[int]] = field(default_factory=dict)
    labels: Counter[str] = field(default_factory=Counter)
    live: int = 0  # entries not gone

    def push(self, entry: _Entry) -> None:
        self.entries.append(entry)
        self._count(entry, 1)

    def pop(self) -> _Entry:
        entry = self.entries.popleft()
        if not entry.gone:
            self._count(entry, -1)
        return entry

    def retire(self, entry: _Entry) -> None:
        if not entry.gone:
            entry.gone = True
            self._count(entry, -1)

    def _count(self, e: _Entry, sign: int) -> None:
        self.live += sign
        self.outcomes[e.outcome] += sign
        if e.outcome != _SCORED or e.kind is None:
            return
        self.kinds[e.kind] += sign
        if e.kind == LABEL:
            if e.label is not None:
                self.labels[e.label] += sign
        elif e.value is not None:
            exact = _exact(e.value)
            totals = self.sums.setdefault(e.kind, [0, 0])
            totals[0] += sign * exact
            totals[1] += sign * exact * exact


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
        # (key, evaluator) -> its entries (and their series) a later ``add(..., key=)``
        # supersedes, whichever metrics they are under
        self._keyed: dict[tuple[str, str], list[tuple[_Entry, _Series]]] = {}
        # (evaluator, metric) -> a dataset-scope step's latest reduction of its corpus
        self._corpus: dict[tuple[str, str], MetricSummary] = {}

    def declare(self, evaluator: str, own_metric: str) -> None:
        """Name an instance's own metric: what ``mean('instance')`` reads."""
        self._own[evaluator] = own_metric

    # -- writing --------------------------------------------------------------------------------
    def set_corpus(self, evaluator: str, summaries: Sequence[MetricSummary]) -> None:
        """A dataset-scope step's metrics over the window's traces (``_corpus``), replacing
        what it reduced before (none when its corpus emptied)."""
        for key in [k for k in self._corpus if k[0] == evaluator]:
            del self._corpus[key]
        for m in summaries:
            self._corpus[(evaluator, m.metric)] = m

    def add_trace(self) -> None:
        """Count one graded trace (``n`` in alerts)."""
        now = self.clock()
        self._traces.append(now)
        if len(self._traces) > self.max_entries:
            self._traces.popleft()
        self._prune(now)

    def add(self, batch: ResultBatch, i: int = 0, *, key: str | None = None) -> None:
        """Entry ``i`` of ``batch``: every score it holds, or its skip/error outcome. With
        ``key`` (a trace id), what the same evaluator added earlier under that key and is
        still in the window no longer counts, under whichever metrics: a step graded again
        replaces its results rather than adding to them."""
        now = self.clock()
        evaluator = batch.evaluator
        tag = None if key is None else (key, evaluator)
        if tag is not None:
            for entry, series in self._keyed.pop(tag, ()):
                series.retire(entry)
        outcome = batch.outcome[i]
        if outcome == _ERROR and (batch.text[i] or "").startswith(INFRA_PREFIX):
            outcome = _INFRA
        if outcome != _SCORED:
            self._put(evaluator, batch.metric, _Entry(now, outcome, None, None, None, key=tag))
        else:
            for score in batch.score_list(i):
                kind, value, label = _columns(score)
                entry = _Entry(now, outcome, kind, value, label, key=tag)
                self._put(evaluator, score.name or batch.metric, entry)
        self._prune(now)

    def _put(self, evaluator: str, metric: str, entry: _Entry) -> None:
        series = self._series.get((evaluator, metric))
        if series is None:
            series = self._series[(evaluator, metric)] = _Series(evaluator, metric)
        if entry.key is not None:
            self._keyed.setdefault(entry.key, []).append((entry, series))
        series.push(entry)
        if len(series.entries) > self.max_entries:
            self._forget(series.pop())
            self.dropped += 1

    def _forget(self, entry: _Entry) -> None:
        """An entry leaving the window: out of its key's list (a few entries long)."""
        if entry.key is None:
            return
        kept = [(e, s) for e, s in self._keyed.get(entry.key, ()) if e is not entry]
        if kept:
            self._keyed[entry.key] = kept
        else:
            self._keyed.pop(entry.key, None)

    def _prune(self, now: float) -> None:
        horizon = now - self.seconds
        while self._traces and self._traces[0] < horizon:
            self._traces.popleft()
        for series in self._series.values():
            entries = series.entries
            while entries and entries[0].at < horizon:
                self._forget(series.pop())

    # -- reading --------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Traces graded in the window."""
        self._prune(self.clock())
        return len(self._traces)

    def summaries(self) -> list[MetricSummary]:
        """One summary per (evaluator, metric) with anything in the window."""
        self._prune(self.clock())
        out = {k: _summarize(s) for k, s in self._series.items() if s.live}
        out.update(self._corpus)
        return [out[k] for k in sorted(out)]

    def find(self, name: str, metric: str | None = None) -> MetricSummary | None:
        """The summary ``mean('name')`` reads: ``name`` is an instance (its own metric, or its
        only one), ``instance/metric``, or an instance with ``metric`` given apart."""
        self._prune(self.clock())
        known = self._series.keys() | self._corpus.keys() if self._corpus else self._series.keys()
        evaluator = name
        if metric is None and (evaluator, self._own.get(evaluator, "")) not in known:
            head, sep, tail = name.partition("/")
            if sep and any(k[0] == head for k in known):
                evaluator, metric = head, tail
        if metric is None:
            metric = self._own.get(evaluator)
            if metric is None or (evaluator, metric) not in known:
                mine = [k for k in known if k[0] == evaluator]
                metric = mine[0][1] if len(mine) == 1 else metric
        key = (evaluator, metric or "")
        if key in self._corpus:
            return self._corpus[key]
        series = self._series.get(key)
        if series is None or not series.live:
            return None
        return _summarize(series)

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


_SCALE = 1074  # 2**-1074 is the smallest double: every finite double times 2**1074 is an int


def _exact(value: float) -> int:
    numerator, denominator = value.as_integer_ratio()  # the denominator is a power of two
    return numerator << (_SCALE - denominator.bit_length() + 1)


def _summarize(series: _Series) -> MetricSummary:
    """The summary of a series from its running totals (the kind most scores have wins)."""
    kinds = +series.kinds  # the counts above zero
    kind_code = kinds.most_common(1)[0][0] if kinds else NUMBER
    kind = _KIND_NAMES.get(kind_code, "number")
    n = kinds.get(kind_code, 0) if kind != "label" else sum((+series.labels).values())
    mean: float | None = None
    std: float | None = None
    ci = Interval(None, None, "wilson" if kind == "passed" else "t")
    total, squares = series.sums.get(kind_code, (0, 0))
    if kind in ("passed", "number") and n:
        mean = total / (n << _SCALE)  # int / int: correctly rounded
        if n > 1:  # (n * sum of squares - sum**2) / (n (n - 1)), exact until the division
            std = math.sqrt((n * squares - total * total) / ((n * (n - 1)) << (2 * _SCALE)))
        if kind == "passed":
            ci = wilson(total >> _SCALE, n)  # the values are 1.0 and 0.0: a count
        else:
            ci = t_interval_from_moments(n, mean, std if std is not None else 0.0)
    if kind == "label":
        ci = Interval(None, None, "none")
    outcomes = series.outcomes
    return MetricSummary(
        evaluator=series.evaluator,
        metric=series.metric,
        kind=kind,  # type: ignore[arg-type]
        n=n,
        mean=mean,
        std=std,
        ci=ci,
        scored=outcomes.get(_SCORED, 0),
        skipped=outcomes.get(_SKIPPED, 0),
        errors=outcomes.get(_ERROR, 0),
        infra_errors=outcomes.get(_INFRA, 0),
        labels=dict(+series.labels),
    )
