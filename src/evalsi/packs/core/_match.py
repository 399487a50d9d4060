"""Matching the output against expected text: exact, fuzzy, contains, starts-with, one-of.

Each evaluator is a class so that its params are turned into a normaliser (and checked) once per
bind; ``__call__`` then does the least work it can per record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from evalsi.core import Content, JsonValue, OutputSpec, ParamError, Record, Score
from evalsi.evaluators import Skip
from evalsi.packs._declare import builtin, few, number, passed
from evalsi.packs.core._normalize import make_normalizer
from evalsi.packs.core._reference import (
    NOT_JSON,
    alternatives,
    expected_got,
    json_equal,
    output_data,
    quoted,
    shorten,
)

_NO_ALTERNATIVES = "reference is an empty list of alternatives"
_UNPARSED = object()
NO_CHOICE = "(none)"
"""The ``choice`` label of ``one-of`` when the output matches none of the choices."""


class ExactMatch:
    """Pass when the output equals the reference, after optional normalisation.

    Compares ``output.as_text()`` with the reference text; by default surrounding whitespace is
    trimmed and case matters. A reference that is a JSON list is a list of alternatives: the
    output passes when it matches any of them (an empty list skips the record). A string
    alternative is compared as text; any other JSON alternative (object, number, boolean, null,
    nested list) is compared as data with the output's JSON value (JSON content, or text parsed
    as JSON): key order does not matter, ``1`` equals ``1.0`` but not ``true``, and the text
    params apply to string values. An output that is itself a JSON list equal to a whole list
    reference passes too. A failure's explanation shows both sides, each cut to 120
    characters: ``expected "Paris", got "paris."``.

    Args:
        ignore_case: compare case-insensitively (``str.casefold``).
        ignore_punctuation: delete Unicode punctuation (categories P*) before comparing.
        normalize_whitespace: collapse every run of whitespace to one space.
        trim: ignore whitespace around the text (default true).
    """

    __slots__ = ("_norm",)

    def __init__(
        self,
        *,
        ignore_case: bool = False,
        ignore_punctuation: bool = False,
        normalize_whitespace: bool = False,
        trim: bool = True,
    ) -> None:
        self._norm = make_normalizer(
            ignore_case=ignore_case,
            ignore_punctuation=ignore_punctuation,
            normalize_whitespace=normalize_whitespace,
            trim=trim,
        )

    def __call__(self, record: Record) -> bool | Score:
        out, ref = record.output, record.reference
        assert out is not None  # the runner checked `requires`
        assert ref is not None
        if ref.kind == "text":
            norm = self._norm
            if norm(out.value if out.kind == "text" else out.as_text()) == norm(ref.value):
                return True
        elif self._structured(out, ref):
            return True
        return Score(passed=False, explanation=expected_got(ref, out.as_text()))

    def _structured(self, out: Content, ref: Content) -> bool:
        norm = self._norm
        text = out.as_text()
        if ref.kind != "json":
            return norm(text) == norm(ref.as_text())
        expected = ref.value
        options = expected if isinstance(expected, list) else (expected,)
        if not options:
            raise Skip(_NO_ALTERNATIVES)
        got = norm(text)
        data: JsonValue = _UNPARSED
        for option in options:
            if isinstance(option, str):
                if got == norm(option):
                    return True
                continue
            if data is _UNPARSED:
                data = output_data(out, text)
            if data is not NOT_JSON and json_equal(data, option, norm):
                return True
        # An output that is a list itself may equal the whole list, compared as data.
        if options is expected and (out.kind == "json" or text.lstrip().startswith("[")):
            if data is _UNPARSED:
                data = output_data(out, text)
            return isinstance(data, list) and json_equal(data, expected, norm)
        return False


exact_match = builtin(
    "core",
    "exact-match",
    passed("exact-match", "the output equals the reference (or one of its alternatives)"),
    requires=("output", "reference"),
    example="evalsi eval --data qa.jsonl --evaluators exact-match "
    "--param exact-match.ignore_case=true",
)(ExactMatch)


class FuzzyMatch:
    """Score how close the output is to the reference, and pass above a threshold.

    The similarity is the normalized Indel similarity of ``output.as_text()`` and the reference
    text (rapidfuzz ``fuzz.ratio`` / 100): 1.0 for identical texts, 0.0 for texts sharing no
    character. With a JSON list reference the best alternative counts. Emits ``similarity``
    (number in [0, 1]) and ``fuzzy-match`` (passed when similarity >= threshold).

    Args:
        threshold: the similarity needed to pass, in [0, 1] (default 0.8).
        ignore_case: compare case-insensitively.
        ignore_punctuation: delete Unicode punctuation before comparing.
        normalize_whitespace: collapse every run of whitespace to one space.
        trim: ignore whitespace around the text (default true).
    """

    __slots__ = ("_norm", "_similarity", "_threshold")

    def __init__(
        self,
        *,
        threshold: float = 0.8,
        ignore_case: bool = False,
        ignore_punctuation: bool = False,
        normalize_whitespace: bool = False,
        trim: bool = True,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ParamError(f"fuzzy-match: param 'threshold' must be in [0, 1], got {threshold}")
        from rapidfuzz.distance import Indel  # imported on bind: keeps `import evalsi` light

        self._similarity: Callable[[str, str], float] = Indel.normalized_similarity
        # Tolerate float rounding in 1 - distance / length at the boundary.
        self._threshold = threshold - 1e-12
        self._norm = make_normalizer(
            ignore_case=ignore_case,
            ignore_punctuation=ignore_punctuation,
            normalize_whitespace=normalize_whitespace,
            trim=trim,
        )

    def __call__(self, record: Record) -> list[Score]:
        out, ref = record.output, record.reference
        assert out is not None
        assert ref is not None
        norm, similarity = self._norm, self._similarity
        text = norm(out.as_text())
        if ref.kind == "text":
            best = similarity(text, norm(ref.value))
        else:
            options = alternatives(ref)
            if not options:
                raise Skip(_NO_ALTERNATIVES)
            best = max(similarity(text, norm(option)) for option in options)
        if best >= self._threshold:
            return [Score(passed=True), Score(name="similarity", number=best)]
        why = f"similarity {best:.3f} < {self._threshold + 1e-12:g}: "
        return [
            Score(passed=False, explanation=why + expected_got(ref, out.as_text())),
            Score(name="similarity", number=best),
        ]


fuzzy_match = builtin(
    "core",
    "fuzzy-match",
    passed("fuzzy-match", "similarity is at least the threshold"),
    number("similarity", "normalized Indel similarity to the closest reference (1 = identical)"),
    requires=("output", "reference"),
    example="evalsi eval --data qa.jsonl --evaluators fuzzy-match "
    "--param fuzzy-match.threshold=0.9 --param fuzzy-match.ignore_case=true",
)(FuzzyMatch)


class Contains:
    """Pass when the output contains any (or all) of the given substrings.

    Looks for each value in ``output.as_text()``. The values come from the ``values`` param;
    without it, from the reference (a string, or a JSON list of strings). A record with neither
    is skipped, and empty strings are never looked for. On a failure the explanation names
    the values that were missing.

    Args:
        values: the substrings to look for; overrides the reference when set.
        mode: ``any`` (default) passes when one value occurs, ``all`` when every value does.
        ignore_case: compare case-insensitively.
    """

    __slots__ = ("_fold", "_need_all", "_values")

    def __init__(
        self,
        *,
        values: list[str] | None = None,
        mode: Literal["any", "all"] = "any",
        ignore_case: bool = False,
    ) -> None:
        self._fold: Callable[[str], str] | None = str.casefold if ignore_case else None
        self._need_all = mode == "all"
        self._values: tuple[tuple[str, str], ...] | None = None
        if values is not None:
            if not values or not all(values):
                raise ParamError(
                    "contains: param 'values' must be a non-empty list of non-empty strings, "
                    f"got {values!r}"
                )
            self._values = self._prepare(values)

    def _prepare(self, values: tuple[str, ...] | list[str]) -> tuple[tuple[str, str], ...]:
        fold = self._fold
        return tuple((v, fold(v) if fold else v) for v in values if v)

    def __call__(self, record: Record) -> bool | Score:
        out = record.output
        assert out is not None
        needles = self._values
        if needles is None:
            ref = record.reference
            if ref is None:
                raise Skip("no values to look for: set values= or give a reference")
            needles = self._prepare(alternatives(ref))
            if not needles:
                raise Skip("reference is empty: no values to look for")
        text = out.as_text()
        if self._fold is not None:
            text = self._fold(text)
        if self._need_all:
            missing = [value for value, needle in needles if needle not in text]
            if not missing:
                return True
            shown = few([shorten(v, 40) for v in missing], 5)
            return Score(passed=False, explanation=f"missing {shown}")
        for _, needle in needles:
            if needle in text:
                return True
        if len(needles) == 1:
            return Score(passed=False, explanation=f"{shorten(needles[0][0], 40)} not found")
        return Score(passed=False, explanation=f"none of the {len(needles)} values found")


contains = builtin(
    "core",
    "contains",
    passed("contains", "the output contains any (or all) of the values"),
    example="evalsi eval --data qa.jsonl --evaluators contains "
    "--param contains.values=Paris,France --param contains.mode=all",
)(Contains)


class StartsWith:
    """Pass when the output starts with the given prefix.

    The prefix comes from the ``prefix`` param; without it, from the reference (a JSON list
    reference means any of its elements). A record with neither is skipped.

    Args:
        prefix: the expected prefix; overrides the reference when set.
        ignore_case: compare case-insensitively.
        trim: ignore leading whitespace of the output and of the prefix (default true).
    """

    __slots__ = ("_norm", "_prefixes")

    def __init__(
        self, *, prefix: str | None = None, ignore_case: bool = False, trim: bool = True
    ) -> None:
        self._norm = _prefix_normalizer(ignore_case=ignore_case, trim=trim)
        self._prefixes: tuple[str, ...] | None = None
        if prefix is not None:
            normalized = self._norm(prefix)
            if not normalized:
                raise ParamError("starts-with: param 'prefix' must not be empty")
            self._prefixes = (normalized,)

    def __call__(self, record: Record) -> bool | Score:
        out = record.output
        assert out is not None
        norm = self._norm
        prefixes = self._prefixes
        if prefixes is None:
            ref = record.reference
            if ref is None:
                raise Skip("no prefix to look for: set prefix= or give a reference")
            prefixes = tuple(p for p in map(norm, alternatives(ref)) if p)
            if not prefixes:
                raise Skip("reference is empty: no prefix to look for")
        text = out.as_text()
        if norm(text).startswith(prefixes):
            return True
        wanted = ", ".join(quoted(p, 40) for p in prefixes[:5])
        if len(prefixes) > 1:
            wanted = f"one of {wanted}" + (f" (+{len(prefixes) - 5})" if len(prefixes) > 5 else "")
        return Score(passed=False, explanation=f"expected a start {wanted}, got {quoted(text)}")


starts_with = builtin(
    "core",
    "starts-with",
    passed("starts-with", "the output starts with the prefix"),
    example="evalsi eval --data answers.jsonl --evaluators starts-with "
    "--param 'starts-with.prefix=Answer:'",
)(StartsWith)


def _prefix_normalizer(*, ignore_case: bool, trim: bool) -> Callable[[str], str]:
    if ignore_case and trim:
        return lambda s: s.lstrip().casefold()
    if ignore_case:
        return str.casefold
    if trim:
        return str.lstrip
    return lambda s: s


class OneOf:
    """Pass when the output is exactly one of a fixed set of choices.

    Compares ``output.as_text()`` with each choice after the chosen normalisation. Emits
    ``one-of`` (passed) and ``choice``, a label holding the matched choice as spelled in
    ``choices`` (``(none)`` when nothing matched), so label counts show the distribution of
    answers.

    Args:
        choices: the accepted answers (required, non-empty).
        ignore_case: compare case-insensitively.
        ignore_punctuation: delete Unicode punctuation before comparing.
        trim: ignore whitespace around the text (default true).
    """

    __slots__ = ("_lookup", "_norm")

    def __init__(
        self,
        *,
        choices: list[str],
        ignore_case: bool = False,
        ignore_punctuation: bool = False,
        trim: bool = True,
    ) -> None:
        if not choices:
            raise ParamError("one-of: param 'choices' must list at least one choice")
        self._norm = make_normalizer(
            ignore_case=ignore_case, ignore_punctuation=ignore_punctuation, trim=trim
        )
        self._lookup: dict[str, str] = {}
        for choice in choices:
            self._lookup.setdefault(self._norm(choice), choice)

    def __call__(self, record: Record) -> list[Score]:
        out = record.output
        assert out is not None
        text = out.as_text()
        choice = self._lookup.get(self._norm(text))
        if choice is None:
            return [
                Score(passed=False, explanation=f"{shorten(text)} is not one of the choices"),
                Score(name="choice", label=NO_CHOICE),
            ]
        return [Score(passed=True), Score(name="choice", label=choice)]


one_of = builtin(
    "core",
    "one-of",
    passed("one-of", "the output is one of the choices"),
    OutputSpec(
        "choice",
        "label",
        None,
        None,
        f"the choice matched, as spelled in `choices`, or {NO_CHOICE!r}",
    ),
    example="evalsi eval --data sentiment.jsonl --evaluators one-of "
    "--param one-of.choices=positive,negative,neutral --param one-of.ignore_case=true",
)(OneOf)
