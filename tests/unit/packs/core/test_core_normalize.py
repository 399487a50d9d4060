"""The shared text normaliser."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalsi.packs.core._normalize import make_normalizer, punctuation_table


def test_default_trims_only() -> None:
    assert make_normalizer()("  A  b \n") == "A  b"


def test_no_step_is_the_identity() -> None:
    assert make_normalizer(trim=False)(" x ") == " x "


@pytest.mark.parametrize(
    ("switches", "text", "expected"),
    [
        ({"ignore_case": True}, " Straße ", "strasse"),
        ({"ignore_punctuation": True}, "(a), b!", "a b"),
        ({"ignore_punctuation": True}, "a - b", "a  b"),
        ({"ignore_punctuation": True, "normalize_whitespace": True}, "a - b", "a b"),
        ({"normalize_whitespace": True}, "\ta \u00a0 b\n", "a b"),
        ({"normalize_whitespace": True, "trim": False}, "\ta \u00a0 b\n", " a b "),
        (
            {"ignore_case": True, "ignore_punctuation": True, "normalize_whitespace": True},
            " ¡Hola,  MUNDO! ",
            "hola mundo",
        ),
    ],
)
def test_steps(switches: dict[str, bool], text: str, expected: str) -> None:
    assert make_normalizer(**switches)(text) == expected


def test_normalisers_are_shared() -> None:
    assert make_normalizer(ignore_case=True) is make_normalizer(ignore_case=True)


def test_punctuation_table_is_exactly_the_p_categories() -> None:
    table = punctuation_table()
    assert all(unicodedata.category(chr(cp)).startswith("P") for cp in table)
    for char in "!\"#%&'()*,-./:;?@[\\]_{}¡§«»¿‐–—‘’“”…、。「」":
        assert ord(char) in table, char
    for char in "$+<=>^`|~€😀a1 ":
        assert ord(char) not in table, char


@pytest.mark.parametrize("text", ["a.b, c!", "naïve, «x»", "", "...", "x—y", "$5 + 3 = ~8"])
def test_ascii_fast_path_agrees_with_the_table(text: str) -> None:
    assert make_normalizer(ignore_punctuation=True, trim=False)(text) == text.translate(
        punctuation_table()
    )


@given(st.text())
def test_ascii_fast_path_agrees_with_the_table_everywhere(text: str) -> None:
    assert make_normalizer(ignore_punctuation=True, trim=False)(text) == text.translate(
        punctuation_table()
    )
