"""Levenshtein edit distance between output and reference, by rapidfuzz (a core dependency).

Two metrics per record: ``edit-distance``, the number of insertions, deletions and
substitutions (lower is better), and ``edit-similarity``, ``1 - distance / max(len)`` in 0-1
(two empty texts are identical: 1). Characters or whitespace-separated words are the units.
With several references the closest one counts.
"""

from __future__ import annotations

from typing import Literal

from rapidfuzz.distance import Levenshtein

from evalsi.core import Record, Score
from evalsi.packs.text._inputs import hypothesis, references

Unit = Literal["char", "word"]


class EditDistance:
    """Levenshtein distance and normalised similarity to the closest reference.

    Args:
        unit: ``char`` (default) or ``word`` (whitespace-separated words).
        lowercase: compare lowercased text.
    """

    __slots__ = ("_lower", "_words")

    def __init__(self, *, unit: Unit = "char", lowercase: bool = False) -> None:
        self._words = unit == "word"
        self._lower = lowercase

    def _units(self, text: str) -> str | list[str]:
        if self._lower:
            text = text.lower()
        return text.split() if self._words else text

    def __call__(self, record: Record) -> list[Score]:
        hyp = self._units(hypothesis(record, "edit-distance"))
        refs = [self._units(r) for r in references(record, "edit-distance")]
        distance, dissimilarity, index = min(
            (Levenshtein.distance(hyp, ref), -Levenshtein.normalized_similarity(hyp, ref), i)
            for i, ref in enumerate(refs)
        )
        how = f"closest of {len(refs)} references: reference {index + 1}" if len(refs) > 1 else ""
        return [
            Score(number=float(distance), explanation=how),
            Score(name="edit-similarity", number=float(-dissimilarity)),
        ]
