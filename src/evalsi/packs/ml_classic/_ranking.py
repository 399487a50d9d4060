"""Ranking metrics, one query per record: NDCG, MRR, MAP, recall@k, precision@k, hit rate.

Record shape: ``output`` is the ranked list of ids, best first (a JSON list of ids, or of
``{"id": …, "score": …}`` objects, ordered by score, highest first); ``reference`` the relevant
ids (a JSON list) or graded relevance ``{id: gain}`` (gain >= 0; 0 means not relevant). Ids
are compared as strings (JSON ``3`` and ``"3"`` are the same id).

Each metric is record-scope: one value per query, so the run's mean over records is the
usual dataset figure (mean NDCG, MRR, MAP…) and gets its confidence interval like any mean.

Rules stated once for all of them:
- only the first ``k`` positions count (``k`` larger than the list: the whole list);
- an id repeated in the ranking counts at its first position only; later repeats are
  non-relevant positions (no double credit, and the wasted position is not skipped);
- a query with no relevant id is SKIPPED: every metric divides by what is relevant;
- relevant ids the ranking never retrieves count as misses (MAP and recall divide by all
  relevant ids, NDCG's ideal ranking holds all of them).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import orjson

from evalsi.core import Content, Record, Score
from evalsi.evaluators import Skip
from evalsi.packs._declare import check_at_least
from evalsi.packs.ml_classic._extract import label_of


def _json_of(content: Content, what: str) -> Any:
    if content.kind == "json":
        return content.value
    if content.kind == "text":
        text = content.value.strip()
        if text[:1] in ("[", "{"):
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError as e:
                raise ValueError(f"{what} is not valid JSON: {e}") from None
        return text
    raise ValueError(f"{what} must be JSON (a list of ids), got {content.kind} content")


_ID = (str, numbers.Real)
"""What an id may be: text or a number (compared as its label string)."""


def _number(value: Any, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value}")
    return float(value)


def read_ranking(content: Content) -> list[str]:
    """The ranked ids, best first."""
    items = _json_of(content, "output")
    if not isinstance(items, list):
        raise ValueError(
            "output must be a ranked list of ids or of {'id', 'score'} objects, "
            f"got {type(items).__name__}"
        )
    if all(isinstance(item, _ID) for item in items):
        return [label_of(item) for item in items]
    if not all(isinstance(item, dict) for item in items):
        raise ValueError("output mixes ids and objects; use one form for every item")
    for i, item in enumerate(items):
        if item.get("id") is None:
            raise ValueError(f"output item {i} has no 'id'")
    scored = ["score" in item for item in items]
    if any(scored) and not all(scored):
        raise ValueError("either every output item has a 'score' or none does")
    if all(scored):  # stable: equal scores keep their order in the list
        keyed = [(-_number(item["score"], f"score of item {i}"), i) for i, item in enumerate(items)]
        items = [items[i] for _, i in sorted(keyed)]
    return [label_of(item["id"]) for item in items]


def read_relevance(content: Content) -> dict[str, float]:
    """Relevant ids with their gain: a list gives each gain 1, an object gives its gains."""
    value = _json_of(content, "reference")
    if isinstance(value, list):
        return {label_of(item): 1.0 for item in value}
    if isinstance(value, dict):
        gains = {label_of(key): _number(gain, f"gain of {key!r}") for key, gain in value.items()}
        negative = [key for key, gain in gains.items() if gain < 0]
        if negative:
            raise ValueError(f"gains must be >= 0; {negative[:5]} are negative")
        return gains
    return {label_of(value): 1.0}


def gains_by_position(ranking: list[str], relevant: dict[str, float], k: int | None) -> list[float]:
    """The gain at each of the first k positions; a repeated id gains nothing again."""
    seen: set[str] = set()
    out = []
    for item in ranking[:k]:
        out.append(0.0 if item in seen else relevant.get(item, 0.0))
        seen.add(item)
    return out


class _RankMetric:
    """Reads the query, applies the shared rules, leaves the formula to ``value``."""

    label = "ranking metric"

    def __init__(self, *, k: int | None = None) -> None:
        if k is not None:
            check_at_least(self.label, "k", k, 1)
        self.k = k

    def __call__(self, record: Record) -> Score:
        gains = read_relevance(record.reference)  # type: ignore[arg-type]
        relevant = {key: gain for key, gain in gains.items() if gain > 0}
        if not relevant:
            raise Skip("reference has no relevant ids (every metric divides by them)")
        ranking = read_ranking(record.output)  # type: ignore[arg-type]
        at = gains_by_position(ranking, relevant, self.k)
        value, note = self.value(at, relevant)
        cut = f"top {self.k}" if self.k is not None else "whole ranking"
        return Score(number=value, explanation=f"{note} ({cut}, {len(ranking)} ranked)")

    def value(self, at: list[float], relevant: dict[str, float]) -> tuple[float, str]:
        raise NotImplementedError  # pragma: no cover


def _dcg(gains: list[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g)


class Ndcg(_RankMetric):
    """Normalised discounted cumulative gain of the ranking, cut at k (linear gains).

    DCG = sum of gain_i / log2(i + 1) over ranks i <= k, divided by the DCG of the ideal
    ordering of every relevant id, as scikit-learn's ndcg_score and trec_eval.
    """

    label = "ndcg"

    def value(self, at: list[float], relevant: dict[str, float]) -> tuple[float, str]:
        ideal = sorted(relevant.values(), reverse=True)[: self.k]
        return _dcg(at) / _dcg(ideal), f"{len(relevant)} relevant ids"


class Mrr(_RankMetric):
    """Reciprocal rank of the first relevant id (0 when none is in the top k)."""

    label = "mrr"

    def value(self, at: list[float], relevant: dict[str, float]) -> tuple[float, str]:
        for i, gain in enumerate(at):
            if gain:
                return 1.0 / (i + 1), f"first relevant id at rank {i + 1}"
        return 0.0, "no relevant id retrieved"


class AveragePrecision(_RankMetric):
    """Average precision of the ranking; the run's mean is MAP.

    The precision at each relevant id's rank (<= k), summed and divided by the number of
    relevant ids, retrieved or not (trec_eval's map).
    """

    label = "map"

    def value(self, at: list[float], relevant: dict[str, float]) -> tuple[float, str]:
        hits, total = 0, 0.0
        for i, gain in enumerate(at):
            if gain:
                hits += 1
                total += hits / (i + 1)
        return total / len(relevant), f"{hits} of {len(relevant)} relevant ids retrieved"


class _AtK(_RankMetric):
    """A metric of the top k, k 10 unless given."""

    def __init__(self, *, k: int = 10) -> None:
        super().__init__(k=k)


class RecallAtK(_AtK):
    """Relevant ids in the top k over all relevant ids."""

    label = "recall-at-k"

    def value(self, at: list[float], relevant: dict[str, float]) -> tuple[float, str]:
        hits = sum(1 for gain in at if gain)
        return hits / len(relevant), f"{hits} of {len(relevant)} relevant ids"


class PrecisionAtK(_AtK):
    """Relevant ids in the top k over k (a list shorter than k still divides by k)."""

    label = "precision-at-k"

    def value(self, at: list[float], relevant: dict[str, float]) -> tuple[float, str]:
        hits = sum(1 for gain in at if gain)
        assert self.k is not None
        return hits / self.k, f"{hits} relevant ids"


class HitRate(_AtK):
    """1 when any relevant id is in the top k, else 0; the run's mean is the hit rate."""

    label = "hit-rate"

    def value(self, at: list[float], relevant: dict[str, float]) -> tuple[float, str]:
        hit = any(at)
        return (1.0 if hit else 0.0), ("a relevant id" if hit else "no relevant id")
