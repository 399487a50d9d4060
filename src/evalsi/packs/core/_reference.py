"""What a reference stands for: one text, a list of alternatives, or a JSON value.

A reference whose content is a JSON list is a list of alternatives (any of them may match); every
other reference is a single expected value. Shared by the matching evaluators.
"""

from __future__ import annotations

from typing import Final

import orjson

from evalsi.core import Content, JsonValue
from evalsi.packs._declare import clip
from evalsi.packs.core._normalize import Normalizer

NOT_JSON: Final = object()
"""Returned by :func:`output_data` when the output holds no JSON value."""


def as_text(value: JsonValue) -> str:
    """A JSON value as text: a string as is, anything else as compact JSON."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def alternatives(reference: Content) -> tuple[str, ...]:
    """The texts a reference accepts: each element of a JSON list, else the one text."""
    if reference.kind == "json" and isinstance(reference.value, list):
        return tuple(as_text(item) for item in reference.value)
    return (reference.as_text(),)


def output_data(output: Content, text: str) -> JsonValue:
    """The output as JSON data: JSON content as is, text parsed as JSON, else ``NOT_JSON``."""
    if output.kind == "json":
        return output.value
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return NOT_JSON


def json_equal(a: JsonValue, b: JsonValue, norm: Normalizer) -> bool:
    """Equality of JSON values as data, with ``norm`` applied to string values (not keys).

    Numbers compare by value (``1 == 1.0``) but never equal booleans; object key order is
    irrelevant; list order matters.
    """
    if isinstance(a, str):
        return isinstance(b, str) and norm(a) == norm(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)):
        return isinstance(b, (int, float)) and a == b
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(json_equal(value, b[key], norm) for key, value in a.items())
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(json_equal(x, y, norm) for x, y in zip(a, b, strict=True))
        )
    return a is None and b is None


def shorten(text: str, limit: int = 80) -> str:
    """``repr`` of ``text`` cut to about ``limit`` characters, for explanations."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 4] + "...'"


SHOWN_CHARS = 120
"""Characters of each side an explanation quotes (expected, got); a failure line stays short."""


def quoted(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters, in double quotes with JSON escapes (a newline
    shows as ``\\n``, so an explanation stays one line)."""
    return orjson.dumps(clip(text, limit)).decode()


def expected_got(reference: Content, got: str) -> str:
    """Why an output did not match its reference: ``expected "Paris", got "paris."``; a list
    of alternatives shows as ``expected one of ["Paris","paris"], got ...``.

    Example:
        >>> expected_got(Content.of_text("Paris"), "paris.")
        'expected "Paris", got "paris."'
    """
    if reference.kind == "json" and isinstance(reference.value, list):
        expected = "one of " + clip(as_text(reference.value), SHOWN_CHARS)
    else:
        expected = quoted(reference.as_text())
    return f"expected {expected}, got {quoted(got)}"
