"""Corpus BLEU, chrF / chrF++ and TER from sacrebleu's sufficient statistics.

A corpus score is not a mean of sentence scores: sacrebleu sums per-sentence statistics
(n-gram matches and totals, lengths, edits) over the corpus and computes the score once from
the sums. ``map`` therefore extracts one sentence's statistics with sacrebleu's own code, and
``reduce`` sums them and calls sacrebleu's own ``_compute_score_from_stats``, so the value is
sacrebleu's ``corpus_bleu`` / ``corpus_chrf`` / ``corpus_ter`` (checked in tests).

Sums of statistics take weights naturally, so these metrics implement ``prepare`` /
``reduce_weighted``: a bootstrap resample is one matrix-vector product instead of a re-read
of the corpus (the dataset-scope bootstrap of ``runs/_dataset_scope.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from evalsi.core import ParamError, Record, Score, UserError
from evalsi.evaluators import WeightedReduce
from evalsi.packs._declare import check_at_least
from evalsi.packs.text._inputs import hypothesis, need_module, references

F64 = npt.NDArray[np.float64]
Row = list[float]
"""One sentence's sufficient statistics, then its number of references (last column)."""

Tokenize = Literal["13a", "intl", "zh", "char", "none", "ja-mecab", "ko-mecab"]
"""sacrebleu's tokenizers that work offline (spm / flores download a model: not offered)."""
Smooth = Literal["exp", "floor", "add-k", "none"]


@dataclass(frozen=True, slots=True)
class Stats:
    """The per-sentence statistics as one (sentences x statistics) matrix, and the signature."""

    matrix: F64
    signature: str


def _build(metric: str, cls: str, **kwargs: Any) -> Any:
    """A sacrebleu metric object; a tokenizer that cannot load is a bind-time UserError."""
    factory = getattr(need_module(metric, "sacrebleu.metrics"), cls)
    try:
        return factory(**kwargs)
    except (ImportError, RuntimeError, OSError, AssertionError) as e:
        why = " ".join(str(e).split()) or type(e).__name__
        raise UserError(f"{metric}: sacrebleu cannot be set up with {kwargs}: {why}") from e


class SacreStats:
    """A sacrebleu metric object and the statistics of one record under it."""

    metric_name: ClassVar[str] = ""
    _metric: Any

    def _bind(self, metric: Any) -> None:
        self._metric = metric
        self._pre = metric._preprocess_segment
        self._ref_info = metric._extract_reference_info
        self._seg_stats = metric._compute_segment_statistics

    def stats(self, record: Record) -> Row:
        """sacrebleu's statistics of one (hypothesis, references) pair, then len(references)."""
        name = self.metric_name
        hyp = hypothesis(record, name)
        refs = references(record, name)
        pre = self._pre
        row: Row = self._seg_stats(pre(hyp), self._ref_info([pre(r) for r in refs]))
        row.append(len(refs))
        return row

    def signature(self, nrefs: int) -> str:
        """sacrebleu's reproducibility signature (it needs the number of references first;
        -1 means "var", a varying number per sentence, as sacrebleu prints it)."""
        self._metric.num_refs = nrefs
        return str(self._metric.get_signature())


class CorpusStats(SacreStats, WeightedReduce[Stats, Score]):
    """map(): one sentence's sacrebleu statistics; reduce(): the corpus score from their sum."""

    map = SacreStats.stats

    def prepare(self, values: Sequence[Row]) -> Stats:
        table = np.asarray(values, dtype=np.float64)
        counts = np.unique(table[:, -1])
        nrefs = int(counts[0]) if counts.size == 1 else -1
        return Stats(np.ascontiguousarray(table[:, :-1]), self.signature(nrefs))

    def reduce_weighted(self, prepared: Stats, weights: F64) -> Score:
        """The corpus score of the sentences repeated ``weights`` times (resample counts)."""
        totals = np.asarray(weights, dtype=np.float64) @ prepared.matrix
        return self.describe(self._metric._compute_score_from_stats(totals.tolist()), prepared)

    def describe(self, score: Any, prepared: Stats) -> Score:
        raise NotImplementedError


def _bleu_metric(
    metric: str,
    tokenize: str,
    lowercase: bool,
    smooth_method: str,
    smooth_value: float | None,
    max_ngram_order: int,
    effective_order: bool,
) -> Any:
    check_at_least(metric, "max_ngram_order", max_ngram_order, 1)
    if smooth_value is not None and smooth_method not in ("floor", "add-k"):
        raise ParamError(
            f"{metric}: param 'smooth_value' applies to smooth_method floor or add-k only, "
            f"not {smooth_method!r}"
        )
    if smooth_value is not None and not smooth_value > 0:
        raise ParamError(f"{metric}: param 'smooth_value' must be > 0, got {smooth_value}")
    return _build(
        metric,
        "BLEU",
        tokenize=tokenize,
        lowercase=lowercase,
        smooth_method=smooth_method,
        smooth_value=smooth_value,
        max_ngram_order=max_ngram_order,
        effective_order=effective_order,
    )


class Bleu(CorpusStats):
    """Corpus BLEU (sacrebleu), 0-100: n-gram matches summed over the whole dataset.

    Args:
        tokenize: sacrebleu tokenizer (13a, intl, zh, char, none; ja-mecab and ko-mecab
            need their own packages).
        lowercase: compare lowercased text.
        smooth_method: exp (sacrebleu's default), floor, add-k or none.
        smooth_value: the value for floor (default 0.1) or add-k (default 1).
        max_ngram_order: the longest n-gram counted.
        effective_order: leave out n-gram orders with no match (sentence-level use).
    """

    metric_name = "bleu"

    def __init__(
        self,
        *,
        tokenize: Tokenize = "13a",
        lowercase: bool = False,
        smooth_method: Smooth = "exp",
        smooth_value: float | None = None,
        max_ngram_order: int = 4,
        effective_order: bool = False,
    ) -> None:
        self._bind(
            _bleu_metric(
                self.metric_name,
                *(tokenize, lowercase, smooth_method, smooth_value),
                *(max_ngram_order, effective_order),
            )
        )

    def describe(self, score: Any, prepared: Stats) -> Score:
        signature = prepared.signature
        meta = {
            "signature": signature,
            "precisions": [float(p) for p in score.precisions],
            "bp": float(score.bp),
            "sys_len": int(score.sys_len),
            "ref_len": int(score.ref_len),
        }
        line = score.format(signature=signature)  # sacrebleu's own line, with the signature
        return Score(number=float(score.score), explanation=line, metadata=meta)


class Chrf(CorpusStats):
    """Corpus chrF (sacrebleu), 0-100; word_order=2 makes it chrF++.

    Args:
        char_order: the longest character n-gram.
        word_order: the longest word n-gram (0: chrF, 2: chrF++).
        beta: weight of recall against precision.
        lowercase: compare lowercased text.
        whitespace: keep whitespace in character n-grams.
        eps_smoothing: chrF++.py / NLTK / Moses style smoothing instead of sacrebleu's
            effective order.
    """

    metric_name = "chrf"

    def __init__(
        self,
        *,
        char_order: int = 6,
        word_order: int = 0,
        beta: int = 2,
        lowercase: bool = False,
        whitespace: bool = False,
        eps_smoothing: bool = False,
    ) -> None:
        name = self.metric_name
        check_at_least(name, "char_order", char_order, 1)
        check_at_least(name, "word_order", word_order, 0)
        check_at_least(name, "beta", beta, 0)
        self._bind(
            _build(
                name,
                "CHRF",
                char_order=char_order,
                word_order=word_order,
                beta=beta,
                lowercase=lowercase,
                whitespace=whitespace,
                eps_smoothing=eps_smoothing,
            )
        )

    def describe(self, score: Any, prepared: Stats) -> Score:
        return Score(
            number=float(score.score),
            explanation=score.format(signature=prepared.signature),
            metadata={"signature": prepared.signature, "variant": score.name},
        )


class Ter(CorpusStats):
    """Corpus translation edit rate (sacrebleu), 0-100+; lower is better.

    Edits per reference word x 100: above 100 when the hypothesis needs more edits than the
    reference has words.

    Args:
        normalized: apply Tercom's normalisation (punctuation, XML entities).
        no_punct: remove punctuation.
        asian_support: treat CJK characters specially (with normalized / no_punct).
        case_sensitive: do not lowercase.
    """

    metric_name = "ter"

    def __init__(
        self,
        *,
        normalized: bool = False,
        no_punct: bool = False,
        asian_support: bool = False,
        case_sensitive: bool = False,
    ) -> None:
        self._bind(
            _build(
                self.metric_name,
                "TER",
                normalized=normalized,
                no_punct=no_punct,
                asian_support=asian_support,
                case_sensitive=case_sensitive,
            )
        )

    def describe(self, score: Any, prepared: Stats) -> Score:
        line = score.format(signature=prepared.signature)
        return Score(
            number=float(score.score),
            explanation=f"{line} ({score.num_edits} edits, reference length "
            f"{float(score.ref_length):g})",
            metadata={
                "signature": prepared.signature,
                "edits": float(score.num_edits),
                "ref_length": float(score.ref_length),
            },
        )


class SentenceBleu(SacreStats):
    """Sentence BLEU (sacrebleu's sentence_bleu), 0-100, one score per record.

    Same params as ``bleu``; ``effective_order`` defaults to true, as in sacrebleu.
    """

    metric_name = "sentence-bleu"

    def __init__(
        self,
        *,
        tokenize: Tokenize = "13a",
        lowercase: bool = False,
        smooth_method: Smooth = "exp",
        smooth_value: float | None = None,
        max_ngram_order: int = 4,
        effective_order: bool = True,
    ) -> None:
        self._bind(
            _bleu_metric(
                self.metric_name,
                *(tokenize, lowercase, smooth_method, smooth_value),
                *(max_ngram_order, effective_order),
            )
        )
        self._signatures: dict[int, str] = {}

    def __call__(self, record: Record) -> Score:
        row = self.stats(record)
        nrefs = int(row.pop())
        sig = self._signatures.get(nrefs)
        if sig is None:
            sig = self._signatures[nrefs] = self.signature(nrefs)
        score = self._metric._compute_score_from_stats(row)
        # sacrebleu's line (signature, precisions, BP) explains; metadata stays small per record
        line = score.format(signature=sig)
        return Score(number=float(score.score), explanation=line, metadata={"signature": sig})
