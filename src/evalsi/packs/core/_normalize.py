"""Text normalisation shared by the matching evaluators.

A normaliser is built once per bind from a few switches and then applied to every output and
reference. Building is cached, so evaluators bound with the same switches share one function, and
the Unicode punctuation table is computed only the first time a normaliser needs it.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable
from functools import lru_cache

Normalizer = Callable[[str], str]

_WHITESPACE_RUN = re.compile(r"\s+")


@lru_cache(maxsize=1)
def punctuation_table() -> dict[int, None]:
    """A ``str.translate`` table deleting every Unicode punctuation character (categories P*).

    Symbols (``$``, ``+``, ``^``, emoji...) are not punctuation and stay.
    """
    return {
        cp: None
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)).startswith("P")
    }


@lru_cache(maxsize=1)
def _ascii_punctuation() -> bytes:
    return bytes(cp for cp in punctuation_table() if cp < 128)


def _punctuation_remover() -> Normalizer:
    table = punctuation_table()
    ascii_only = _ascii_punctuation()

    def remove(text: str) -> str:
        # bytes.translate is several times faster than str.translate on the common ASCII text.
        if text.isascii():
            return text.encode("ascii").translate(None, ascii_only).decode("ascii")
        return text.translate(table)

    return remove


def _identity(text: str) -> str:
    return text


@lru_cache(maxsize=64)
def make_normalizer(
    *,
    ignore_case: bool = False,
    ignore_punctuation: bool = False,
    normalize_whitespace: bool = False,
    trim: bool = True,
) -> Normalizer:
    """One function applying the chosen normalisations, composed once (no per-call switches).

    Steps run in this order: delete punctuation, collapse whitespace runs to one space, trim
    surrounding whitespace, fold case (``str.casefold``, so ``"Straße"`` equals ``"STRASSE"``).
    Deleting punctuation does not collapse the spaces around it; add ``normalize_whitespace`` for
    that.

    Example:
        >>> make_normalizer(ignore_case=True)("  Hello ")
        'hello'
    """
    steps: list[Normalizer] = []
    if ignore_punctuation:
        steps.append(_punctuation_remover())
    if normalize_whitespace:
        if trim:
            steps.append(lambda s: " ".join(s.split()))
        else:
            steps.append(lambda s: _WHITESPACE_RUN.sub(" ", s))
    elif trim:
        steps.append(str.strip)
    if ignore_case:
        steps.append(str.casefold)
    if not steps:
        return _identity
    if len(steps) == 1:
        return steps[0]
    if len(steps) == 2:
        first, second = steps
        return lambda s: second(first(s))

    def chain(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return chain
