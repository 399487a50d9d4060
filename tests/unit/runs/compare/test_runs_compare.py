"""``compare_runs``: paired comparisons of two stored runs, checked against independent values.

Every run is built through ``evalsi.evaluate`` on crafted rows whose answer is known. The
expected numbers are computed here from those rows (never from the store): the deltas with
numpy, the interval with ``evalsi.stats.paired_bootstrap`` (golden-tested against scipy) on
the differences built here, McNemar against statsmodels on a 2×2 table built here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import (  # type: ignore[import-untyped]
    mcnemar as sm_mcnemar,
)

import evalsi
from evalsi import OutputSpec, Record, Score, Skip, evaluator
from evalsi.core import UserError
from evalsi.runs import Comparison, compare_runs
from evalsi.stats import paired_bootstrap
from evalsi.store import SqlStore

Row = dict[str, Any]


@evaluator(name="t/correct", version="1.0.0", output="passed")
def correct(record: Record) -> bool:
    assert record.output is not None
    return record.output.as_text() == "ok"


@evaluator(
    name="t/signals",
    version="1.0.0",
    outputs=[
        OutputSpec("quality", "number"),  # higher is better (the default)
        OutputSpec("latency", "number", higher_is_better=False),
        OutputSpec("raw", "number", higher_is_better=None),
        OutputSpec("stable", "number"),
    ],
)
def signals(record: Record) -> list[Score]:
    if "quality" not in record.metadata:
        raise Skip("no signals")
    return [
        Score(name=name, number=float(record.metadata[name]))
        for name in ("quality", "latency", "raw", "stable")
    ]


@evaluator(name="t/mood", version="1.0.0", output="label")
def mood(record: Record) -> str:
    assert record.output is not None
    return "happy" if record.output.as_text() == "ok" else "sad"


@evaluator(name="t/share-ok", scope="dataset", output="number")
class ShareOk:
    def map(self, record: Record) -> bool:
        assert record.output is not None
        return record.output.as_text() == "ok"

    def reduce(self, values: list[bool]) -> float:
        return sum(values) / len(values)


N = 120


def crafted() -> tuple[list[Row], list[Row]]:
    """Run A and run B over the same ids: B passes far more, is better, slower, shifted."""
    rng = np.random.default_rng(12345)
    quality = rng.normal(0.5, 0.1, N)
    latency = rng.normal(100.0, 10.0, N)
    raw = rng.normal(0.0, 1.0, N)
    stable = rng.normal(10.0, 2.0, N)
    rows_a: list[Row] = []
    rows_b: list[Row] = []
    for i in range(N):
        a_pass = i % 5 < 2  # 40%
        b_pass = (a_pass or i % 5 in (2, 3)) and i % 20 != 0  # 80% minus a few regressions
        rows_a.append(
            {
                "id": f"r{i}",
                "output": "ok" if a_pass else "no",
                "quality": quality[i],
                "latency": latency[i],
                "raw": raw[i],
                "stable": stable[i],
            }
        )
        rows_b.append(
            {
                "id": f"r{i}",
                "output": "ok" if b_pass else "no",
                "quality": quality[i] + 0.1 + rng.normal(0.0, 0.05),
                "latency": latency[i] + 20.0 + rng.normal(0.0, 5.0),
                "raw": raw[i] + 5.0,
                "stable": stable[i] + (1.0 if i % 2 else -1.0),  # mean change exactly 0
            }
        )
    return rows_a, rows_b


def run(store: SqlStore, rows: list[Row], evaluators: list[Any], **kwargs: Any) -> str:
    return evalsi.evaluate(rows, evaluators, store=store, **kwargs).run_id


@pytest.fixture
def store(tmp_path: Path) -> SqlStore:
    return SqlStore.open(tmp_path / "runs.db")


@pytest.fixture
def crafted_runs(store: SqlStore) -> tuple[list[Row], list[Row], Comparison]:
    rows_a, rows_b = crafted()
    a = run(store, rows_a, [correct, signals])
    b = run(store, rows_b, [correct, signals])
    return rows_a, rows_b, compare_runs(store, a, b, seed=7)


def values(rows: list[Row], metric: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    if metric == "correct":
        return np.array([1.0 if r["output"] == "ok" else 0.0 for r in rows])
    return np.array([float(r[metric]) for r in rows])


@pytest.mark.parametrize("metric", ["correct", "quality", "latency", "raw", "stable"])
def test_delta_and_interval_match_paired_bootstrap_on_the_differences(
    crafted_runs: tuple[list[Row], list[Row], Comparison], metric: str
) -> None:
    rows_a, rows_b, comparison = crafted_runs
    evaluator_name = "correct" if metric == "correct" else "signals"
    m = comparison.metric(evaluator_name, metric)
    a, b = values(rows_a, metric), values(rows_b, metric)
    ref = paired_bootstrap(a, b, seed=7)
    assert m.n_paired == m.n_a == m.n_b == N
    assert m.delta == pytest.approx(float(np.mean(b - a)), rel=1e-12, abs=1e-12)
    assert m.mean_a == pytest.approx(float(np.mean(a)), rel=1e-12)
    assert m.mean_b == pytest.approx(float(np.mean(b)), rel=1e-12)
    assert m.ci.method == "paired-bootstrap-percentile"
    assert m.ci.level == 0.95
    if ref.interval.low is None:  # "raw": every pair shifted alike, no spread to resample
        assert (m.ci.low, m.ci.high, m.p_value, ref.p_value) == (None, None, None, None)
        return
    assert m.ci.low == pytest.approx(ref.interval.low, rel=1e-12, abs=1e-12)
    assert m.ci.high == pytest.approx(ref.interval.high, rel=1e-12, abs=1e-12)
    assert m.p_value == pytest.approx(ref.p_value, rel=1e-12)


def test_mcnemar_matches_statsmodels_on_the_table_built_from_the_rows(
    crafted_runs: tuple[list[Row], list[Row], Comparison],
) -> None:
    rows_a, rows_b, comparison = crafted_runs
    a = [r["output"] == "ok" for r in rows_a]
    b = [r["output"] == "ok" for r in rows_b]
    both = sum(x and y for x, y in zip(a, b, strict=True))
    b10 = sum(x and not y for x, y in zip(a, b, strict=True))
    b01 = sum(y and not x for x, y in zip(a, b, strict=True))
    neither = sum(not x and not y for x, y in zip(a, b, strict=True))
    assert (b01, b10) == (48, 6)  # what the crafting intended
    ref = sm_mcnemar([[both, b10], [b01, neither]], exact=False, correction=True)
    m = comparison.metric("correct")
    assert m.kind == "passed"
    assert m.mcnemar is not None
    assert (m.mcnemar.b01, m.mcnemar.b10) == (b01, b10)
    assert m.mcnemar.method == "chi2"  # 54 discordant pairs: the chi-square form
    assert m.mcnemar.statistic == pytest.approx(float(ref.statistic), rel=1e-12)
    assert m.mcnemar.p_value == pytest.approx(float(ref.pvalue), rel=1e-10)
    assert comparison.metric("signals", "quality").mcnemar is None


def test_verdicts_follow_the_interval_and_the_stored_direction(
    crafted_runs: tuple[list[Row], list[Row], Comparison],
) -> None:
    _, _, c = crafted_runs
    assert c.metric("correct").verdict == "improved"  # pass/fail: higher is better by default
    assert c.metric("correct").higher_is_better is True
    assert c.metric("signals", "quality").verdict == "improved"
    assert c.metric("signals", "latency").verdict == "regressed"  # slower, lower is better
    assert c.metric("signals", "latency").higher_is_better is False
    assert c.metric("signals", "raw").verdict == "changed"  # direction unknown
    assert c.metric("signals", "raw").higher_is_better is None
    stable = c.metric("signals", "stable")
    assert stable.delta == pytest.approx(0.0, abs=1e-12)
    assert stable.verdict == "no significant change"
    for name in ("correct", "quality", "latency", "raw"):
        assert c.metric("correct" if name == "correct" else "signals", name).note == ""
    # In Score runs the outputs are part of the dataset, so two systems' runs differ in version.
    assert [w.split(" (")[0] for w in c.warnings] == ["dataset versions differ"]
    assert c.unmatched == []


def test_minimum_detectable_effect_at_80_percent_power(
    crafted_runs: tuple[list[Row], list[Row], Comparison],
) -> None:
    rows_a, rows_b, c = crafted_runs
    z = scipy_stats.norm.ppf(0.975) + scipy_stats.norm.ppf(0.8)
    assert z == pytest.approx(2.8, abs=0.005)
    for evaluator_name, metric in [("signals", "stable"), ("correct", "correct")]:
        d = values(rows_b, metric) - values(rows_a, metric)
        expected = z * float(np.std(d, ddof=1)) / math.sqrt(N)
        assert c.metric(evaluator_name, metric).mde == pytest.approx(expected, rel=1e-9)
    stable = c.metric("signals", "stable")
    assert stable.mde is not None
    assert stable.note == f"n={N} can only detect differences ≥ {stable.mde:.3f}"


def test_clear_regression_of_a_pass_fail_metric(store: SqlStore) -> None:
    rows_a, rows_b = crafted()
    a = run(store, rows_b, [correct])  # the better run as the baseline
    b = run(store, rows_a, [correct])
    m = compare_runs(store, a, b).metric("correct")
    assert m.verdict == "regressed"
    assert m.delta is not None
    assert m.delta < 0
    assert m.mcnemar is not None
    assert (m.mcnemar.b01, m.mcnemar.b10) == (6, 48)


def test_no_change_on_identical_runs_has_no_spurious_note(store: SqlStore) -> None:
    rows_a, _ = crafted()
    a = run(store, rows_a, [correct, signals])
    b = run(store, rows_a, [correct, signals])
    c = compare_runs(store, a, b)
    for m in c.metrics:
        assert m.delta == 0.0
        # Never [0, 0]: numbers have no interval (no spread to resample), pass/fail metrics
        # Newcombe's, which still has a width when every pair agrees.
        if m.kind == "passed":
            assert m.ci.method == "paired-newcombe"
            assert m.ci.low is not None
            assert m.ci.high is not None
            assert m.ci.low < 0.0 < m.ci.high
        else:
            assert (m.ci.low, m.ci.high) == (None, None)
        assert m.verdict == "no significant change"
        assert m.mde == 0.0
        assert m.note == ""  # |delta| < MDE is false when both are 0
    assert c.warnings == []


def test_only_records_scored_in_both_runs_are_paired(store: SqlStore) -> None:
    rows_a, rows_b = crafted()
    rows_a, rows_b = rows_a[:60], rows_b[10:70]  # ids r0..r59 against r10..r69
    skipped = next(r for r in rows_b if r["id"] == "r20")
    for name in ("quality", "latency", "raw", "stable"):
        del skipped[name]  # signals skips r20 in run B
    a = run(store, rows_a, [correct, signals])
    b = run(store, rows_b, [correct, signals])
    c = compare_runs(store, a, b, seed=3)
    assert "10 of 60 records of run A are missing from run B: not compared" in c.warnings
    assert "10 of 60 records of run B are missing from run A: not compared" in c.warnings
    assert any(w.startswith("dataset versions differ") for w in c.warnings)
    assert c.metric("correct").n_paired == 50
    quality = c.metric("signals", "quality")
    assert (quality.n_paired, quality.n_a, quality.n_b) == (49, 60, 59)
    kept = [f"r{i}" for i in range(10, 60) if i != 20]
    by_id_a = {r["id"]: r for r in rows_a}
    by_id_b = {r["id"]: r for r in rows_b}
    xa = np.array([by_id_a[i]["quality"] for i in kept])
    xb = np.array([by_id_b[i]["quality"] for i in kept])
    ref = paired_bootstrap(xa, xb, seed=3)
    assert quality.delta == pytest.approx(float(np.mean(xb - xa)), rel=1e-12)
    assert quality.ci.low == pytest.approx(ref.interval.low, rel=1e-12)
    assert quality.ci.high == pytest.approx(ref.interval.high, rel=1e-12)


def test_pairs_follow_record_ids_not_positions(store: SqlStore) -> None:
    rows_a, rows_b = crafted()
    a = run(store, rows_a, [signals])
    b = run(store, list(reversed(rows_b)), [signals])
    m = compare_runs(store, a, b, seed=1).metric("signals", "quality")
    xa, xb = values(rows_a, "quality"), values(rows_b, "quality")
    ref = paired_bootstrap(xa, xb, seed=1)  # pairs in run A's record order
    assert m.n_paired == N
    assert m.delta == pytest.approx(float(np.mean(xb - xa)), rel=1e-12)
    assert m.ci.low == pytest.approx(ref.interval.low, rel=1e-12)
    assert m.ci.high == pytest.approx(ref.interval.high, rel=1e-12)


def test_same_data_different_params_warns_about_params_only(store: SqlStore) -> None:
    rows = [{"id": str(i), "output": "Paris", "reference": "paris"} for i in range(30)]
    a = run(store, rows, ["exact-match"])
    b = run(store, rows, ["exact-match"], params={"exact-match": {"ignore_case": True}})
    c = compare_runs(store, a, b)
    assert c.dataset_versions[0] == c.dataset_versions[1] is not None
    assert c.warnings == ["evaluator exact-match: params differ (ignore_case: default → True)"]
    m = c.metric("exact-match")
    assert (m.mean_a, m.mean_b, m.delta, m.verdict) == (0.0, 1.0, 1.0, "improved")
    assert m.mcnemar is not None
    assert (m.mcnemar.b01, m.mcnemar.b10, m.mcnemar.method) == (30, 0, "chi2")


def test_different_refs_are_named(store: SqlStore) -> None:
    @evaluator(name="t/correct", version="2.0.0", output="passed")
    def correct_v2(record: Record) -> bool:
        assert record.output is not None
        return record.output.as_text() in ("ok", "OK")

    rows_a, _ = crafted()
    c = compare_runs(store, run(store, rows_a, [correct]), run(store, rows_a, [correct_v2]))
    assert c.warnings == ["evaluator correct: refs differ (A t/correct@1.0.0, B t/correct@2.0.0)"]


def test_metrics_in_one_run_only_are_unmatched(store: SqlStore) -> None:
    rows_a, rows_b = crafted()
    a = run(store, rows_a, [correct, signals])
    b = run(store, rows_b, [correct, "exact-match"])
    c = compare_runs(store, a, b)
    assert [(m.evaluator, m.metric) for m in c.metrics] == [("correct", "correct")]
    only = [(u.evaluator, u.metric, u.only_in, u.run_id) for u in c.unmatched]
    assert only == [
        ("signals", "quality", "a", a),
        ("signals", "latency", "a", a),
        ("signals", "raw", "a", a),
        ("signals", "stable", "a", a),
        ("exact-match", "exact-match", "b", b),
    ]
    assert f"only in B ({b}): exact-match/exact-match" in c.notes()


def test_metric_filter(store: SqlStore) -> None:
    rows_a, rows_b = crafted()
    a = run(store, rows_a, [correct, signals])
    b = run(store, rows_b, [correct, signals])

    def names(c: Comparison) -> list[tuple[str, str]]:
        return [(m.evaluator, m.metric) for m in c.metrics]

    assert names(compare_runs(store, a, b, metrics=["latency", "correct"])) == [
        ("correct", "correct"),
        ("signals", "latency"),
    ]
    assert len(compare_runs(store, a, b, metrics=["signals"]).metrics) == 4
    assert names(compare_runs(store, a, b, metrics=["signals/raw"])) == [("signals", "raw")]
    with pytest.raises(UserError, match="no metric matches 'bogus'") as info:
        compare_runs(store, a, b, metrics=["raw", "bogus"])
    assert info.value.hint is not None
    assert "signals/quality" in info.value.hint


def test_unknown_run_and_no_common_metric_are_user_errors(store: SqlStore) -> None:
    rows_a, rows_b = crafted()
    a = run(store, rows_a, [signals])
    b = run(store, rows_b, [correct])
    with pytest.raises(UserError, match="no run 'nope'"):
        compare_runs(store, "nope", b)
    with pytest.raises(UserError, match="no run 'zzz'"):
        compare_runs(store, a, "zzz")
    with pytest.raises(UserError, match="no metric in common"):
        compare_runs(store, a, b)
    with pytest.raises(UserError, match="level"):
        compare_runs(store, a, a, level=1.0)


def test_store_path_and_run_prefixes(tmp_path: Path) -> None:
    rows_a, rows_b = crafted()
    path = tmp_path / "p.db"
    a = evalsi.evaluate(rows_a, [correct], store=path).run_id
    b = evalsi.evaluate(rows_b, [correct], store=path).run_id
    c = compare_runs(path, a[:-1], "latest")
    assert (c.run_a, c.run_b) == (a, b)
    with pytest.raises(UserError, match="no result store"):
        compare_runs(tmp_path / "absent.db", a, b)


def test_labels_and_dataset_scope_metrics_are_not_compared(store: SqlStore) -> None:
    rows_a, rows_b = crafted()
    a = run(store, rows_a, [correct, mood, ShareOk])
    b = run(store, rows_b, [correct, mood, ShareOk])
    c = compare_runs(store, a, b)
    assert [m.evaluator for m in c.metrics] == ["correct"]
    assert "mood/mood holds labels: not compared" in c.warnings
    assert any(w.startswith("share-ok/share-ok is a dataset-scope metric") for w in c.warnings)


def test_repeated_ids_pair_by_occurrence(store: SqlStore) -> None:
    ids = ["x", "y", "x", "x", "y"]
    a_out = ["no", "no", "ok", "no", "ok"]
    b_out = ["ok", "no", "ok", "ok", "ok"]
    a = run(store, [{"id": i, "output": o} for i, o in zip(ids, a_out, strict=True)], [correct])
    b = run(store, [{"id": i, "output": o} for i, o in zip(ids, b_out, strict=True)], [correct])
    c = compare_runs(store, a, b)
    m = c.metric("correct")
    assert m.mcnemar is not None
    assert (m.n_paired, m.mcnemar.b01, m.mcnemar.b10) == (5, 2, 0)
    assert any("record ids repeat in run A (3 repeats)" in w for w in c.warnings)


def test_too_few_pairs_is_insufficient_data(store: SqlStore) -> None:
    rows_a, rows_b = crafted()
    rows_b = [{k: v for k, v in r.items() if k != "output"} for r in rows_b]  # all skipped
    rows_b[0]["output"] = "ok"  # one record scored in both
    c = compare_runs(store, run(store, rows_a, [correct]), run(store, rows_b, [correct]))
    m = c.metric("correct")
    assert (m.n_paired, m.n_a, m.n_b) == (1, N, 1)
    assert (m.ci.low, m.ci.high, m.p_value, m.mde) == (None, None, None, None)
    assert m.verdict == "insufficient data"
    assert m.delta == 0.0  # r0 passes in both
    rows_b[0].pop("output")
    c = compare_runs(store, run(store, rows_a, [correct]), run(store, rows_b, [correct]))
    m = c.metric("correct")
    assert (m.n_paired, m.mean_a, m.mean_b, m.delta, m.verdict) == (
        0,
        None,
        None,
        None,
        "insufficient data",
    )
    assert m.mcnemar is not None
    assert (m.mcnemar.b01, m.mcnemar.b10, m.mcnemar.p_value) == (0, 0, 1.0)
    assert c.rows()[0][3:7] == ("-", "-", "-", "-")


def test_unfinished_runs_and_self_comparison_are_warned(store: SqlStore) -> None:
    rows_a, _ = crafted()
    a = run(store, rows_a, [correct])
    c = compare_runs(store, a, a)
    assert c.warnings == [f"run {a} is compared with itself"]
    store.finish_run(a, status="failed", records=N, summary=None, manifest=None, error="boom")
    c = compare_runs(store, a, a)
    assert f"run A ({a}) is failed: its results may be incomplete" in c.warnings
    assert c.metric("correct").n_paired == N  # metrics read from the results themselves
    assert c.metric("correct").higher_is_better is True  # pass/fail default without a summary


def test_to_dict_shape(crafted_runs: tuple[list[Row], list[Row], Comparison]) -> None:
    _, _, c = crafted_runs
    d = c.to_dict()
    assert {"run_a", "run_b", "dataset_versions", "warnings", "metrics", "unmatched"} <= set(d)
    assert len(d["dataset_versions"]) == 2
    first = d["metrics"][0]
    assert {
        "evaluator",
        "metric",
        "kind",
        "n_paired",
        "mean_a",
        "mean_b",
        "delta",
        "ci",
        "ci_method",
        "p_value",
        "mcnemar",
        "verdict",
        "mde",
    } <= set(first)
    assert set(first["mcnemar"]) == {"b01", "b10", "statistic", "p_value", "method"}
    assert d["metrics"][1]["mcnemar"] is None
    table = c.table()
    assert "95% CI" in table
    assert "improved" in table
    assert "regressed" in table
    assert c.markdown().startswith("**compare A")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.booleans(), st.booleans(), st.floats(-5, 5), st.floats(-5, 5)),
        min_size=2,
        max_size=25,
    )
)
def test_swapping_the_runs_negates_the_delta(
    tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[bool, bool, float, float]]
) -> None:
    store = SqlStore.open(tmp_path_factory.mktemp("swap") / "s.db")
    row = {"latency": 0.0, "raw": 0.0, "stable": 0.0}
    rows_a = [
        {"id": str(i), "output": "ok" if p else "no", "quality": x, **row}
        for i, (p, _, x, _) in enumerate(pairs)
    ]
    rows_b = [
        {"id": str(i), "output": "ok" if p else "no", "quality": y, **row}
        for i, (_, p, _, y) in enumerate(pairs)
    ]
    a, b = run(store, rows_a, [correct, signals]), run(store, rows_b, [correct, signals])
    forward = compare_runs(store, a, b, metrics=["correct", "quality"])
    backward = compare_runs(store, b, a, metrics=["correct", "quality"])
    for f, r in zip(forward.metrics, backward.metrics, strict=True):
        assert f.n_paired == r.n_paired == len(pairs)
        assert f.delta == pytest.approx(-(r.delta or 0.0), abs=1e-9)
        assert (f.mean_a, f.mean_b) == (r.mean_b, r.mean_a)
        if f.ci.low is None or r.ci.low is None:  # one shared difference: no interval
            assert (f.ci.low, f.ci.high, r.ci.low, r.ci.high) == (None, None, None, None)
            continue
        assert f.ci.low == pytest.approx(-(r.ci.high or 0.0), abs=1e-9)
        assert f.ci.high == pytest.approx(-(r.ci.low or 0.0), abs=1e-9)
    fm, bm = forward.metrics[0].mcnemar, backward.metrics[0].mcnemar
    assert fm is not None
    assert bm is not None
    assert (fm.b01, fm.b10, fm.p_value) == (bm.b10, bm.b01, bm.p_value)
    store.close()
