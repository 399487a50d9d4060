"""Dataset-scope metrics: a bootstrap CI by default, two resampling paths that agree, a bounded
number of replicates, and the reasons records were left out kept with the result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

import evalsi
from evalsi.core import Outcome, Record, Score
from evalsi.evaluators import Registry, Skip, evaluator
from evalsi.runs._dataset_scope import MIN_RESAMPLES, RESAMPLES, resample_count


class _Mean:
    """The mean of ``output`` numbers; odd ids are skipped when ``skip_odd``."""

    def __init__(self, *, skip_odd: bool = False) -> None:
        self.skip_odd = skip_odd

    def map(self, record: Record) -> float:
        assert record.output is not None
        if self.skip_odd and int(record.id) % 2:
            raise Skip("odd record")
        value = record.output.json
        if value == "bad":
            raise ValueError("not a number")
        return float(value)

    def reduce(self, values: Sequence[float]) -> Score:
        return Score(number=float(np.mean(values)))


class _WeightedMean(_Mean):
    def prepare(self, values: Sequence[float]) -> npt.NDArray[np.float64]:
        return np.asarray(values, dtype=np.float64)

    def reduce_weighted(self, x: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> Score:
        return Score(number=float((x * w).sum() / w.sum()))


mean_plain = evaluator(name="t/mean-plain", scope="dataset", outputs=["mean-plain"])(_Mean)
mean_weighted = evaluator(name="t/mean-weighted", scope="dataset", outputs=["mean-weighted"])(
    _WeightedMean
)
REG = Registry([mean_plain, mean_weighted])


def _rows(values: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"id": str(i), "output": {"json": v}} for i, v in enumerate(values)]


def _summary(rows: list[dict[str, Any]], name: str, **kw: Any) -> Any:
    result = evalsi.evaluate(data=rows, evaluators=[name], registry=REG, store=":memory:", **kw)
    (summary,) = result.metrics
    return result, summary


def test_dataset_metrics_get_a_bootstrap_ci_by_default() -> None:
    x = np.random.default_rng(3).normal(10.0, 2.0, 800)
    _, s = _summary(_rows(x.tolist()), "mean-weighted")
    assert s.ci.method == "bootstrap-percentile"
    assert s.ci.low < s.mean < s.ci.high
    # The bootstrap interval of a mean approaches the t interval (scipy) for n = 800.
    t_lo, t_hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert s.ci.low == pytest.approx(t_lo, abs=0.05)
    assert s.ci.high == pytest.approx(t_hi, abs=0.05)


def test_weighted_and_rereduce_paths_draw_the_same_replicates() -> None:
    x = np.random.default_rng(5).exponential(3.0, 300).tolist()
    _, plain = _summary(_rows(x), "mean-plain", seed=11)
    _, fast = _summary(_rows(x), "mean-weighted", seed=11)
    assert fast.ci.low == pytest.approx(plain.ci.low, rel=1e-12)
    assert fast.ci.high == pytest.approx(plain.ci.high, rel=1e-12)


def test_intervals_depend_on_the_seed_only() -> None:
    x = np.random.default_rng(1).normal(size=200).tolist()
    a = _summary(_rows(x), "mean-weighted", seed=2)[1].ci
    b = _summary(_rows(x), "mean-weighted", seed=2)[1].ci
    c = _summary(_rows(x), "mean-weighted", seed=3)[1].ci
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)


def test_replicates_are_bounded_by_a_work_budget() -> None:
    assert resample_count(1_000, weighted=True) == RESAMPLES
    assert resample_count(1_000_000, weighted=True) == 100
    assert resample_count(1_000_000, weighted=False) == MIN_RESAMPLES
    assert resample_count(50_000, weighted=False) == 400
    assert resample_count(1_000, weighted=True, cap=200) == 200  # an evaluator's max_resamples


def test_skip_and_error_reasons_are_kept_with_the_result() -> None:
    values: list[Any] = [1.0, 2.0, 3.0, "bad", 5.0, 6.0]
    result, s = _summary(_rows(values), "mean-weighted", params={"mean-weighted": {}})
    (dataset,) = [r for r in result.results if r.record_id == ""]
    meta = dataset.scores[0].metadata
    assert meta["errors"] == {"ValueError: not a number": 1}
    assert s.errors == 1
    assert s.n == 5

    result, s = _summary(
        _rows([1.0, 2.0, 3.0, 4.0]), "mean-plain", params={"mean-plain": {"skip_odd": True}}
    )
    (dataset,) = [r for r in result.results if r.record_id == ""]
    assert dataset.scores[0].metadata["skipped"] == {"odd record": 2}
    assert s.skipped == 2
    assert s.mean == pytest.approx(2.0)


def test_nothing_eligible_names_the_most_common_reason() -> None:
    result, s = _summary(
        [{"id": "1", "output": {"json": 1.0}}, {"id": "3", "output": {"json": 2.0}}],
        "mean-plain",
        params={"mean-plain": {"skip_odd": True}},
    )
    (dataset,) = [r for r in result.results if r.record_id == ""]
    assert dataset.outcome is Outcome.SKIPPED
    assert dataset.reason == "no record was eligible: 2 of 2 records skipped: odd record"
    assert s.ci.method == "none"


def test_json_output_carries_dataset_results_with_their_metadata() -> None:
    result, _ = _summary(
        _rows([1.0, 2.0, 3.0, 4.0]), "mean-plain", params={"mean-plain": {"skip_odd": True}}
    )
    (entry,) = result.to_dict()["dataset_results"]
    assert entry == {
        "evaluator": "mean-plain",
        "ref": "t/mean-plain@0.0.0",
        "outcome": "scored",
        "scores": [
            {"name": "mean-plain", "number": 2.0, "metadata": {"skipped": {"odd record": 2}}}
        ],
    }


def test_a_structured_dataset_score_counts_its_records_and_says_where_it_is() -> None:
    rows = [{"id": str(i), "output": i % 2, "reference": (i // 2) % 2} for i in range(8)]
    result = evalsi.evaluate(rows, ["confusion-matrix"], store=":memory:")
    (m,) = result.metrics
    assert (m.kind, m.n, m.mean) == ("structured", 8, None)
    assert "(structured: see --format json)" in result.table()
    (entry,) = result.to_dict()["dataset_results"]
    assert entry["scores"][0]["structured"] == {"labels": ["0", "1"], "matrix": [[2, 2], [2, 2]]}


def _clustered_rows(groups: int = 40, size: int = 25) -> tuple[list[dict[str, Any]], Any]:
    rng = np.random.default_rng(8)
    effects = rng.normal(0.0, 1.0, groups)
    rows, means = [], []
    for g in range(groups):
        values = effects[g] + rng.normal(0.0, 0.1, size)
        means.append(values.mean())
        rows += [
            {"id": f"{g}-{i}", "output": {"json": float(v)}, "metadata": {"doc": f"d{g}"}}
            for i, v in enumerate(values)
        ]
    return rows, np.asarray(means)


def test_cluster_by_resamples_whole_clusters_for_dataset_metrics() -> None:
    rows, means = _clustered_rows()
    _, iid = _summary(rows, "mean-weighted")
    _, clustered = _summary(rows, "mean-weighted", cluster_by="doc")
    assert clustered.ci.method == "cluster-bootstrap-percentile"
    assert iid.ci.method == "bootstrap-percentile"
    # Equal cluster sizes: the mean is the mean of the cluster means, and its interval is that
    # of 40 values (scipy's t interval), not of 1000 independent ones.
    lo, hi = stats.t.interval(0.95, len(means) - 1, loc=means.mean(), scale=stats.sem(means))
    assert clustered.ci.high - clustered.ci.low == pytest.approx(hi - lo, rel=0.2)
    assert (iid.ci.high - iid.ci.low) < (hi - lo) / 3
    _, plain = _summary(rows, "mean-plain", cluster_by="doc")
    assert (plain.ci.low, plain.ci.high) == pytest.approx((clustered.ci.low, clustered.ci.high))


@pytest.mark.parametrize("name", ["mean-plain", "mean-weighted"])
@pytest.mark.parametrize("cluster_by", [None, "topic"])
def test_replicates_that_all_agree_give_no_interval_not_a_point(
    name: str, cluster_by: str | None
) -> None:
    # Every record 1.0 (a perfect classifier's accuracy): every replicate reduces to 1.0, so
    # resampling says nothing about spread; [1, 1] would claim certainty.
    rows = [{**row, "metadata": {"topic": int(row["id"]) % 4}} for row in _rows([1.0] * 40)]
    _, s = _summary(rows, name, cluster_by=cluster_by)
    method = "cluster-bootstrap-percentile" if cluster_by else "bootstrap-percentile"
    assert (s.mean, s.ci.low, s.ci.high, s.ci.method) == (1.0, None, None, method)
    # One different value is spread enough for an interval again.
    _, s = _summary(_rows([1.0] * 39 + [0.0]), name)
    assert s.ci.low is not None
    assert s.ci.high is not None
    assert s.ci.low < s.ci.high
