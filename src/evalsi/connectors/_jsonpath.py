"""A small JSONPath subset for picking the output out of a response: ``$.a.b[0].c``.

Supported: the root ``$``, member names (``.name`` or ``['name']`` / ``["name"]``) and array
indexes (``[0]``, ``[-1]``). No wildcards, slices, filters or recursive descent: an output is one
value, so a path that could match many is refused when the spec is read.
"""

from __future__ import annotations

import re

from evalsi.core import JsonValue, UserError

Segment = str | int

_TOKEN = re.compile(
    r"""\.(?P<name>[A-Za-z_][A-Za-z0-9_\-]*)
      | \[\s*(?P<index>-?\d+)\s*\]
      | \[\s*'(?P<sq>(?:[^'\\]|\\.)*)'\s*\]
      | \[\s*"(?P<dq>(?:[^"\\]|\\.)*)"\s*\]""",
    re.VERBOSE,
)


class JsonPathMiss(LookupError):
    """The path does not resolve in a document; the message says where it stopped."""


class JsonPath:
    """A compiled path.

    Example:
        >>> JsonPath("$.choices[0].message['content']").find(
        ...     {"choices": [{"message": {"content": "hi"}}]})
        'hi'
        >>> str(JsonPath("$.a[-1]"))
        '$.a[-1]'
    """

    __slots__ = ("segments", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.segments = parse_path(text)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"JsonPath({self.text!r})"

    def find(self, document: JsonValue) -> JsonValue:
        """The value at this path, or ``JsonPathMiss`` naming the first segment that failed."""
        current = document
        walked = "$"
        for segment in self.segments:
            if isinstance(segment, int):
                if not isinstance(current, list):
                    raise JsonPathMiss(f"{walked} is {_kind(current)}, not an array")
                if not -len(current) <= segment < len(current):
                    raise JsonPathMiss(f"{walked} has {len(current)} items; no index {segment}")
                current = current[segment]
                walked += f"[{segment}]"
            else:
                if not isinstance(current, dict):
                    raise JsonPathMiss(f"{walked} is {_kind(current)}, not an object")
                if segment not in current:
                    keys = ", ".join(sorted(map(str, current))[:10]) or "none"
                    raise JsonPathMiss(f"{walked} has no key {segment!r} (keys: {keys})")
                current = current[segment]
                walked += f".{segment}"
        return current


def parse_path(text: str) -> list[Segment]:
    """The segments of ``text``, or a ``UserError`` saying what is unsupported and where."""
    stripped = text.strip()
    if not stripped.startswith("$"):
        raise UserError(
            f"output path {text!r} must start with '$'", hint="for example $.data.answer"
        )
    segments: list[Segment] = []
    position = 1
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:
            raise UserError(
                f"output path {text!r}: cannot read {stripped[position:]!r} at character "
                f"{position + 1}",
                hint="supported: $.name, $['name'], $.list[0], $.list[-1] (no wildcards, filters)",
            )
        if match["name"] is not None:
            segments.append(match["name"])
        elif match["index"] is not None:
            segments.append(int(match["index"]))
        else:
            quoted = match["sq"] if match["sq"] is not None else match["dq"]
            segments.append(re.sub(r"\\(.)", r"\1", quoted))
        position = match.end()
    return segments


def _kind(value: JsonValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
