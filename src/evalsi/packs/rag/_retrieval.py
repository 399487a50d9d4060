"""Retrieval metrics of one query: context precision / recall at k, NDCG and MRR.

Record scope: each record is one query, its ``context`` the retrieved chunks in rank order and
its relevance labels as ``_labels`` reads them; the run's mean of a metric is the dataset's
(macro-averaged over queries). Every score explains itself: the ranks that held a relevant
chunk and the relevant chunks that were not retrieved.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt

from evalsi.core import ParamError, Record, Score
from evalsi.evaluators import Evaluator, Skip
from evalsi.packs._declare import builtin, clip, few, number
from evalsi.packs.rag._labels import Labels, gains, labels_of, retrieved_keys

_SHOWN = 5


def dcg(gain: npt.NDArray[np.float64]) -> float:
    """Discounted cumulative gain with linear gains: sum of ``gain_i / log2(i + 1)``."""
    return float(np.dot(gain, 1.0 / np.log2(np.arange(2, len(gain) + 2, dtype=np.float64))))


_ARGS = """

    Args:
        k: the cutoff (default: every retrieved chunk).
        id_key: the field of a chunk object that holds its id (default: ``id``, ``doc_id``
            or ``chunk_id``, the first present).
    """


class _Retrieval:
    """Shared params and evidence; subclasses compute one number from the gains."""

    metric: ClassVar[str] = ""

    def __init_subclass__(cls) -> None:
        cls.__doc__ = (cls.__doc__ or "").rstrip() + _ARGS  # the params' docs, written once

    def __init__(self, *, k: int | None = None, id_key: str = "") -> None:
        if k is not None and k < 1:
            raise ParamError(f"{self.metric}: param 'k' must be at least 1, got {k}")
        self.k = k
        self.id_key = id_key

    def value(self, top: npt.NDArray[np.float64], labels: Labels, depth: int) -> float:
        raise NotImplementedError

    def __call__(self, record: Record) -> Score:
        labels = labels_of(record)
        keys = retrieved_keys(record, labels, self.id_key)
        gain = gains(keys, labels)
        depth = self.k if self.k is not None else len(gain)
        top = gain[:depth]
        number = self.value(top, labels, depth)
        ranks = [int(i) + 1 for i in np.flatnonzero(top > 0)]
        found = {keys[r - 1] for r in ranks}
        missing = [key for key, g in labels.grades.items() if g > 0 and key not in found]
        return Score(
            number=number,
            explanation=_evidence(ranks, len(top), self.k, labels, missing),
            metadata={
                "k": self.k,
                "retrieved": len(gain),
                "relevant_ranks": ranks,
                "relevant": labels.relevant,
                "missing": missing[:_SHOWN],
                "matched_by": labels.by,
                "labels": labels.source,
            },
        )


def _evidence(
    ranks: list[int], shown: int, k: int | None, labels: Labels, missing: list[str]
) -> str:
    where = f"the top {k}" if k is not None else f"the {shown} retrieved"
    if ranks:
        listed = ", ".join(map(str, ranks))
        head = f"relevant at rank{'s' if len(ranks) > 1 else ''} {listed} of {where}"
    else:
        head = f"no relevant chunk in {where}"
    if not labels.relevant:
        return f"{head}; {labels.source} lists no relevant chunk"
    tail = f"{len(ranks)} of {labels.relevant} relevant chunks found"
    if missing:
        tail += f" (missing: {few([clip(m, 40) for m in missing], _SHOWN)})"
    return f"{head}; {tail}"


def _need_relevant(metric: str, labels: Labels) -> None:
    if not labels.relevant:
        raise Skip(f"{labels.source} lists no relevant chunk: {metric} is undefined")


class ContextPrecision(_Retrieval):
    """Context precision at k: the share of the top k retrieved chunks that are relevant.

    ``hits / k``, where hits counts the relevant chunks among the first k (a slot left empty
    because fewer than k were retrieved counts as not relevant, as in trec_eval's P@k); without
    ``k``, ``hits / retrieved``. A chunk's relevance comes from the record's labels (reference
    ``{"context_ids": [...]}`` or metadata.relevant_ids; see the rag pack guide); a chunk
    retrieved twice counts once. A query with no relevant chunk scores 0.
    """

    metric = "context-precision"

    def value(self, top: npt.NDArray[np.float64], labels: Labels, depth: int) -> float:
        return float(np.count_nonzero(top > 0)) / depth


class ContextRecall(_Retrieval):
    """Context recall at k: the share of the relevant chunks found among the top k retrieved.

    ``hits / relevant``; a query whose labels list no relevant chunk is SKIPPED (there is
    nothing to find).
    """

    metric = "context-recall"

    def value(self, top: npt.NDArray[np.float64], labels: Labels, depth: int) -> float:
        _need_relevant(self.metric, labels)
        return float(np.count_nonzero(top > 0)) / labels.relevant


class ContextNdcg(_Retrieval):
    """Normalised discounted cumulative gain of the ranking at k (as scikit-learn's ndcg_score).

    ``DCG@k / IDCG@k`` with linear gains: ``DCG@k = sum(grade_i / log2(i + 1))`` over the first
    k ranks, IDCG@k the same for the best possible order of every labelled grade. Grades are 1
    for listed ids, or the grades of a ``{id: grade}`` object. Without ``k``, k is the number
    retrieved. A query with no relevant chunk is SKIPPED.
    """

    metric = "context-ndcg"

    def value(self, top: npt.NDArray[np.float64], labels: Labels, depth: int) -> float:
        _need_relevant(self.metric, labels)
        ideal = np.sort(np.fromiter(labels.grades.values(), dtype=np.float64))[::-1][:depth]
        return dcg(top) / dcg(ideal)


class ContextMrr(_Retrieval):
    """Reciprocal rank of the first relevant chunk within the top k (0 when there is none).

    The run's mean over queries is the mean reciprocal rank. A query with no relevant chunk is
    SKIPPED.
    """

    metric = "context-mrr"

    def value(self, top: npt.NDArray[np.float64], labels: Labels, depth: int) -> float:
        _need_relevant(self.metric, labels)
        hits = np.flatnonzero(top > 0)
        return 1.0 / float(hits[0] + 1) if len(hits) else 0.0


def _declare(cls: type[_Retrieval], desc: str) -> Evaluator:
    name = cls.metric
    return builtin(
        "rag",
        name,
        number(name, desc),
        requires=("context",),
        example=f"evalsi eval --data examples/rag/rag.jsonl --evaluators {name} --param {name}.k=3",
    )(cls)


context_precision = _declare(ContextPrecision, "relevant share of the top k chunks, 0..1")
context_recall = _declare(ContextRecall, "share of the relevant chunks in the top k, 0..1")
context_ndcg = _declare(ContextNdcg, "NDCG of the ranking at k, 0..1")
context_mrr = _declare(ContextMrr, "reciprocal rank of the first relevant chunk, 0..1")
