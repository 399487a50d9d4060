"""What every spec kind shares after its YAML is parsed: reading the file, validating it against
its generated JSON Schema, and turning each schema error into one line a person can act on
(``run.yaml:12: spec.trials: expected an integer, got 'three'``)."""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from evalsi.core import SpecError
from evalsi.specs._yaml import KeyPath, line_of, where

MAX_SPEC_BYTES = 1 << 20
"""Largest spec file read, in bytes."""
MAX_REPORTED = 20
"""Problems listed in one error; the rest are counted."""
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A ``metadata.name``: lower-case DNS-style, as Kubernetes names are."""

_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|d|h|m|s))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")
_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (line and key path) and what."""

    line: int
    path: KeyPath
    message: str


def read_spec_text(path: Path, shown: str, what: str = "spec") -> str:
    """A spec file's text (UTF-8, at most ``MAX_SPEC_BYTES``), or a ``SpecError`` naming it."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
    except FileNotFoundError as e:
        raise SpecError(f"{shown}: cannot read the {what} file (not found)") from e
    except IsADirectoryError as e:
        raise SpecError(f"{shown}: cannot read the {what} file (it is a directory)") from e
    except OSError as e:
        raise SpecError(f"{shown}: cannot read the {what} file ({e.strerror or e})") from e
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"{shown}: the {what} file is larger than {MAX_SPEC_BYTES} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SpecError(f"{shown}: not UTF-8 text (byte {e.start})") from e


@cache
def schema_validator(kind: str) -> Draft202012Validator:
    """The validator of ``schemas/<kind>.schema.json`` (``evalrun``, ``onlineevalpolicy``),
    which ``scripts/gen_schema.py`` generates from the proto."""
    path = f"schemas/{kind}.schema.json"
    text = resources.files("evalsi.specs").joinpath(path).read_text("utf-8")
    return Draft202012Validator(json.loads(text))


def schema_problems(kind: str, doc: Any, lines: Mapping[KeyPath, int]) -> list[Problem]:
    """Every way ``doc`` breaks the ``kind`` schema, one ``Problem`` per field."""
    return [p for e in schema_validator(kind).iter_errors(doc) for p in _explain(e, lines)]


def raise_problems(shown: str, lines: Mapping[KeyPath, int], problems: Iterable[Problem]) -> None:
    """One ``SpecError`` listing ``problems`` by line (the first ``MAX_REPORTED``)."""
    unique = sorted(set(problems), key=lambda p: (p.line, tuple(map(str, p.path)), p.message))
    rendered = [where(shown, lines, p.path, p.line) + p.message for p in unique]
    if len(rendered) > MAX_REPORTED:
        rendered = [*rendered[:MAX_REPORTED], f"... and {len(rendered) - MAX_REPORTED} more"]
    raise SpecError("\n".join(rendered))


def parse_duration(text: str) -> float | None:
    """Seconds in a duration such as ``"1h30m"`` (units d, h, m, s, ms), or None if malformed.

    Example:
        >>> parse_duration("1h30m"), parse_duration("250ms"), parse_duration("soon")
        (5400.0, 0.25, None)
    """
    if not _DURATION.fullmatch(text):
        return None
    return sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION_PART.findall(text))


def show(value: Any) -> str:
    """``value`` as an error message shows it: short, and never a whole mapping."""
    if value is None:
        return "an empty value (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    return repr(value)


def _explain(error: ValidationError, lines: Mapping[KeyPath, int]) -> list[Problem]:
    path: KeyPath = tuple(error.absolute_path)
    line = line_of(lines, path)
    value: Any = error.instance
    keyword: Any = error.validator
    expected: Any = error.validator_value
    schema: Any = error.schema
    if keyword == "additionalProperties" and isinstance(value, Mapping):
        known = list(schema.get("properties", {}))
        return [
            Problem(line_of(lines, (*path, key)), (*path, key), unknown_field(key, known))
            for key in value
            if key not in known
        ]
    if keyword == "required" and isinstance(value, Mapping):
        return [
            Problem(line, path, f"missing required field {name!r}")
            for name in expected
            if name not in value
        ]
    if keyword == "not" and isinstance(value, Mapping):
        members = list(dict.fromkeys(m for alt in expected["anyOf"] for m in alt["required"]))
        found = [m for m in members if m in value]
        text = f"set only one of {', '.join(members)} (found {', '.join(found)})"
        return [Problem(line, path, text)]
    return [Problem(line, path, _expectation(keyword, expected, value, error))]


def _expectation(keyword: Any, expected: Any, value: Any, error: ValidationError) -> str:
    if keyword == "type" or (keyword == "pattern" and "[0-9]" in str(expected)):
        kinds = expected if isinstance(expected, list) else [expected]
        if keyword == "pattern" or set(kinds) == {"integer", "string"}:
            kinds = ["integer"]
        want = " or ".join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)
        note = ""
        if kinds == ["string"] and isinstance(value, bool | int | float):
            note = " (quote it: YAML reads yes/no/on/off as booleans and digits as numbers)"
        return f"expected {want}, got {show(value)}{note}"
    if keyword == "const":
        return f"expected {expected!r}, got {show(value)}"
    if keyword == "enum":
        options = [str(o) for o in expected]
        close = _closest(str(value), options)
        guess = f" (did you mean {close}?)" if close else ""
        return f"expected one of {', '.join(options)}; got {show(value)}{guess}"
    bounds = {
        "minimum": ">=",
        "maximum": "<=",
        "exclusiveMinimum": ">",
        "exclusiveMaximum": "<",
    }
    if keyword in bounds:
        return f"expected a value {bounds[keyword]} {expected}, got {show(value)}"
    if keyword == "minItems":
        return f"expected at least {expected} item{'s' if expected != 1 else ''}, got none"
    if keyword == "minLength":
        return "expected a non-empty string"
    if keyword == "maxLength":
        return f"expected at most {expected} characters, got {len(value)}"
    return str(error.message)


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _closest(word: str, known: list[str]) -> str | None:
    """The known word ``word`` most likely meant: same letters, a prefix, or a near spelling."""

    def squash(text: str) -> str:
        return text.lower().replace("_", "").replace("-", "")

    for candidate in known:
        if squash(candidate) == squash(word):
            return candidate
    if len(word) >= 3:
        for candidate in known:
            if candidate.startswith(word):
                return candidate
    matches = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
    return matches[0] if matches else None


def unknown_field(key: str, known: list[str]) -> str:
    """``key`` is not a field here: the message names the closest known one, or all of them."""
    close = _closest(key, known)
    if close is not None:
        return f"unknown field {key!r} (did you mean {close}?)"
    return f"unknown field {key!r} (expected one of: {', '.join(known)})"
