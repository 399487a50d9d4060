"""User-supplied regular expressions, compiled with RE2 so no pattern can stall a process.

Python's ``re`` backtracks: ``^(a+)+$`` against 28 ``a`` and a ``!`` takes tens of seconds,
holding the GIL, and on the server that stalled every request and the OTLP ingest beside it.
RE2 (the ``google-re2`` package) matches in time linear in the text for every pattern it
accepts; the price is that it refuses what needs backtracking (backreferences, lookahead and
lookbehind, atomic groups and possessive quantifiers). Every pattern a user gives (an
evaluator's param, a redaction rule) goes through ``compile_pattern``; patterns we write
ourselves stay on ``re``.

What stays as in Python: ``\\d``, ``\\w``, ``\\s`` and their negations are Unicode classes
(RE2's own are ASCII; they are rewritten to ``\\p{..}`` classes before compiling) and ``\\Z``
is the end of the text. What differs: ``\\b`` and ``\\B`` are ASCII word boundaries, and ``$``
without multi-line matches only at the very end (Python's also before a final newline: write
``\\n?$``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from evalsi.core._errors import UserError

MAX_PATTERN = 4096
"""The longest pattern accepted, in characters; RE2's memory budget bounds what it compiles to."""

# Python's Unicode classes in RE2 terms: \d is category Nd; \w is what str.isalnum() accepts,
# plus "_"; \s is what str.isspace() accepts (\p{Z} holds the space separators and U+2028/9).
_DIGIT = r"\p{Nd}"
_WORD = r"\p{L}\p{N}_"
_SPACE = r"\t-\r\x{1c}-\x{1f}\x{85}\p{Z}"
_OUTSIDE = {
    "d": _DIGIT,
    "D": r"\P{Nd}",
    "w": f"[{_WORD}]",
    "W": f"[^{_WORD}]",
    "s": f"[{_SPACE}]",
    "S": f"[^{_SPACE}]",
    "Z": r"\z",
}
_INSIDE = {"d": _DIGIT, "D": r"\P{Nd}", "w": _WORD, "s": _SPACE}


class PatternMatch(Protocol):
    def group(self, group: int | str = 0, /) -> Any: ...
    def start(self, group: int | str = 0, /) -> int: ...
    def end(self, group: int | str = 0, /) -> int: ...


class Pattern(Protocol):
    """The part of ``re.Pattern`` that RE2's compiled patterns share."""

    @property
    def pattern(self) -> str: ...
    @property
    def groups(self) -> int: ...
    @property
    def groupindex(self) -> Mapping[str, int]: ...
    def search(self, text: str, /) -> PatternMatch | None: ...
    def match(self, text: str, /) -> PatternMatch | None: ...
    def fullmatch(self, text: str, /) -> PatternMatch | None: ...
    def finditer(self, text: str, /) -> Iterator[PatternMatch]: ...
    def sub(self, repl: str | Callable[[PatternMatch], str], text: str, /) -> str: ...


def compile_pattern(
    pattern: str,
    *,
    where: str,
    ignore_case: bool = False,
    multiline: bool = False,
    dotall: bool = False,
    max_length: int = MAX_PATTERN,
    error: type[UserError] = UserError,
    never_capture: bool = False,
) -> Pattern:
    """Compile a user's pattern with RE2.

    Args:
        pattern: the user's regular expression (RE2 syntax; see the module doc).
        where: the place it came from, leading every error message
            (``"regex: param 'pattern'"``, ``"traces.redaction[0].pattern"``).
        ignore_case, multiline, dotall: as ``re.IGNORECASE``, ``re.MULTILINE``, ``re.DOTALL``.
        max_length: the longest pattern accepted.
        error: the ``UserError`` subclass to raise (``ParamError`` for evaluator params).
        never_capture: compile without capture groups (for a search that only asks whether).

    Raises:
        UserError: (or ``error``) naming ``where``, the pattern and why RE2 refuses it.

    Example:
        >>> compile_pattern(r"^\\d+$", where="example").search("١٢٣") is not None
        True
    """
    import re2  # a compiled extension: loaded by the first user pattern, not by `import evalsi`

    shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
    if not pattern or len(pattern) > max_length:
        raise error(
            f"{where}: expected a regular expression of 1-{max_length} characters, "
            f"got {len(pattern)}"
        )
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.case_sensitive = not ignore_case
    options.dot_nl = dotall
    options.never_capture = never_capture
    try:
        translated = _unicode_classes(pattern)
        return re2.compile(("(?m)" if multiline else "") + translated, options)  # type: ignore[no-any-return]
    except (re2.error, _Refused, UnicodeEncodeError) as e:
        raw = e.args[0] if e.args else ""  # RE2 gives its reason as bytes
        reason = raw.decode(errors="replace") if isinstance(raw, bytes) else str(e)
        raise error(
            f"{where}: {shown!r} is not a valid regular expression: {reason}", hint=_hint(reason)
        ) from None


class _Refused(ValueError):
    pass


def _unicode_classes(pattern: str) -> str:
    """The pattern with Python's Unicode meaning of ``\\d \\w \\s`` (and ``\\Z``) spelled out."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":  # \Q...\E is literal text in RE2: nothing inside is a class
                end = pattern.find("\\E", i + 2)
                end = n if end < 0 else end + 2
                out.append(pattern[i:end])
                i = end
                continue
            table = _INSIDE if in_class else _OUTSIDE
            if nxt in table:
                out.append(table[nxt])
            elif in_class and nxt in "WS":
                # A negated class inside a set is an intersection, which RE2 cannot spell.
                raise _Refused(
                    f"\\{nxt} inside [...] is not supported; "
                    f"write the set negated instead, e.g. [^\\{nxt.lower()}...]"
                )
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "[" and pattern.startswith("[:", i):  # a POSIX class such as [:alpha:]
                end = pattern.find(":]", i + 2)
                if end >= 0:
                    out.append(pattern[i : end + 2])
                    i = end + 2
                    continue
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            out.append(c)
            i += 1
            # A "]" first in a set (after an optional "^") is a literal, not its end.
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("]")
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _hint(reason: str) -> str:
    general = (
        "patterns use RE2 syntax (https://github.com/google/re2/wiki/Syntax), which matches in "
        "linear time"
    )
    if "invalid escape sequence: \\" in reason and reason[-1:].isdigit():
        return f"{general}: it has no backreferences"
    if "invalid perl operator: (?=" in reason or "invalid perl operator: (?!" in reason:
        return f"{general}: it has no lookahead; match the text itself instead"
    if "invalid perl operator: (?<" in reason:
        return f"{general}: it has no lookbehind; match the text itself instead"
    if "invalid perl operator: (?>" in reason or reason.endswith(("++", "*+", "?+", "}+")):
        return (
            f"{general}: atomic groups and possessive quantifiers are not needed (it never "
            "backtracks)"
        )
    if "repetition" in reason:
        return f"{general}: a count is at most 1000, and a repetition cannot repeat again"
    if "pattern too large" in reason:
        return f"{general}: this one compiles to more than its memory budget; simplify it"
    return general
