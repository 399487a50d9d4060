"""ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum per record, by Google's ``rouge-score``.

The score is ``rouge_score.RougeScorer``'s (checked in tests): the F-measure is the main metric,
precision and recall are extra metrics (``rouge-1-precision``, ``rouge-1-recall``), all 0-1.
With several references the one with the best F-measure counts (``score_multi``).

rouge-score's default tokenizer keeps ASCII letters and digits only (it lowercases and drops
everything else, as the original Perl ROUGE does), so accented or non-Latin words lose letters
or vanish. ``tokenizer="unicode"`` keeps every Unicode letter and digit instead (the scores
then differ from the reference implementation's defaults, which the run's params record).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from evalsi.core import Record, Score
from evalsi.packs.text._inputs import hypothesis, need_module, references

_WORD = re.compile(r"[^\W_]+")


class UnicodeTokenizer:
    """Lowercased runs of Unicode letters and digits; Porter stemming of words longer than
    three characters when asked (the same rule as rouge-score's default tokenizer)."""

    def __init__(self, stemmer: Any | None) -> None:
        self._stemmer = stemmer

    def tokenize(self, text: str) -> list[str]:
        tokens = _WORD.findall(text.lower())
        stem = self._stemmer
        if stem is None:
            return tokens
        return [stem.stem(t) if len(t) > 3 else t for t in tokens]


class Rouge:
    """One ROUGE variant; subclasses set ``rouge_type`` (rouge-score's name) and the metric."""

    metric_name: ClassVar[str] = ""
    rouge_type: ClassVar[str] = ""

    def __init__(
        self, *, use_stemmer: bool = False, tokenizer: Literal["default", "unicode"] = "default"
    ) -> None:
        scorer_mod = need_module(self.metric_name, "rouge_score.rouge_scorer")
        custom = None
        if tokenizer == "unicode":
            porter = need_module(self.metric_name, "nltk.stem.porter")
            custom = UnicodeTokenizer(porter.PorterStemmer() if use_stemmer else None)
        self._scorer = scorer_mod.RougeScorer(
            [self.rouge_type], use_stemmer=use_stemmer, tokenizer=custom
        )
        self._precision = f"{self.metric_name}-precision"
        self._recall = f"{self.metric_name}-recall"

    def __call__(self, record: Record) -> list[Score]:
        name = self.metric_name
        hyp = hypothesis(record, name)
        refs = references(record, name)
        score, kind = self._scorer.score, self.rouge_type
        if len(refs) == 1:
            got, how = score(refs[0], hyp)[kind], ""
        else:  # rouge-score's score_multi: the first reference with the best F-measure
            each = [score(ref, hyp)[kind] for ref in refs]
            best = max(range(len(each)), key=lambda i: (each[i].fmeasure, -i))
            got, how = each[best], f"best F-measure: reference {best + 1} of {len(refs)}"
        return [
            Score(number=float(got.fmeasure), explanation=how),
            Score(name=self._precision, number=float(got.precision)),
            Score(name=self._recall, number=float(got.recall)),
        ]


class Rouge1(Rouge):
    """ROUGE-1: unigram overlap F-measure, 0-1 (precision and recall as extra metrics)."""

    metric_name = "rouge-1"
    rouge_type = "rouge1"


class Rouge2(Rouge):
    """ROUGE-2: bigram overlap F-measure, 0-1 (precision and recall as extra metrics)."""

    metric_name = "rouge-2"
    rouge_type = "rouge2"


class RougeL(Rouge):
    """ROUGE-L: longest common subsequence F-measure over the whole text, 0-1."""

    metric_name = "rouge-l"
    rouge_type = "rougeL"


class RougeLsum(Rouge):
    """ROUGE-Lsum: summary-level LCS F-measure over newline-split sentences, 0-1.

    Sentences are the lines of the text (split on newlines, as rouge-score does).
    """

    metric_name = "rouge-lsum"
    rouge_type = "rougeLsum"
