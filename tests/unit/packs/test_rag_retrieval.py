"""rag retrieval metrics on a real retrieval problem: equal to reference formulas and to
scikit-learn's ndcg_score to 1e-12, through the public ``evalsi.evaluate``.

Golden data: scikit-learn's digits. Each query image retrieves its 10 nearest corpus images
(Euclidean distance over a quarter of the pixels); a corpus image is relevant when it shows
the same digit (binary labels), or graded 2 for the same digit and 1 for a neighbouring digit
(graded labels).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.metrics import ndcg_score

import evalsi
from evalsi.core import EvaluationResult, Outcome, ParamError
from evalsi.evaluators import Registry
from evalsi.packs import rag

REG = Registry(rag.EVALUATORS)
METRICS = ("context-precision", "context-recall", "context-ndcg", "context-mrr")


def results(rows: list[dict[str, Any]], name: str, **params: Any) -> dict[str, EvaluationResult]:
    r = evalsi.evaluate(
        data=rows, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    return {x.record_id: x for x in r.results if x.evaluator == name}


def numbers(rows: list[dict[str, Any]], name: str, **params: Any) -> dict[str, float]:
    out = {}
    for rid, result in results(rows, name, **params).items():
        assert result.outcome is Outcome.SCORED, (rid, result.reason)
        value = result.scores[0].number
        assert value is not None
        out[rid] = value
    return out


def one(row: dict[str, Any], name: str, **params: Any) -> EvaluationResult:
    (result,) = results([{"id": "q", **row}], name, **params).values()
    return result


# -- golden data: nearest-neighbour retrieval over scikit-learn's digits ------------------------


@pytest.fixture(scope="module")
def digits() -> dict[str, Any]:
    x, y = load_digits(return_X_y=True)
    x = x[:, ::4]  # a quarter of the pixels: an imperfect retriever, so the metrics vary
    corpus, queries = np.arange(0, 240), np.arange(1500, 1540)
    ranked, binary, graded = {}, {}, {}
    for q in queries:
        dist = np.linalg.norm(x[corpus] - x[q], axis=1)
        order = corpus[np.argsort(dist, kind="stable")][:10]
        qid = f"q{q}"
        ranked[qid] = [f"img{i}" for i in order]
        binary[qid] = {f"img{i}": 1.0 for i in corpus if y[i] == y[q]}
        graded[qid] = {f"img{i}": float(max(0, 2 - abs(int(y[i]) - int(y[q])))) for i in corpus}
        graded[qid] = {k: v for k, v in graded[qid].items() if v > 0}
    return {"ranked": ranked, "binary": binary, "graded": graded}


def rows_of(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    rows = []
    for qid, ranked in data["ranked"].items():
        labels = data[kind][qid]
        ids: Any = sorted(labels) if kind == "binary" else labels
        rows.append(
            {
                "id": qid,
                "input": f"images like {qid}",
                "context": [{"id": d, "text": f"image {d}"} for d in ranked],
                "reference": {"context_ids": ids},
            }
        )
    return rows


# Reference formulas, written from the textbook definitions (no code shared with evalsi).
def ref_precision(ranked: list[str], rel: set[str], k: int | None) -> float:
    k = k or len(ranked)
    return sum(d in rel for d in ranked[:k]) / k


def ref_recall(ranked: list[str], rel: set[str], k: int | None) -> float:
    return len(set(ranked[: k or len(ranked)]) & rel) / len(rel)


def ref_rr(ranked: list[str], rel: set[str], k: int | None) -> float:
    for i, d in enumerate(ranked[: k or len(ranked)]):
        if d in rel:
            return 1.0 / (i + 1)
    return 0.0


def ref_ndcg_loop(ranked: list[str], grades: dict[str, float], k: int | None) -> float:
    k = k or len(ranked)
    seen: set[str] = set()
    dcg = 0.0
    for i, d in enumerate(ranked[:k]):
        if d not in seen:
            dcg += grades.get(d, 0.0) / math.log2(i + 2)
            seen.add(d)
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def sk_ndcg(ranked: list[str], grades: dict[str, float], k: int | None) -> float:
    """scikit-learn's NDCG: the retrieved documents scored by rank, the unretrieved relevant
    ones below them (only valid for k <= retrieved, where they stay out of the top k)."""
    docs = ranked + [d for d in grades if d not in ranked]
    y_true = [[grades.get(d, 0.0) for d in docs]]
    y_score = [
        [float(len(ranked) - i) for i in range(len(ranked))] + [0.0] * (len(docs) - len(ranked))
    ]
    return float(ndcg_score(y_true, y_score, k=k or len(ranked)))


REFS = {
    "context-precision": ref_precision,
    "context-recall": ref_recall,
    "context-mrr": ref_rr,
}


@pytest.mark.parametrize("k", [None, 1, 3, 10])
@pytest.mark.parametrize("name", sorted(REFS))
def test_binary_metrics_equal_the_reference_formulas(
    digits: dict[str, Any], name: str, k: int | None
) -> None:
    rows = rows_of(digits, "binary")
    params = {} if k is None else {"k": k}
    got = numbers(rows, name, **params)
    want = {
        qid: REFS[name](ranked, set(digits["binary"][qid]), k)
        for qid, ranked in digits["ranked"].items()
    }
    assert got == pytest.approx(want, abs=1e-12)
    assert len(set(want.values())) > (1 if k == 1 else 2)  # the golden data is not degenerate
    r = evalsi.evaluate(rows, [name], params={name: params}, registry=REG, store=":memory:")
    assert r.metric(name).mean == pytest.approx(np.mean(list(want.values())), abs=1e-12)


@pytest.mark.parametrize("k", [None, 1, 3, 5, 10])
@pytest.mark.parametrize("kind", ["binary", "graded"])
def test_ndcg_equals_scikit_learn(digits: dict[str, Any], kind: str, k: int | None) -> None:
    got = numbers(rows_of(digits, kind), "context-ndcg", **({} if k is None else {"k": k}))
    for qid, ranked in digits["ranked"].items():
        grades = digits[kind][qid]
        assert got[qid] == pytest.approx(sk_ndcg(ranked, grades, k), abs=1e-12), qid
        assert got[qid] == pytest.approx(ref_ndcg_loop(ranked, grades, k), abs=1e-12), qid
    distinct = {1: 1 if kind == "binary" else 2}.get(k or 0, 3)
    assert len(set(got.values())) > distinct  # the golden data is not degenerate


def test_cutoff_beyond_the_retrieved_list() -> None:
    row = {
        "context": [{"id": "a"}, {"id": "x"}, {"id": "b"}],
        "reference": {"context_ids": {"a": 1, "b": 2, "c": 3, "d": 1}},
    }
    ranked, grades = ["a", "x", "b"], {"a": 1.0, "b": 2.0, "c": 3.0, "d": 1.0}
    assert one(row, "context-ndcg", k=6).scores[0].number == pytest.approx(
        ref_ndcg_loop(ranked, grades, 6), abs=1e-12
    )
    assert one(row, "context-precision", k=6).scores[0].number == pytest.approx(2 / 6)
    assert one(row, "context-recall", k=6).scores[0].number == pytest.approx(2 / 4)


def test_a_chunk_retrieved_twice_counts_once() -> None:
    row = {"context": [{"id": "a"}, {"id": "a"}, {"id": "b"}], "reference": {"context_ids": ["a"]}}
    assert one(row, "context-precision").scores[0].number == pytest.approx(1 / 3)
    assert one(row, "context-recall").scores[0].number == 1.0
    assert one(row, "context-ndcg").scores[0].number == 1.0
    assert one(row, "context-mrr").scores[0].metadata["relevant_ranks"] == [1]


def test_evidence_names_ranks_and_missing_chunks() -> None:
    row = {
        "context": [{"id": "x"}, {"id": "b"}, {"id": "y"}],
        "reference": {"answer": "...", "context_ids": ["b", "c"]},
    }
    score = one(row, "context-recall").scores[0]
    assert score.number == 0.5
    assert score.explanation == (
        "relevant at rank 2 of the 3 retrieved; 1 of 2 relevant chunks found (missing: c)"
    )
    assert score.metadata["labels"] == "reference.context_ids"
    mrr = one(row, "context-mrr", k=1).scores[0]
    assert mrr.number == 0.0
    assert mrr.explanation.startswith("no relevant chunk in the top 1;")


# -- the other shapes of chunks and labels -------------------------------------------------------


def test_passages_match_labelled_texts_after_normalising() -> None:
    row = {
        "context": [
            "Mars has two small moons, Phobos and Deimos.",
            "Apollo 11 landed on the Moon on 20 July 1969.",
        ],
        "reference": {"context_texts": ["  apollo 11 landed on the moon on 20 July 1969. "]},
    }
    assert one(row, "context-mrr").scores[0].number == 0.5
    row["metadata"] = {"relevant_texts": ["Mars has two small moons, Phobos and Deimos."]}
    del row["reference"]
    assert one(row, "context-mrr").scores[0].number == 1.0


@pytest.mark.parametrize(
    ("row", "params"),
    [
        ({"context": ["d3", "d1"], "relevant_ids": ["d1"]}, {}),  # bare ids, top-level labels
        ({"context": [{"doc_id": 3}, {"doc_id": 1}], "metadata": {"context_ids": [1]}}, {}),
        ({"context": [{"id": "d3"}, {"id": "d1"}], "reference": {"relevant_ids": ["d1"]}}, {}),
        (
            {"context": [{"key": "d3"}, {"key": "d1"}], "reference": {"context_ids": ["d1"]}},
            {"id_key": "key"},
        ),
    ],
)
def test_accepted_alternative_shapes(row: dict[str, Any], params: dict[str, Any]) -> None:
    result = one(row, "context-mrr", **params)
    assert result.outcome is Outcome.SCORED, result.reason
    assert result.scores[0].number == 0.5


def test_reference_labels_win_over_metadata() -> None:
    row = {
        "context": [{"id": "a"}, {"id": "b"}],
        "reference": {"context_ids": ["b"]},
        "metadata": {"relevant_ids": ["a"]},
    }
    assert one(row, "context-mrr").scores[0].number == 0.5


def test_no_labels_or_no_context_is_skipped_with_a_reason() -> None:
    unlabelled = one({"context": [{"id": "a"}], "reference": "Paris"}, "context-precision")
    assert unlabelled.outcome is Outcome.SKIPPED
    assert "no relevance labels" in unlabelled.reason
    assert 'reference {"context_ids": [...]}' in unlabelled.reason
    empty = one({"reference": {"context_ids": ["a"]}}, "context-recall")
    assert empty.outcome is Outcome.SKIPPED
    assert empty.reason == "record has no context"


def test_a_query_with_nothing_relevant() -> None:
    row = {"context": [{"id": "a"}, {"id": "b"}], "reference": {"context_ids": []}}
    assert one(row, "context-precision").scores[0].number == 0.0
    for name in ("context-recall", "context-ndcg", "context-mrr"):
        result = one(row, name)
        assert result.outcome is Outcome.SKIPPED
        assert (
            result.reason == f"reference.context_ids lists no relevant chunk: {name} is undefined"
        )
    zero_grades = {"context": [{"id": "a"}], "reference": {"context_ids": {"a": 0}}}
    assert one(zero_grades, "context-ndcg").outcome is Outcome.SKIPPED


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        (
            {"context": [{"id": "a"}], "reference": {"context_ids": "a"}},
            "reference.context_ids: expected a list of ids or an object",
        ),
        (
            {"context": [{"id": "a"}], "reference": {"context_ids": {"a": -1}}},
            "the grade of 'a' must be a finite number >= 0",
        ),
        (
            {"context": [{"id": "a"}], "reference": {"context_ids": [True]}},
            "expected chunk ids (strings or integers), got True",
        ),
        (
            {
                "context": [{"id": "a"}, "Paris is the capital."],
                "reference": {"context_ids": ["a"]},
            },
            "context chunk 2 has no id (reference.context_ids lists ids)",
        ),
        (
            {"context": [{"id": "a"}], "reference": {"context_texts": ["a passage"]}},
            "context chunk 1 holds no passage to match reference.context_texts against",
        ),
    ],
)
def test_malformed_labels_or_chunks_are_errors_with_a_reason(
    row: dict[str, Any], needle: str
) -> None:
    result = one(row, "context-precision")
    assert result.outcome is Outcome.ERROR
    assert result.reason.startswith("ValueError: ")
    assert needle in result.reason


@pytest.mark.parametrize("name", METRICS)
def test_k_must_be_positive(name: str) -> None:
    with pytest.raises(ParamError, match=f"{name}: param 'k' must be at least 1, got 0"):
        REG.resolve(name).bind({"k": 0})
