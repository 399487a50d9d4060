"""``compile_pattern``: user patterns under RE2, checked against Python's ``re`` (the reference
for what a pattern meant before): the same matches for the Unicode classes, linear time for a
pattern that backtracks exponentially in ``re``, and a clear error for what RE2 refuses."""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import MAX_PATTERN, ParamError, UserError, compile_pattern

# Letters, digits and spaces of several scripts, the separators Python's \s knows, punctuation.
ALPHABET = "aZ_9é Ж٣１\t\n\x0b\x0c\r\x1c\x1f\x85\xa0\u1680\u2028\u3000.-,!€"
PATTERNS = [
    r"\w+",
    r"\W+",
    r"\d+",
    r"\D+",
    r"\s+",
    r"\S+",
    r"[\w\s]+",
    r"[\d.,]+",
    r"[^\w]+",
    r"[^\d\s]+",
    r"\w\Z",
    r"(?i)é+",
    r"[]a]+",
    r"[^]a]+",
]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=12))
def test_unicode_classes_match_as_in_python(text: str) -> None:
    for pattern in PATTERNS:
        expected = [m.span() for m in re.finditer(pattern, text)]
        got = [(m.start(), m.end()) for m in compile_pattern(pattern, where="t").finditer(text)]
        assert got == expected, pattern


def test_flags() -> None:
    assert compile_pattern("^b$", where="t", multiline=True).search("a\nb")
    assert not compile_pattern("^b$", where="t").search("a\nb")
    assert compile_pattern("a.b", where="t", dotall=True).search("a\nb")
    assert not compile_pattern("a.b", where="t").search("a\nb")
    assert compile_pattern("ÉTÉ", where="t", ignore_case=True).fullmatch("été")


def test_escaped_backslashes_and_quoted_text_are_not_classes() -> None:
    assert compile_pattern(r"\\d", where="t").fullmatch("\\d")
    assert compile_pattern(r"\Qa\d\E", where="t").fullmatch("a\\d")


def test_exponential_pattern_in_re_is_linear() -> None:
    """The guard is a generous timeout, not a speed target: 2**40 paths in ``re``."""
    pattern = compile_pattern(r"^(a+)+$", where="t")
    found: list[object] = []
    worker = threading.Thread(target=lambda: found.append(pattern.search("a" * 40 + "!")))
    worker.daemon = True
    worker.start()
    worker.join(5)
    assert found == [None]


@pytest.mark.parametrize(
    ("pattern", "reason", "hint"),
    [
        (r"(a)\1", r"invalid escape sequence: \1", "no backreferences"),
        (r"a(?=b)", "invalid perl operator: (?=", "no lookahead"),
        (r"(?<=a)b", "invalid perl operator: (?<=", "no lookbehind"),
        (r"a*+", "bad repetition operator: *+", "possessive"),
        ("a{1001}", "invalid repetition size: {1001}", "at most 1000"),
        ("(", "missing ): (", "RE2 syntax"),
        (
            r"[\W_]",
            r"\W inside [...] is not supported; write the set negated instead, e.g. [^\w...]",
            "RE2 syntax",
        ),
    ],
)
def test_refused_patterns_name_the_place_the_pattern_and_why(
    pattern: str, reason: str, hint: str
) -> None:
    with pytest.raises(ParamError) as info:
        compile_pattern(pattern, where="regex: param 'pattern'", error=ParamError)
    assert info.value.message == (
        f"regex: param 'pattern': {pattern!r} is not a valid regular expression: {reason}"
    )
    assert hint in (info.value.hint or "")


@pytest.mark.parametrize("length", [0, MAX_PATTERN + 1])
def test_length_bounds(length: int) -> None:
    with pytest.raises(UserError, match=f"1-{MAX_PATTERN} characters, got {length}"):
        compile_pattern("a" * length, where="t")
    assert compile_pattern("a" * MAX_PATTERN, where="t").fullmatch("a" * MAX_PATTERN)


def test_a_long_pattern_is_shown_shortened() -> None:
    with pytest.raises(UserError) as info:
        compile_pattern("(" + "a" * 200, where="t")
    assert "'(" + "a" * 76 + "...'" in info.value.message


def test_a_lone_surrogate_is_a_user_error() -> None:
    with pytest.raises(UserError, match="surrogates not allowed"):
        compile_pattern("\ud800", where="t")
