"""ml-classic ranking metrics (record scope, one query per record), through ``evalsi.evaluate``.

Golden vectors: a nearest-neighbour search over scikit-learn's wine data. For each query wine
the "search engine" ranks a pool of candidate wines by distance on two features (alcohol and
malic acid, so it makes mistakes); relevant candidates are those of the query's cultivar, with
gain 2 when their alcohol is within 0.5 of the query's, else 1.

The run's mean NDCG equals scikit-learn's ``ndcg_score`` on the y_true / y_score matrices built
here; MAP equals the mean of ``average_precision_score`` per query where every relevant id is
ranked (where some are not, AP divides by all relevant ids, as trec_eval, and scikit-learn's
AP would rank the missing ones last instead); MRR, recall@k, precision@k and hit rate equal
formulas written here with numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.datasets import load_wine

import evalsi
from evalsi.core import EvaluationResult, Outcome, ParamError
from evalsi.evaluators import Registry
from evalsi.packs import ml_classic

REG = Registry(ml_classic.EVALUATORS)


def evaluate(rows: list[Any], name: str, **params: Any) -> tuple[list[EvaluationResult], Any]:
    r = evalsi.evaluate(
        data=rows, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    return [x for x in r.results if x.evaluator == name], r.metric(name)


def mean(rows: list[Any], name: str, **params: Any) -> float:
    results, summary = evaluate(rows, name, **params)
    assert all(x.outcome is Outcome.SCORED for x in results), [x.reason for x in results]
    assert summary.n == len(rows)
    return float(summary.mean)


def one(output: Any, reference: Any, name: str, **params: Any) -> EvaluationResult:
    (result,), _ = evaluate([{"output": output, "reference": reference}], name, **params)
    return result


@pytest.fixture(scope="module")
def wine() -> dict[str, Any]:
    x, y = load_wine(return_X_y=True)
    order = np.random.default_rng(11).permutation(len(y))
    pool, queries = order[:60], order[60:100]
    ids = np.array([f"w{i:03d}" for i in range(len(y))])
    ranked, gains = [], []
    for q in queries:
        dist = np.abs(x[pool, :2] - x[q, :2]).sum(axis=1)
        ranked.append(ids[pool[np.argsort(dist, kind="stable")]])
        same = y[pool] == y[q]
        close = np.abs(x[pool, 0] - x[q, 0]) < 0.5
        gains.append(np.where(same, np.where(close, 2.0, 1.0), 0.0))
    return {"pool": ids[pool], "ranked": ranked, "gains": gains}


def rows_of(wine: dict[str, Any], depth: int | None, graded: bool) -> list[dict[str, Any]]:
    rows = []
    for ranked, gain in zip(wine["ranked"], wine["gains"], strict=True):
        relevant = {
            i: g for i, g in zip(wine["pool"].tolist(), gain.tolist(), strict=True) if g > 0
        }
        reference: Any = relevant if graded else sorted(relevant)
        rows.append({"output": ranked[:depth].tolist(), "reference": reference})
    return rows


def matrices(wine: dict[str, Any], depth: int, k: int, graded: bool) -> tuple[Any, Any]:
    """y_true / y_score over the pool plus k zero-gain pads, so that scikit-learn's top k holds
    exactly the first ``depth`` ranked ids (then pads): what was not retrieved scores lowest."""
    y_true, y_score = [], []
    for ranked, gain in zip(wine["ranked"], wine["gains"], strict=True):
        g = dict(zip(wine["pool"], gain if graded else (gain > 0).astype(float), strict=True))
        score = dict.fromkeys(wine["pool"], 0.0)
        for pos, i in enumerate(ranked[:depth]):
            score[i] = 1e6 - pos
        y_true.append([g[i] for i in wine["pool"]] + [0.0] * k)
        y_score.append([score[i] for i in wine["pool"]] + [1e3 - j for j in range(k)])
    return np.array(y_true), np.array(y_score)


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "binary"])
@pytest.mark.parametrize("k", [1, 5, 10, 25])  # 25: longer than the 15 ranked ids
def test_ndcg_at_k_equals_sklearn(wine: dict[str, Any], k: int, graded: bool) -> None:
    y_true, y_score = matrices(wine, 15, k, graded)
    expected = skm.ndcg_score(y_true, y_score, k=k)
    assert mean(rows_of(wine, 15, graded), "ndcg", k=k) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "binary"])
def test_ndcg_of_a_whole_ranking_equals_sklearn(wine: dict[str, Any], graded: bool) -> None:
    y_true, y_score = matrices(wine, 60, 0, graded)  # every candidate ranked
    assert mean(rows_of(wine, None, graded), "ndcg") == pytest.approx(
        skm.ndcg_score(y_true, y_score), abs=1e-9
    )


def test_map_equals_sklearn_average_precision_when_everything_is_ranked(
    wine: dict[str, Any],
) -> None:
    y_true, y_score = matrices(wine, 60, 0, graded=False)
    per_query = [skm.average_precision_score(t, s) for t, s in zip(y_true, y_score, strict=True)]
    assert mean(rows_of(wine, None, graded=True), "map") == pytest.approx(
        float(np.mean(per_query)), abs=1e-9
    )


def _hits(row: dict[str, Any]) -> tuple[np.ndarray, int]:
    relevant = list(row["reference"])
    return np.isin(np.array(row["output"]), relevant), len(relevant)


def _ap(row: dict[str, Any], k: int | None) -> float:
    hit, n_rel = _hits(row)
    hit = hit[:k]
    precision_at = np.cumsum(hit) / np.arange(1, hit.size + 1)
    return float((precision_at * hit).sum() / n_rel)


def _rr(row: dict[str, Any], k: int | None) -> float:
    hit = _hits(row)[0][:k]
    return 1.0 / (int(np.argmax(hit)) + 1) if hit.any() else 0.0


def _recall(row: dict[str, Any], k: int) -> float:
    hit, n_rel = _hits(row)
    return float(hit[:k].sum() / n_rel)


def _precision(row: dict[str, Any], k: int) -> float:
    return float(_hits(row)[0][:k].sum() / k)


def _hit(row: dict[str, Any], k: int) -> float:
    return float(_hits(row)[0][:k].any())


@pytest.mark.parametrize("k", [None, 3, 10])
def test_map_and_mrr_of_truncated_rankings(wine: dict[str, Any], k: int | None) -> None:
    rows = rows_of(wine, 15, graded=False)  # some relevant ids never retrieved
    params = {} if k is None else {"k": k}
    assert mean(rows, "map", **params) == pytest.approx(
        float(np.mean([_ap(r, k) for r in rows])), abs=1e-12
    )
    assert mean(rows, "mrr", **params) == pytest.approx(
        float(np.mean([_rr(r, k) for r in rows])), abs=1e-12
    )


@pytest.mark.parametrize("k", [1, 5, 10, 25])
def test_recall_precision_and_hit_rate_at_k(wine: dict[str, Any], k: int) -> None:
    rows = rows_of(wine, 15, graded=False)
    for name, fn in (("recall-at-k", _recall), ("precision-at-k", _precision), ("hit-rate", _hit)):
        expected = float(np.mean([fn(r, k) for r in rows]))
        assert mean(rows, name, k=k) == pytest.approx(expected, abs=1e-12), name


def test_at_k_metrics_default_to_ten(wine: dict[str, Any]) -> None:
    rows = rows_of(wine, 15, graded=False)
    assert mean(rows, "recall-at-k") == pytest.approx(np.mean([_recall(r, 10) for r in rows]))


def test_graded_reference_is_binary_for_the_other_metrics(wine: dict[str, Any]) -> None:
    graded, binary = rows_of(wine, 15, graded=True), rows_of(wine, 15, graded=False)
    for name in ("map", "mrr", "recall-at-k", "precision-at-k", "hit-rate"):
        assert mean(graded, name) == mean(binary, name), name
    assert mean(graded, "ndcg", k=5) != mean(binary, "ndcg", k=5)


def test_repeated_ids_count_once_at_their_first_position() -> None:
    # "a" twice: the second is a non-relevant position; "b" stays at rank 3
    ranking, reference = ["a", "a", "b", "x"], {"a": 1, "b": 2}
    y_true = np.array([[1.0, 0.0, 2.0, 0.0]])  # the repeat as a separate zero-gain item
    y_score = np.array([[4.0, 3.0, 2.0, 1.0]])
    assert one(ranking, reference, "ndcg").scores[0].number == pytest.approx(
        skm.ndcg_score(y_true, y_score), abs=1e-12
    )
    assert one(ranking, reference, "precision-at-k", k=3).scores[0].number == pytest.approx(2 / 3)
    assert one(ranking, reference, "map").scores[0].number == pytest.approx((1 + 2 / 3) / 2)


def test_scored_objects_are_ranked_by_score_ties_in_list_order() -> None:
    scored = [
        {"id": "c", "score": 0.2},
        {"id": "a", "score": 0.9},
        {"id": "d", "score": 0.5},
        {"id": "b", "score": 0.5},
    ]
    plain = ["a", "d", "b", "c"]
    for name in ("ndcg", "mrr", "map"):
        got = one(scored, ["b", "c"], name).scores[0].number
        assert got == one(plain, ["b", "c"], name).scores[0].number, name
    assert one(scored, ["b"], "mrr").scores[0].number == pytest.approx(1 / 3)


def test_ids_are_compared_as_strings_and_text_json_is_read() -> None:
    assert one([3, 1, 2], ["1"], "mrr").scores[0].number == 0.5
    assert one('["x", "y"]', "y", "mrr").scores[0].number == 0.5
    assert one(["x", "y"], '{"y": 3, "x": 0}', "hit-rate", k=1).scores[0].number == 0.0


def test_k_larger_than_the_list() -> None:
    assert one(["a"], ["a"], "precision-at-k", k=5).scores[0].number == pytest.approx(0.2)
    assert one(["a"], ["a"], "recall-at-k", k=5).scores[0].number == 1.0
    assert one(["a"], ["a", "b"], "ndcg", k=5).scores[0].number == pytest.approx(
        1 / (1 + 1 / np.log2(3))
    )
    assert one([], ["a"], "ndcg").scores[0].number == 0.0  # nothing retrieved: scored 0


@pytest.mark.parametrize("reference", [[], {"a": 0}, {"a": 0.0, "b": 0}])
def test_no_relevant_ids_is_skipped_with_a_reason(reference: Any) -> None:
    for name in ("ndcg", "mrr", "map", "recall-at-k", "precision-at-k", "hit-rate"):
        result = one(["a", "b"], reference, name)
        assert result.outcome is Outcome.SKIPPED, name
        assert "no relevant ids" in result.reason


@pytest.mark.parametrize(
    ("output", "reference", "reason"),
    [
        ("a b c", ["a"], "output must be a ranked list"),
        ({"a": 1}, ["a"], "output must be a ranked list"),
        (["a", {"id": "b"}], ["a"], "mixes ids and objects"),
        ([{"id": "a", "score": 1}, {"id": "b"}], ["a"], "every output item has a 'score'"),
        ([{"score": 1}], ["a"], "no 'id'"),
        ([{"id": "a", "score": "high"}], ["a"], "must be a number"),
        (["a"], {"a": -1}, "gains must be >= 0"),
        (["a"], {"a": "yes"}, "must be a number"),
        ("[1, 2", ["a"], "not valid JSON"),
    ],
)
def test_malformed_records_are_errors_with_the_reason(
    output: Any, reference: Any, reason: str
) -> None:
    result = one(output, reference, "ndcg")
    assert result.outcome is Outcome.ERROR
    assert reason in result.reason


def test_bad_k_fails_at_bind() -> None:
    for name in ("ndcg", "recall-at-k", "hit-rate"):
        with pytest.raises(ParamError, match="'k' must be >= 1"):
            evaluate([{"output": ["a"], "reference": ["a"]}], name, k=0)


def test_the_mean_gets_an_interval(wine: dict[str, Any]) -> None:
    rows = rows_of(wine, 15, graded=True)
    _, summary = evaluate(rows, "ndcg", k=10)
    assert summary.ci.low < summary.mean < summary.ci.high
    assert summary.ci.low >= 0.0
    assert summary.ci.high <= 1.0
