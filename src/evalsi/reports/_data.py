"""What a report shows, gathered from the store in one streaming pass over a run's results.

Memory stays bounded whatever the run's size: pass/fail metrics are counts, numeric metrics
keep a fixed-size uniform sample for their histogram (and exact min/max), slices keep running
moments per (metric, value), failures stop at the requested number.
"""

from __future__ import annotations

import math
import random
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from evalsi.core import (
    EvaluationResult,
    Interval,
    IsolationReport,
    MetricSummary,
    Outcome,
    Record,
    UserError,
)
from evalsi.reports._join import RecordJoin, content_text, dataset_source, slice_value
from evalsi.runs import (
    IsolationSummary,
    ReportedIsolation,
    compare_runs,
    isolation_from_dicts,
    isolation_report,
    scores_isolation,
    summaries_from_dicts,
    uncalibrated_gates,
    weakest,
)
from evalsi.stats import t_interval_from_moments, wilson
from evalsi.store import RunInfo, SqlStore

SAMPLE_SIZE: Final = 100_000
"""Values of a numeric metric kept for its histogram (a uniform sample beyond that)."""

MAX_SLICES: Final = 50
"""Slice values shown per metric (the largest); the rest are pooled into one row."""

MAX_TRACKED_SLICES: Final = 1000
"""Distinct slice values tracked; later ones are pooled from the start."""

MAX_TEXT: Final = 600
"""Characters of an input, output or reference shown for a failure."""

MAX_DETAIL: Final = 300
"""Characters of a score explanation or error reason shown for a failure."""

OTHER: Final = "(other values)"

Kind = Literal["passed", "number"]
_Key = tuple[str, str]  # (evaluator instance name, metric name)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


@dataclass(slots=True)
class Running:
    """n, mean and squared deviations of a stream, one value at a time (Welford)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    total: float = 0.0  # exact for 0/1 values: a pass rate is successes / n

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def merge(self, other: Running) -> None:
        n = self.n + other.n
        if not other.n:
            return
        delta = other.mean - self.mean
        self.m2 += other.m2 + delta * delta * self.n * other.n / n
        self.mean += delta * other.n / n
        self.total += other.total
        self.n = n

    def interval(self, kind: Kind) -> Interval:
        """Wilson for pass rates, Student t for means: every number shown has its interval."""
        if kind == "passed":
            return wilson(round(self.total), self.n)
        if self.n < 2:
            return Interval(None, None, "t")
        std = math.sqrt(max(self.m2, 0.0) / (self.n - 1))
        return t_interval_from_moments(self.n, self.total / self.n, std)


@dataclass(slots=True)
class Distribution:
    """The values of one metric over the run's records."""

    evaluator: str
    metric: str
    kind: Kind
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    seen: int = 0
    low: float | None = None
    high: float | None = None
    sample: array[float] = field(default_factory=lambda: array("d"))

    @property
    def sampled(self) -> bool:
        return self.seen > len(self.sample)

    def quantiles(self) -> dict[str, float]:
        """min, quartiles, max (the quartiles from the sample when the run is larger)."""
        if not self.sample or self.low is None or self.high is None:
            return {}
        import numpy as np

        q1, q2, q3 = np.percentile(np.frombuffer(self.sample, dtype=np.float64), [25, 50, 75])
        return {
            "min": self.low,
            "p25": float(q1),
            "median": float(q2),
            "p75": float(q3),
            "max": self.high,
        }


@dataclass(frozen=True, slots=True)
class SliceRow:
    value: str
    n: int
    mean: float | None
    ci: Interval


@dataclass(slots=True)
class SliceTable:
    """One metric split by the values of a metadata key."""

    evaluator: str
    metric: str
    kind: Kind
    rows: list[SliceRow]


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a record is listed as a failure: a failed pass/fail score, or an evaluator error."""

    evaluator: str
    metric: str
    outcome: Literal["failed", "error"]
    detail: str
    trial: int = 0


@dataclass(slots=True)
class Failure:
    """A record that failed or errored, with its text from the dataset when it could be read."""

    seq: int
    record_id: str
    problems: list[Problem]
    input: str | None = None
    output: str | None = None
    reference: str | None = None
    isolation: IsolationReport | None = None  # the record's provenance: weakest sandbox level


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One metric of this report's run (B, the candidate) against the baseline run A
    (``--compare``/``--baseline``); Δ = B − A, the sign ``evalsi compare A B`` gives."""

    evaluator: str
    metric: str
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    n_a: int | None = None
    n_b: int | None = None
    n_paired: int | None = None
    ci: Interval | None = None
    p_value: float | None = None
    mcnemar_p: float | None = None
    verdict: str = ""


@dataclass(slots=True)
class CompareSection:
    """The comparison with the baseline run: paired statistics when available, else stored
    means. ``run`` and ``metrics`` are the baseline's (A); the report's own run is B."""

    run: RunInfo
    metrics: list[MetricSummary]
    rows: list[CompareRow]
    paired: bool
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ReportData:
    """Everything a report shows about one run."""

    run: RunInfo
    metrics: list[MetricSummary]
    gates: list[dict[str, Any]]
    dataset_source: str
    dataset_version: str | None
    distributions: list[Distribution]
    by: str | None = None
    slices: list[SliceTable] = field(default_factory=list)
    slice_values: int = 0
    slices_problem: str | None = None
    failures: list[Failure] = field(default_factory=list)
    failures_total: int = 0
    failures_limit: int = 0
    records_problem: str | None = None
    comparison: CompareSection | None = None
    gate_warnings: list[str] = field(default_factory=list)  # gates on uncalibrated judges
    isolation: list[IsolationSummary] = field(default_factory=list)  # sandboxed evaluators

    @property
    def run_warnings(self) -> list[dict[str, Any]]:
        """What the run noticed without stopping, as stored with it: bad records skipped,
        repeated ids, tasks lost to failed target calls or infrastructure."""
        found = (self.run.summary or {}).get("warnings") or []
        return [w for w in found if isinstance(w, dict)]

    @property
    def failure_causes(self) -> list[tuple[str, dict[str, Any]]]:
        """Why tasks failed, by kind: ``("infra error" | "target error", {kind, count,
        example})``, as ``evalsi runs show`` lists them."""
        summary = self.run.summary or {}
        return [
            (what, c)
            for what, key in (("infra error", "infra_error_causes"),
                              ("target error", "target_error_causes"))
            for c in summary.get(key) or []
            if isinstance(c, dict)
        ]  # fmt: skip

    @property
    def cluster_by(self) -> str | None:
        value = self.run.spec.get("cluster_by")
        return str(value) if value else None


def gather_report(
    db: SqlStore,
    run_id: str,
    *,
    by: str | None = None,
    compare: str | None = None,
    failures: int = 20,
) -> ReportData:
    """Read one run (and optionally the run to compare it with) into a ``ReportData``.

    Raises:
        UserError: An unknown run id (either one), an empty ``by`` or a negative ``failures``.
    """
    if failures < 0:
        raise UserError(f"--failures must be 0 or more, got {failures}")
    if by is not None and not by.strip():
        raise UserError("--by needs a metadata key, e.g. --by topic")
    run = db.get_run(run_id)
    other = db.get_run(compare) if compare is not None else None
    summary = run.summary or {}
    metrics = summaries_from_dicts(summary.get("metrics") or [])
    scan = _Scan(run, metrics, by, failures)
    scan.run(db)
    data = ReportData(
        run=run,
        metrics=metrics,
        gates=list(summary.get("gates") or []),
        dataset_source=dataset_source(run),
        dataset_version=(summary.get("dataset") or {}).get("version"),
        distributions=list(scan.dists.values()),
        by=by,
        failures=scan.failures,
        failures_total=scan.failures_total,
        failures_limit=failures,
        gate_warnings=uncalibrated_gates(db, run),
        isolation=isolation_from_dicts(
            summary.get("isolation", (run.manifest or {}).get("isolation"))
        ),
    )
    if by is not None:
        if scan.join is not None and scan.join.ok:
            data.slices = scan.slice_tables()
            data.slice_values = len(scan.tracked) + scan.untracked
        else:
            data.slices_problem = scan.join.problem if scan.join is not None else None
    if scan.failures and scan.record_join is not None and not scan.record_join.ok:
        data.records_problem = scan.record_join.problem
        for f in scan.failures:
            f.input = f.output = f.reference = None
    if other is not None:
        data.comparison = compare_section(db, run, other, metrics)
    return data


class _Scan:
    """One pass over the results (and, for ``by``, the dataset beside them)."""

    def __init__(self, run: RunInfo, metrics: list[MetricSummary], by: str | None, limit: int):
        self.run_info = run
        self.by = by
        self.limit = limit
        self.summaries = {(m.evaluator, m.metric): m for m in metrics}
        self.dists: dict[_Key, Distribution] = {}
        for m in metrics:  # the stored order first; metrics only in the results follow
            if m.kind in ("passed", "number"):
                self._dist((m.evaluator, m.metric), m.kind)
        self.slices: defaultdict[_Key, defaultdict[str, Running]] = defaultdict(
            lambda: defaultdict(Running)
        )
        self.tracked: dict[str, None] = {}
        self.untracked = 0
        self.failures: list[Failure] = []
        self.failures_total = 0
        self._last_failed = -1
        self._rng = random.Random(0)
        self.join: RecordJoin | None = RecordJoin(run) if by is not None else None
        self.record_join: RecordJoin | None = self.join
        self._dataset_scope: set[str] = set()
        self._iso_seq = -1  # the record whose sandbox isolation is being folded
        self._iso: ReportedIsolation | None = None

    def _dist(self, key: _Key, kind: Kind) -> Distribution:
        dist = self.dists.get(key)
        if dist is None:
            stored = self.summaries.get(key)
            dist = self.dists[key] = Distribution(key[0], key[1], kind)
            if stored is not None:
                dist.skipped, dist.errors = stored.skipped, stored.errors
        return dist

    def run(self, db: SqlStore) -> None:
        join, by = self.join, self.by
        for seq, _index, result in db.iter_results(self.run_info.id):
            if seq < 0:  # a dataset-scope result: one value for the run, no per-record values
                self._dataset_scope.add(result.evaluator)
                continue
            group: str | None = None
            record: Record | None = None
            if join is not None and by is not None:
                record = join.at(seq, result.record_id)
                if record is not None:
                    group = self._group(slice_value(record, by))
            if seq != self._iso_seq:
                self._end_record()
                self._iso_seq = seq
            if result.outcome == Outcome.SCORED:
                self._add_scores(result, group)
                found = scores_isolation(result.scores)
                if found is not None:
                    self._iso = weakest(self._iso, found)
            failure = self._check_failure(seq, result)
            if failure is not None and record is not None:
                _attach(failure, record)
        self._end_record()
        self.dists = {
            k: d for k, d in self.dists.items() if d.seen and k[0] not in self._dataset_scope
        }
        if join is not None:
            join.finish()
        elif self.failures:
            self.record_join = RecordJoin(self.run_info)
        self._fill_failures()

    def _end_record(self) -> None:
        """The record's results are all read: a listed failure gets its provenance isolation
        (the weakest level across every evaluator and trial of that record)."""
        if self._iso is not None and self.failures and self.failures[-1].seq == self._iso_seq:
            self.failures[-1].isolation = isolation_report(self._iso)
        self._iso = None

    def _group(self, value: str) -> str:
        if value in self.tracked:
            return value
        if len(self.tracked) < MAX_TRACKED_SLICES:
            self.tracked[value] = None
            return value
        self.untracked += 1
        return OTHER

    def _add_scores(self, result: EvaluationResult, group: str | None) -> None:
        for score in result.scores:
            kind: Kind
            if score.passed is not None:
                value, kind = (1.0 if score.passed else 0.0), "passed"
            elif score.number is not None:
                value, kind = float(score.number), "number"
            else:
                continue
            key = (result.evaluator, score.name)
            dist = self._dist(key, kind)
            if dist.kind == "passed" and kind == "number":
                dist.kind = "number"  # mixed bool/number under one name: a number, as stored
            self._add_value(dist, value, score.passed)
            if group is not None:
                self.slices[key][group].add(value)

    def _add_value(self, dist: Distribution, value: float, passed: bool | None) -> None:
        if passed is True:
            dist.passed += 1
        elif passed is False:
            dist.failed += 1
        dist.seen += 1
        dist.low = value if dist.low is None else min(dist.low, value)
        dist.high = value if dist.high is None else max(dist.high, value)
        sample = dist.sample
        if len(sample) < SAMPLE_SIZE:
            sample.append(value)
        else:
            j = self._rng.randrange(dist.seen)
            if j < SAMPLE_SIZE:
                sample[j] = value

    def _check_failure(self, seq: int, result: EvaluationResult) -> Failure | None:
        """Note a failed or errored result; returns the failure when it starts a new one."""
        problems: list[Problem] = []
        if result.outcome == Outcome.ERROR:
            detail = truncate(result.reason or "error", MAX_DETAIL)
            problems.append(Problem(result.evaluator, "", "error", detail, result.trial))
        elif result.outcome == Outcome.SCORED:
            for score in result.scores:
                if score.passed is False:
                    detail = truncate(score.explanation, MAX_DETAIL) if score.explanation else ""
                    metric = "" if score.name == result.evaluator else score.name
                    problems.append(
                        Problem(result.evaluator, metric, "failed", detail, result.trial)
                    )
        if not problems:
            return None
        started: Failure | None = None
        if seq != self._last_failed:
            self._last_failed = seq
            self.failures_total += 1
            if len(self.failures) >= self.limit:
                return None
            started = Failure(seq, result.record_id, [])
            self.failures.append(started)
        elif self.failures_total > len(self.failures):
            return None  # a record past the limit
        self.failures[-1].problems.extend(problems)
        return started

    def _fill_failures(self) -> None:
        """Without ``by`` the dataset was not read beside the results: read it now, once."""
        join = self.record_join
        if join is None or join is self.join:
            return
        for failure in self.failures:
            record = join.at(failure.seq, failure.record_id)
            if record is None:
                break
            _attach(failure, record)
        join.finish()

    def slice_tables(self) -> list[SliceTable]:
        tables: list[SliceTable] = []
        for key, dist in self.dists.items():
            per = self.slices.get(key)
            if not per:
                continue
            ordered = sorted(per.items(), key=lambda kv: (-kv[1].n, kv[0]))
            shown, rest = ordered[:MAX_SLICES], ordered[MAX_SLICES:]
            if rest:
                pooled = Running()
                for _value, running in rest:
                    pooled.merge(running)
                shown = [(v, r) for v, r in shown if v != OTHER]
                shown.append((OTHER, pooled))
            rows = [
                SliceRow(value, r.n, r.total / r.n if r.n else None, r.interval(dist.kind))
                for value, r in shown
            ]
            tables.append(SliceTable(key[0], key[1], dist.kind, rows))
        return tables


def _attach(failure: Failure, record: Record) -> None:
    for name in ("input", "output", "reference"):
        text = content_text(record, name)
        setattr(failure, name, None if text is None else truncate(text, MAX_TEXT))


def compare_section(
    db: SqlStore, run: RunInfo, other: RunInfo, metrics: list[MetricSummary]
) -> CompareSection:
    """The report's run (B) against the baseline ``other`` (A), paired: exactly
    ``evalsi compare OTHER RUN``, so both commands give Δ = B − A the same sign and value.

    When the runs have no metric in common to pair, the section falls back to the stored means
    side by side and says why.
    """
    baseline = summaries_from_dicts((other.summary or {}).get("metrics") or [])
    try:
        result = compare_runs(db, other.id, run.id)
    except UserError as e:
        return _simple_compare(run, other, metrics, baseline, e.message)
    rows = [
        CompareRow(
            evaluator=m.evaluator,
            metric=m.metric,
            mean_a=m.mean_a,
            mean_b=m.mean_b,
            delta=m.delta,
            n_a=m.n_a,
            n_b=m.n_b,
            n_paired=m.n_paired,
            ci=m.ci,
            p_value=m.p_value,
            mcnemar_p=None if m.mcnemar is None else m.mcnemar.p_value,
            verdict=m.verdict,
        )
        for m in result.metrics
    ]
    return CompareSection(other, baseline, rows, True, list(result.warnings), result.notes())


def _simple_compare(
    run: RunInfo,
    other: RunInfo,
    metrics: list[MetricSummary],
    baseline: list[MetricSummary],
    why: str,
) -> CompareSection:
    """Stored means side by side: A the baseline ``other``, B the report's run."""
    by_key = {(m.evaluator, m.metric): m for m in baseline}
    rows: list[CompareRow] = []
    for b in metrics:
        a = by_key.pop((b.evaluator, b.metric), None)
        mean_a = None if a is None else a.mean
        delta = None if b.mean is None or mean_a is None else b.mean - mean_a
        n_a = None if a is None else a.n
        rows.append(CompareRow(b.evaluator, b.metric, mean_a, b.mean, delta, n_a, b.n))
    rows += [
        CompareRow(a.evaluator, a.metric, a.mean, None, None, a.n, None) for a in by_key.values()
    ]
    warnings = [why] if why else []
    notes = ["Δ is the difference of the stored means, not a paired comparison"]
    if stored_versions_differ(run, other):
        warnings.append("the runs graded different dataset versions")
    return CompareSection(other, baseline, rows, False, warnings, notes)


def stored_versions_differ(a: RunInfo, b: RunInfo) -> bool:
    va = ((a.summary or {}).get("dataset") or {}).get("version")
    vb = ((b.summary or {}).get("dataset") or {}).get("version")
    return bool(va != vb)
