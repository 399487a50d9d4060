"""The Score pipeline: aggregation rules, dataset scope, intervals kept in range, option checks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evalsi
from evalsi import OutputSpec, Record, Score, evaluator
from evalsi.core import UserError
from evalsi.stats import Moments


def rows(n: int, hit_every: int = 2) -> list[dict[str, object]]:
    return [
        {
            "id": str(i),
            "output": "a" if i % hit_every == 0 else "b",
            "reference": "a",
            "metadata": {"topic": f"t{i % 5}"},
        }
        for i in range(n)
    ]


@evaluator(name="t/accuracy", scope="dataset", requires=("output", "reference"), output="number")
class Accuracy:
    """Corpus accuracy via map/reduce."""

    def map(self, record: Record) -> bool:
        if record.id == "3":
            raise ValueError("cannot map")
        return record.output.as_text() == record.reference.as_text()  # type: ignore[union-attr]

    def reduce(self, values: list[bool]) -> float:
        return sum(values) / len(values)


def test_dataset_scope_counts_per_record(tmp_path: Path) -> None:
    data = [*rows(10), {"id": "x", "output": "a"}]  # one record without a reference
    result = evalsi.evaluate(data, [Accuracy], store=tmp_path / "s.db")
    m = result.metric("accuracy")
    assert (m.scored, m.skipped, m.errors) == (9, 1, 1)  # record 3 failed in map
    assert m.n == 9
    assert m.mean == pytest.approx(5 / 9)
    b = m  # dataset-scope metrics get a bootstrap interval without asking
    assert b.ci.method == "bootstrap-percentile"
    assert b.ci.low is not None
    assert b.ci.high is not None
    assert b.ci.low <= b.mean <= b.ci.high  # type: ignore[operator]


def test_bootstrap_with_clusters_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot be combined"):
        evalsi.evaluate(
            rows(4), ["exact-match"], store=tmp_path / "s.db", bootstrap="bca", cluster_by="topic"
        )


def test_intervals_stay_inside_the_declared_range(tmp_path: Path) -> None:
    data = [
        {"id": str(i), "output": "kitten", "reference": "kitten" if i else "sitting"}
        for i in range(6)
    ]
    result = evalsi.evaluate(data, ["fuzzy-match"], store=tmp_path / "s.db")
    sim = result.metric("fuzzy-match", "similarity")
    assert sim.ci.method == "t"
    assert sim.ci.high == 1.0  # the raw t interval overshoots 1; similarity cannot


def test_pass_rate_mean_is_exact(tmp_path: Path) -> None:
    result = evalsi.evaluate(rows(20, hit_every=20), ["exact-match"], store=tmp_path / "s.db")
    assert result.metric("exact-match").mean == 0.05  # 1 / 20, no floating residue


def test_unnamed_and_named_scores_and_labels(tmp_path: Path) -> None:
    @evaluator(
        name="t/multi", outputs=[OutputSpec("quality", "number"), OutputSpec("band", "label")]
    )
    def multi(record: Record) -> list[Score]:
        n = int(record.id)
        return [
            Score(name="quality", number=n / 10),
            Score(name="band", label="hi" if n > 4 else "lo"),
        ]

    result = evalsi.evaluate(rows(10), [multi], store=tmp_path / "s.db")
    assert result.metric("multi", "quality").mean == pytest.approx(0.45)
    band = result.metric("multi", "band")
    assert band.kind == "label"
    assert band.labels == {"hi": 5, "lo": 5}
    assert band.mean is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-1e6, 1e6), min_size=0, max_size=30), min_size=1, max_size=8))
def test_streaming_moments_match_numpy(batches: list[list[float]]) -> None:
    m = Moments()
    for b in batches:
        m.add(b)
    flat = [x for b in batches for x in b]
    assert m.n == len(flat)
    if flat:
        assert m.mean == pytest.approx(float(np.mean(flat)), rel=1e-9, abs=1e-6)
    if len(flat) >= 2:
        assert m.std == pytest.approx(float(np.std(flat, ddof=1)), rel=1e-6, abs=1e-6)
    else:
        assert m.std is None


@pytest.mark.parametrize("size", [1, 3, 40])  # the pure-Python path for a few values, numpy's above
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_streaming_moments_refuse_non_finite_values(size: int, bad: float) -> None:
    m = Moments()
    with pytest.raises(ValueError, match="finite"):
        m.add([1.0] * (size - 1) + [bad])
    assert m.n == 0


def test_streaming_clustered_matches_the_array_version() -> None:
    from evalsi.stats import clustered_interval

    rng = np.random.default_rng(3)
    values = rng.random(500).round(2).tolist()
    clusters = [f"c{i % 37}" for i in range(500)]
    m = Moments()
    for start in range(0, 500, 64):
        m.add(values[start : start + 64], clusters[start : start + 64])
    streamed = m.summary("number", clustered=True).interval
    whole = clustered_interval(values, clusters)
    assert streamed.low == pytest.approx(whole.low, rel=1e-12)
    assert streamed.high == pytest.approx(whole.high, rel=1e-12)
    assert m.summary("number", clustered=True).clusters == 37
    assert math.isfinite(streamed.high or math.nan)
