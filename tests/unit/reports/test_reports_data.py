"""What a report gathers: distributions, slices (checked against scipy and statsmodels),
failures with their records, and the checks that keep a changed dataset from being joined."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats

import evalsi
from evalsi import Record, Score, evaluator
from evalsi.core import UserError
from evalsi.reports import _data as data_module
from evalsi.reports import gather_report
from evalsi.reports._data import Running
from evalsi.store import SqlStore
from tests.support.proportions import wilson_reference

TOPICS = ("geo", "math", "art")


@evaluator(name="t/flaky", version="1.0.0", requires=("output",), output="passed")
def flaky(record: Record) -> bool | Score:
    """Errors on every 7th record, fails with an explanation on every 3rd."""
    n = int(record.id[1:])
    if n % 7 == 6:
        raise ValueError(f"cannot grade {record.id} <b>bold</b>")
    if n % 3 == 0:
        return Score(passed=False, explanation=f"record {record.id} is a multiple of three")
    return True


def make_rows(n: int = 30) -> list[dict[str, Any]]:
    return [
        {
            "id": f"r{i}",
            "input": f"question {i}",
            "output": "yes" if i % 2 else "no",
            "reference": "yes",
            "metadata": {"topic": TOPICS[i % 3], "nested": {"level": i % 2}},
            "usage": {"latency_ms": 100 + 7 * i + (i % 5) * 13},
        }
        for i in range(n)
    ]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    db = SqlStore.open(tmp_path / "s.db")
    yield db
    db.close()


def run(store: SqlStore, data: Any, evaluators: list[Any] | None = None) -> str:
    chosen = evaluators or ["exact-match", "latency", flaky]
    return evalsi.evaluate(data, chosen, store=store).run_id


def test_distributions_count_every_scored_value(store: SqlStore, tmp_path: Path) -> None:
    rows = make_rows()
    run_id = run(store, write_rows(tmp_path / "d.jsonl", rows))
    data = gather_report(store, run_id, failures=0)
    dists = {(d.evaluator, d.metric): d for d in data.distributions}
    exact = dists["exact-match", "exact-match"]
    assert (exact.kind, exact.passed, exact.failed) == ("passed", 15, 15)
    latency = dists["latency", "latency"]
    values = [r["usage"]["latency_ms"] for r in rows]
    assert latency.kind == "number"
    assert (latency.seen, latency.low, latency.high) == (30, min(values), max(values))
    q = latency.quantiles()
    assert q["median"] == pytest.approx(float(np.median(values)))
    flaky_dist = dists["flaky", "flaky"]
    errors = sum(1 for i in range(30) if i % 7 == 6)
    assert flaky_dist.errors == errors
    assert flaky_dist.passed + flaky_dist.failed == 30 - errors


def test_large_numeric_metric_keeps_a_bounded_sample(
    store: SqlStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data_module, "SAMPLE_SIZE", 10)
    rows = make_rows(40)
    run_id = run(store, write_rows(tmp_path / "d.jsonl", rows), ["latency"])
    (latency,) = gather_report(store, run_id, failures=0).distributions
    values = [r["usage"]["latency_ms"] for r in rows]
    assert latency.seen == 40
    assert len(latency.sample) == 10
    assert latency.sampled
    assert set(latency.sample) <= set(values)
    assert (latency.low, latency.high) == (min(values), max(values))  # exact, not sampled


def test_slices_match_reference_implementations(store: SqlStore, tmp_path: Path) -> None:
    rows = make_rows(60)
    run_id = run(store, write_rows(tmp_path / "d.jsonl", rows), ["exact-match", "latency"])
    data = gather_report(store, run_id, by="topic", failures=0)
    assert data.slices_problem is None
    assert data.slice_values == 3
    tables = {(t.evaluator, t.metric): t for t in data.slices}
    for row in tables["exact-match", "exact-match"].rows:
        members = [r for r in rows if r["metadata"]["topic"] == row.value]
        hits = sum(r["output"] == r["reference"] for r in members)
        low, high = wilson_reference(hits, len(members))
        assert row.n == len(members)
        assert row.mean == pytest.approx(hits / len(members))
        assert row.ci.method == "wilson"
        assert [row.ci.low, row.ci.high] == pytest.approx([low, high])
    for row in tables["latency", "latency"].rows:
        x = np.array(
            [r["usage"]["latency_ms"] for r in rows if r["metadata"]["topic"] == row.value]
        )
        low, high = scipy.stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=scipy.stats.sem(x))
        assert row.mean == pytest.approx(x.mean())
        assert row.ci.method == "t"
        assert [row.ci.low, row.ci.high] == pytest.approx([low, high])


def test_slices_by_a_dotted_key_and_a_missing_key(store: SqlStore, tmp_path: Path) -> None:
    run_id = run(store, write_rows(tmp_path / "d.jsonl", make_rows()), ["exact-match"])
    nested = gather_report(store, run_id, by="nested.level", failures=0)
    assert sorted(r.value for r in nested.slices[0].rows) == ["0", "1"]
    missing = gather_report(store, run_id, by="nope", failures=0)
    assert [(r.value, r.n) for r in missing.slices[0].rows] == [("(missing)", 30)]


def test_many_slice_values_are_pooled(
    store: SqlStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data_module, "MAX_SLICES", 4)
    rows = [{**r, "metadata": {"k": f"v{i % 10}"}} for i, r in enumerate(make_rows(50))]
    run_id = run(store, write_rows(tmp_path / "d.jsonl", rows), ["exact-match"])
    (table,) = gather_report(store, run_id, by="k", failures=0).slices
    assert len(table.rows) == 5
    assert table.rows[-1].value == data_module.OTHER
    assert sum(r.n for r in table.rows) == 50


def test_running_moments_and_merge_match_numpy() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(5, 2, 37), rng.normal(-1, 3, 11)
    a, b = Running(), Running()
    for v in x:
        a.add(float(v))
    for v in y:
        b.add(float(v))
    a.merge(b)
    both = np.concatenate([x, y])
    assert a.n == 48
    assert a.mean == pytest.approx(both.mean())
    assert math.sqrt(a.m2 / (a.n - 1)) == pytest.approx(both.std(ddof=1))


def test_failures_group_per_record_with_their_text(store: SqlStore, tmp_path: Path) -> None:
    rows = make_rows()
    run_id = run(store, write_rows(tmp_path / "d.jsonl", rows))
    data = gather_report(store, run_id, failures=4)
    expected = [
        f"r{i}"
        for i in range(30)
        if rows[i]["output"] != rows[i]["reference"] or i % 7 == 6 or i % 3 == 0
    ]
    assert data.failures_total == len(expected)
    assert [f.record_id for f in data.failures] == expected[:4]
    first = data.failures[0]  # r0: exact-match failed, flaky failed with an explanation
    assert (first.input, first.output, first.reference) == ("question 0", "no", "yes")
    outcomes = {(p.evaluator, p.outcome, p.detail) for p in first.problems}
    assert outcomes == {
        ("exact-match", "failed", 'expected "yes", got "no"'),  # exact-match explains itself
        ("flaky", "failed", "record r0 is a multiple of three"),
    }
    errored = next(f for f in gather_report(store, run_id, failures=30).failures if f.seq == 6)
    assert ("flaky", "error") in {(p.evaluator, p.outcome) for p in errored.problems}
    assert any("<b>bold</b>" in p.detail for p in errored.problems)  # raw here; escaped on render


def test_long_text_is_truncated(store: SqlStore, tmp_path: Path) -> None:
    rows = [{"id": "a", "input": "x" * 5000, "output": "no", "reference": "yes"}]
    run_id = run(store, write_rows(tmp_path / "d.jsonl", rows), ["exact-match"])
    (failure,) = gather_report(store, run_id).failures
    assert failure.input is not None
    assert failure.input.startswith("x" * data_module.MAX_TEXT)
    assert failure.input.endswith(f"({5000 - data_module.MAX_TEXT} more characters)")


def test_changed_dataset_is_not_joined(store: SqlStore, tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl", make_rows())
    run_id = run(store, path, ["exact-match"])
    changed = make_rows()
    changed[-1]["metadata"]["topic"] = "other"  # same ids, same count, different content
    write_rows(path, changed)
    data = gather_report(store, run_id, by="topic")
    assert data.slices == []
    assert data.slices_problem is not None
    assert "is not the one the run graded" in data.slices_problem
    assert "version" in data.slices_problem
    assert data.records_problem == data.slices_problem
    assert data.failures  # still listed, from the store
    assert all(f.input is None and f.output is None for f in data.failures)


def test_shorter_dataset_and_other_ids_are_caught(store: SqlStore, tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl", make_rows())
    run_id = run(store, path, ["exact-match"])
    write_rows(path, make_rows(10))
    assert "fewer records" in (gather_report(store, run_id, by="topic").slices_problem or "")
    write_rows(path, [{**r, "id": f"x{i}"} for i, r in enumerate(make_rows())])
    problem = gather_report(store, run_id, failures=3).records_problem or ""
    assert "record 1 has id 'x0' there but 'r0' in the run" in problem


def test_missing_dataset_and_memory_runs_say_why(store: SqlStore, tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl", make_rows())
    run_id = run(store, path, ["exact-match"])
    path.unlink()
    problem = gather_report(store, run_id, by="topic").slices_problem or ""
    assert "cannot be read from here" in problem
    assert str(path) in problem
    memory = run(store, make_rows(), ["exact-match"])
    assert "from memory" in (gather_report(store, memory, by="topic").slices_problem or "")


def test_compare_section_is_paired(store: SqlStore, tmp_path: Path) -> None:
    rows = make_rows()
    path = write_rows(tmp_path / "d.jsonl", rows)
    a = run(store, path, ["exact-match"])
    b = run(
        store,
        write_rows(tmp_path / "e.jsonl", [{**r, "output": "yes"} for r in rows]),
        ["exact-match"],
    )
    # b, named by --compare, is the baseline A; the report's run a is B: Δ = a − b.
    section = gather_report(store, a, compare=b, failures=0).comparison
    assert section is not None
    (row,) = section.rows
    assert (row.mean_a, row.mean_b, row.delta) == (1.0, 0.5, -0.5)
    assert section.paired
    assert row.n_paired == 30
    assert row.ci is not None
    assert row.ci.high is not None
    assert row.ci.high < 0
    assert row.verdict == "regressed"
    # The other way round the sign flips and the verdict with it.
    (back,) = (gather_report(store, b, compare=a, failures=0).comparison or section).rows
    assert (back.mean_a, back.mean_b, back.delta, back.verdict) == (0.5, 1.0, 0.5, "improved")


def test_compare_without_common_metrics_shows_stored_means(store: SqlStore, tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl", make_rows())
    a = run(store, path, ["exact-match"])
    b = run(store, path, ["latency"])
    section = gather_report(store, a, compare=b, failures=0).comparison
    assert section is not None
    assert not section.paired
    # A is the baseline b (latency only), B the report's run a (exact-match only).
    assert [(r.metric, r.mean_a is None, r.mean_b is None, r.delta) for r in section.rows] == [
        ("exact-match", True, False, None),
        ("latency", False, True, None),
    ]
    assert any("no metric in common" in w for w in section.warnings)
    assert section.notes == ["Δ is the difference of the stored means, not a paired comparison"]


def test_bad_arguments(store: SqlStore, tmp_path: Path) -> None:
    run_id = run(store, write_rows(tmp_path / "d.jsonl", make_rows()), ["exact-match"])
    with pytest.raises(UserError, match="no run 'nope'"):
        gather_report(store, "nope")
    with pytest.raises(UserError, match="no run 'other'"):
        gather_report(store, run_id, compare="other")
    with pytest.raises(UserError, match="--failures"):
        gather_report(store, run_id, failures=-1)
    with pytest.raises(UserError, match="--by"):
        gather_report(store, run_id, by=" ")
