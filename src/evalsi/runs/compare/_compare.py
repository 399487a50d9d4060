"""Compare two stored runs, paired per record: what changed, by how much, and how sure we are.

For every metric both runs hold (same evaluator instance name, same metric name), the records SCORED
in both runs are paired by record id and trial; the comparison is made on those pairs only (only
SCORED values count; a difference comes with its interval). Each run's results are streamed once:
run A's values are kept as one float per (record, metric), run B's are matched against them as they
stream by, so memory is O(records × metrics) floats and no result objects are held.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import numpy as np
import scipy.special as sc
from numpy.typing import NDArray

from evalsi.core import Interval, Outcome, UserError
from evalsi.runs._result import format_number
from evalsi.runs._run_row import StoreLike, open_store
from evalsi.runs.compare._comparison import (
    CompareKind,
    Comparison,
    MetricComparison,
    Unmatched,
    Verdict,
)
from evalsi.stats import mcnemar, newcombe_interval, paired_bootstrap
from evalsi.store import RunInfo, SqlStore

# The power the minimum detectable effect is quoted at (the usual 80%).
POWER: Final = 0.8

# A record's key: its id alone for the first occurrence of trial 0 (almost every record, and
# the cheapest key to hold), else (record id, trial, occurrence of that id in the run).
_Key = str | tuple[str, int, int]
_Metric = tuple[str, str]  # (evaluator instance name, metric name)
_Column = tuple["array[int]", "array[float]"]  # a metric's (record rows, values)


def compare_runs(
    store: StoreLike,
    run_a: str,
    run_b: str,
    *,
    metrics: Sequence[str] | None = None,
    seed: int = 0,
    level: float = 0.95,
    n_resamples: int = 2000,
) -> Comparison:
    """Compare run B against run A (the baseline), pairing records scored in both.

    Records are paired by (record id, trial); when an id repeats within a run, its k-th
    occurrence in A pairs with its k-th occurrence in B. Pairs are ordered by run A's record
    order, so a given seed always gives the same intervals. Nothing here gates: warnings
    (different dataset versions, records missing from one run, evaluator refs or params that
    differ, unfinished runs) are reported on the result, not raised.

    Args:
        store: An open ``SqlStore``, a SQLite path or URL, or None for ``.evalsi/evalsi.db``.
        run_a: The baseline run: an id, a unique id prefix, or ``latest``.
        run_b: The candidate run, written the same ways.
        metrics: Compare only these: each a metric name, an evaluator instance name, or
            ``EVALUATOR/METRIC``. None compares every metric both runs hold.
        seed: Seed of the paired bootstrap (the same for every metric).
        level: Confidence level of the intervals (``1 - alpha``).
        n_resamples: Bootstrap resamples per metric.

    Returns:
        A ``Comparison`` with one ``MetricComparison`` per common metric.

    Raises:
        UserError: A run id that names no run, no metric common to both runs, a ``metrics``
            name that matches none, or a level outside (0, 1).

    Example:
        >>> import evalsi
        >>> from evalsi.store import SqlStore
        >>> store = SqlStore.open(":memory:")
        >>> rows = [{"id": str(i), "output": "a", "reference": "a" if i % 2 else "b"}
        ...         for i in range(40)]
        >>> a = evalsi.evaluate(rows, ["exact-match"], store=store).run_id
        >>> b = evalsi.evaluate([{**r, "reference": "a"} for r in rows], ["exact-match"],
        ...                     store=store).run_id
        >>> c = compare_runs(store, a, b)
        >>> m = c.metric("exact-match")
        >>> m.n_paired, m.delta, m.verdict, (m.mcnemar.b01, m.mcnemar.b10)
        (40, 0.5, 'improved', (20, 0))
    """
    if not 0.0 < level < 1.0:
        raise UserError(f"the confidence level must be strictly between 0 and 1, got {level}")
    if n_resamples < 1:
        raise UserError(f"n_resamples must be positive, got {n_resamples}")
    owned = not isinstance(store, SqlStore)
    db = open_store(store, create=False)
    try:
        info_a, info_b = db.get_run(run_a), db.get_run(run_b)
        return _Comparer(db, info_a, info_b, metrics, seed, level, n_resamples).run()
    finally:
        if owned:
            db.close()


class _Side:
    """What one run's stream left behind: records, metric kinds, dataset-scope evaluators."""

    def __init__(self, info: RunInfo) -> None:
        self.info = info
        self.kinds: dict[_Metric, set[str]] = {}
        self.dataset_scope: set[str] = set()
        self.duplicates = 0
        self.records = 0
        self.trials = 1

    def keys(self, db: SqlStore) -> Iterator[tuple[_Key, list[tuple[_Metric, float]]]]:
        """Stream the run: one (record key, scored values) per (record, trial) with results."""
        seen: set[str] = set()
        repeats: dict[str, int] = {}  # ids seen more than once: the last occurrence (0-based)
        current: tuple[int, int] | None = None
        occurrence = 0
        key: _Key = ""
        values: list[tuple[_Metric, float]] = []
        kinds = self.kinds
        for seq, _index, result in db.iter_results(self.info.id):
            if seq < 0:  # a dataset-scope result: one value for the whole run, nothing to pair
                self.dataset_scope.add(result.evaluator)
                continue
            if current is None or current[0] != seq or current[1] != result.trial:
                if current is not None:
                    yield key, values
                    values = []
                rid = result.record_id
                if current is None or current[0] != seq:
                    occurrence = 0
                    if rid in seen:
                        occurrence = repeats[rid] = repeats.get(rid, 0) + 1
                        self.duplicates += 1
                    else:
                        seen.add(rid)
                current = (seq, result.trial)
                key = (
                    rid
                    if occurrence == 0 and result.trial == 0
                    else (rid, result.trial, occurrence)
                )
                self.records += 1
                self.trials = max(self.trials, result.trial + 1)
            if result.outcome != Outcome.SCORED:
                continue
            for score in result.scores:
                metric = (result.evaluator, score.name)
                if score.passed is not None:
                    kinds.setdefault(metric, set()).add("passed")
                    values.append((metric, 1.0 if score.passed else 0.0))
                elif score.number is not None:
                    kinds.setdefault(metric, set()).add("number")
                    values.append((metric, float(score.number)))
                elif score.label is not None:
                    kinds.setdefault(metric, set()).add("label")
        if current is not None:
            yield key, values

    def summary_metrics(self) -> dict[_Metric, dict[str, Any]]:
        items = (self.info.summary or {}).get("metrics") or []
        return {(str(d.get("evaluator")), str(d.get("metric"))): d for d in items}

    def metric_kinds(self) -> dict[_Metric, set[str]]:
        """Every metric of the run: the stored summary's, then any seen only in the results."""
        out: dict[_Metric, set[str]] = {}
        for metric, d in self.summary_metrics().items():
            kind = str(d.get("kind", "number"))
            out[metric] = {kind if kind in ("passed", "number") else "label"}
        for metric, kinds in self.kinds.items():
            out.setdefault(metric, set()).update(kinds)
        return out

    @property
    def dataset_version(self) -> str | None:
        dataset = (self.info.summary or {}).get("dataset") or {}
        version = dataset.get("version")
        return None if version is None else str(version)

    def evaluator_spec(self, name: str) -> dict[str, Any] | None:
        return next((s for s in self.info.evaluators if s.get("name") == name), None)


class _Comparer:
    def __init__(
        self,
        db: SqlStore,
        a: RunInfo,
        b: RunInfo,
        wanted: Sequence[str] | None,
        seed: int,
        level: float,
        n_resamples: int,
    ) -> None:
        self.db = db
        self.a, self.b = _Side(a), _Side(b)
        self.wanted = list(wanted) if wanted else None
        self.seed, self.level, self.n_resamples = seed, level, n_resamples
        self.warnings: list[str] = []

    def selected(self, metric: _Metric) -> bool:
        if self.wanted is None:
            return True
        evaluator, name = metric
        return any(w in (name, evaluator, f"{evaluator}/{name}") for w in self.wanted)

    def _collect(
        self, cols: dict[_Metric, _Column], row: int, values: list[tuple[_Metric, float]]
    ) -> None:
        """Append a record's selected values (at ``row``) to their metrics' columns."""
        for metric, value in values:
            if self.selected(metric):
                rows, vals = cols.setdefault(metric, (array("q"), array("d")))
                rows.append(row)
                vals.append(value)

    def _check_wanted(self, metrics: Iterable[_Metric], *, final: bool) -> None:
        """Name the ``metrics`` filters that match nothing (before streaming, when we can tell)."""
        if self.wanted is None:
            return
        known = list(metrics)
        if not final:
            if self.a.info.summary is None or self.b.info.summary is None:
                return  # an unfinished run may hold metrics its (missing) summary cannot list
            known += [(str(s.get("name")), "") for s in self.a.info.evaluators]
            known += [(str(s.get("name")), "") for s in self.b.info.evaluators]
        missing = [w for w in self.wanted if not any(w in (n, e, f"{e}/{n}") for e, n in known)]
        if missing:
            raise UserError(
                f"no metric matches {', '.join(map(repr, missing))} in run {self.a.info.id} "
                f"or {self.b.info.id}",
                hint="the metrics are: " + _names((e, n) for e, n in known if n),
            )

    def run(self) -> Comparison:
        a, b = self.a, self.b
        self._check_wanted([*a.summary_metrics(), *b.summary_metrics()], final=False)
        # Run A: one dense float column per metric over A's records, NaN where not scored.
        index: dict[_Key, int] = {}
        cols_a: dict[_Metric, _Column] = {}
        for key, values in a.keys(self.db):
            i = index.setdefault(key, len(index))
            self._collect(cols_a, i, values)
        dense: dict[_Metric, NDArray[np.float64]] = {}
        for metric, (rows, vals) in cols_a.items():
            column = np.full(len(index), np.nan)
            column[np.frombuffer(rows, dtype=np.int64)] = np.frombuffer(vals, dtype=np.float64)
            dense[metric] = column
        del cols_a
        # Run B: each value is matched to A's record row (-1 when A lacks the record).
        in_b = np.zeros(len(index), dtype=np.bool_)
        b_only = 0
        cols_b: dict[_Metric, _Column] = {}
        for key, values in b.keys(self.db):
            i = index.get(key, -1)
            if i < 0:
                b_only += 1
            else:
                in_b[i] = True
            self._collect(cols_b, i, values)

        kinds_a, kinds_b = a.metric_kinds(), b.metric_kinds()
        common = [m for m in kinds_a if m in kinds_b and self.selected(m)]
        unmatched = [
            Unmatched(ev, name, "a" if this is a else "b", this.info.id)
            for this, mine, theirs in ((a, kinds_a, kinds_b), (b, kinds_b, kinds_a))
            for ev, name in mine
            if (ev, name) not in theirs and self.selected((ev, name))
        ]
        self._check_wanted([*kinds_a, *(m for m in kinds_b if m not in kinds_a)], final=True)
        self._run_warnings(int(np.count_nonzero(~in_b)), b_only)

        compared: list[MetricComparison] = []
        for metric in common:
            kinds = kinds_a[metric] | kinds_b[metric]
            evaluator, name = metric
            if "label" in kinds:
                self.warnings.append(f"{evaluator}/{name} holds labels: not compared")
                continue
            if evaluator in a.dataset_scope or evaluator in b.dataset_scope:
                self.warnings.append(
                    f"{evaluator}/{name} is a dataset-scope metric (one value per run): "
                    "no per-record values to pair; not compared"
                )
                continue
            if len(kinds) > 1:
                self.warnings.append(
                    f"{evaluator}/{name} is pass/fail in one run and a number in the other: "
                    "compared as numbers"
                )
            kind: CompareKind = "passed" if kinds == {"passed"} else "number"
            column = dense.get(metric, np.full(len(index), np.nan))
            rows, vals = cols_b.get(metric, (array("q"), array("d")))
            compared.append(self._compare(metric, kind, column, rows, vals))
        if not compared:
            raise UserError(
                f"runs {a.info.id} and {b.info.id} have no metric in common to compare",
                hint=f"A has {_names(kinds_a) or 'none'}; B has {_names(kinds_b) or 'none'}",
            )
        self._evaluator_warnings(compared)
        return Comparison(
            run_a=a.info.id,
            run_b=b.info.id,
            dataset_versions=(a.dataset_version, b.dataset_version),
            metrics=compared,
            unmatched=unmatched,
            warnings=self.warnings,
            level=self.level,
            seed=self.seed,
        )

    def _compare(
        self,
        metric: _Metric,
        kind: CompareKind,
        column: NDArray[np.float64],
        rows_b: array[int],
        vals_b: array[float],
    ) -> MetricComparison:
        rows = np.frombuffer(rows_b, dtype=np.int64) if len(rows_b) else np.empty(0, np.int64)
        values = np.frombuffer(vals_b, dtype=np.float64) if len(vals_b) else np.empty(0)
        n_b = int(values.size)
        matched = rows >= 0
        rows, values = rows[matched], values[matched]
        scored_a = ~np.isnan(column[rows])
        rows, values = rows[scored_a], values[scored_a]
        # In A's record order; a record key seen twice in B (two same-named scores) pairs once.
        rows, first = np.unique(rows, return_index=True)
        pair_a, pair_b = column[rows], values[first]
        n = int(pair_a.size)
        hib = self._higher_is_better(metric, kind)
        result = paired_bootstrap(
            pair_a, pair_b, n_resamples=self.n_resamples, seed=self.seed, level=self.level
        )
        test = None
        ci = result.interval
        if kind == "passed":
            passed_a, passed_b = (pair_a > 0.5).tolist(), (pair_b > 0.5).tolist()
            test = mcnemar(passed_a, passed_b)
            if n >= 2 and ci.low is None:
                # Every pair differs by the same amount (both runs pass everything, say): the
                # bootstrap has no spread to read; Newcombe's score interval still has a width.
                ci = newcombe_interval(passed_a, passed_b, level=self.level)
        mde = None
        if n >= 2:
            z = float(sc.ndtri(0.5 + self.level / 2.0)) + float(sc.ndtri(POWER))
            mde = z * float(np.std(pair_b - pair_a, ddof=1)) / math.sqrt(n)
        verdict = _verdict(ci, hib)
        if ci.low is None and n >= 2 and result.delta is not None:
            verdict = _shift_verdict(result.delta, n, self.level, hib)
        note = ""
        if (
            verdict == "no significant change"
            and mde is not None
            and result.delta is not None
            and abs(result.delta) < mde
        ):
            note = f"n={n} can only detect differences ≥ {format_number(mde)}"
        return MetricComparison(
            evaluator=metric[0],
            metric=metric[1],
            kind=kind,
            n_paired=n,
            n_a=int(np.count_nonzero(~np.isnan(column))),
            n_b=n_b,
            mean_a=float(np.mean(pair_a)) if n else None,
            mean_b=float(np.mean(pair_b)) if n else None,
            delta=result.delta,
            ci=ci,
            p_value=result.p_value,
            mcnemar=test,
            verdict=verdict,
            mde=mde,
            higher_is_better=hib,
            note=note,
        )

    def _higher_is_better(self, metric: _Metric, kind: CompareKind) -> bool | None:
        stored = [
            d.get("higher_is_better")
            for d in (self.a.summary_metrics().get(metric), self.b.summary_metrics().get(metric))
            if d is not None and d.get("higher_is_better") is not None
        ]
        if len(set(stored)) > 1:
            self.warnings.append(
                f"{metric[0]}/{metric[1]}: the runs disagree on whether higher is better; "
                "the direction of a change is not judged"
            )
            return None
        if stored:
            return bool(stored[0])
        return True if kind == "passed" else None

    def _run_warnings(self, a_only: int, b_only: int) -> None:
        a, b = self.a, self.b
        if a.info.id == b.info.id:
            self.warnings.append(f"run {a.info.id} is compared with itself")
        for side, label in ((a, "A"), (b, "B")):
            if side.info.status != "done":
                self.warnings.append(
                    f"run {label} ({side.info.id}) is {side.info.status}: its results may be "
                    "incomplete"
                )
            if side.duplicates:
                self.warnings.append(
                    f"record ids repeat in run {label} ({side.duplicates} repeats): the k-th "
                    "record with an id pairs with the k-th of the other run"
                )
        if a.dataset_version != b.dataset_version:
            self.warnings.append(
                f"dataset versions differ (A {a.dataset_version or 'unknown'}, "
                f"B {b.dataset_version or 'unknown'}): records are paired by id, so check that "
                "the ids name the same samples"
            )
        for lost, of, this, other in ((a_only, a, "A", "B"), (b_only, b, "B", "A")):
            if lost:
                self.warnings.append(
                    f"{lost} of {of.records} records of run {this} are missing from run {other}: "
                    "not compared"
                )
        if max(a.trials, b.trials) > 1:
            self.warnings.append(
                "several trials per record: each (record, trial) is one pair, treated as "
                "independent, so the intervals may be too narrow"
            )

    def _evaluator_warnings(self, compared: list[MetricComparison]) -> None:
        for name in dict.fromkeys(m.evaluator for m in compared):
            spec_a = self.a.evaluator_spec(name) or {}
            spec_b = self.b.evaluator_spec(name) or {}
            ref_a, ref_b = spec_a.get("ref"), spec_b.get("ref")
            if ref_a != ref_b:
                self.warnings.append(f"evaluator {name}: refs differ (A {ref_a}, B {ref_b})")
            params_a, params_b = spec_a.get("params") or {}, spec_b.get("params") or {}
            if params_a != params_b:
                changed = sorted(
                    k for k in set(params_a) | set(params_b) if params_a.get(k) != params_b.get(k)
                )
                detail = ", ".join(
                    f"{k}: {_param(params_a, k)} → {_param(params_b, k)}" for k in changed
                )
                self.warnings.append(f"evaluator {name}: params differ ({detail})")


def _verdict(ci: Interval, higher_is_better: bool | None) -> Verdict:
    if ci.low is None or ci.high is None:
        return "insufficient data"
    if ci.low <= 0.0 <= ci.high:
        return "no significant change"
    if higher_is_better is None:
        return "changed"
    return "improved" if (ci.low > 0.0) == higher_is_better else "regressed"


def _shift_verdict(delta: float, n: int, level: float, higher_is_better: bool | None) -> Verdict:
    """The verdict when every pair differs by the same ``delta`` (no interval can be read).

    A sign test decides: n pairs all moving the same way happen with probability 2·2⁻ⁿ when
    the runs are equal, so from 6 pairs on (at 95%) a shared nonzero shift is a change.
    """
    if delta == 0.0 or 2.0 * 0.5**n > 1.0 - level:
        return "no significant change"
    if higher_is_better is None:
        return "changed"
    return "improved" if (delta > 0.0) == higher_is_better else "regressed"


def _names(metrics: Iterable[_Metric]) -> str:
    return ", ".join(dict.fromkeys(f"{e}/{n}" for e, n in metrics))


def _param(params: dict[str, Any], key: str) -> str:
    return repr(params[key]) if key in params else "default"
