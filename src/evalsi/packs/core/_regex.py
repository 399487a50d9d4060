"""The ``regex`` evaluator: the output matches a regular expression compiled once per bind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from evalsi.core import ParamError, PatternMatch, Record, Score, compile_pattern
from evalsi.packs._declare import builtin, passed
from evalsi.packs.core._reference import quoted


class Regex:
    """Pass when the output matches a regular expression.

    Applies the pattern to ``output.as_text()`` with RE2, which matches in time linear in the
    text whatever the pattern, so no pattern can stall a run or the server. The syntax is
    Python's minus what needs backtracking: no backreferences, lookahead or lookbehind (see
    ``evalsi.core.compile_pattern`` for the small differences). The pattern is compiled once
    when the evaluator is bound; an invalid pattern is a param error then, not a failure on
    every record.

    Args:
        pattern: the regular expression (required).
        mode: ``search`` (default) matches anywhere, ``match`` at the start, ``fullmatch`` the
            whole text.
        ignore_case: match case-insensitively (``re.IGNORECASE``).
        multiline: ``^`` and ``$`` match at every line (``re.MULTILINE``).
        dotall: ``.`` matches newlines too (``re.DOTALL``).
    """

    __slots__ = ("_match", "_pattern")

    def __init__(
        self,
        *,
        pattern: str,
        mode: Literal["search", "match", "fullmatch"] = "search",
        ignore_case: bool = False,
        multiline: bool = False,
        dotall: bool = False,
    ) -> None:
        compiled = compile_pattern(
            pattern,
            where="regex: param 'pattern'",
            ignore_case=ignore_case,
            multiline=multiline,
            dotall=dotall,
            error=ParamError,
            never_capture=True,  # only whether it matches: RE2 picks its fastest engine
        )
        self._match: Callable[[str], PatternMatch | None] = getattr(compiled, mode)
        self._pattern = f"{quoted(pattern)} ({mode})"

    def __call__(self, record: Record) -> bool | Score:
        out = record.output
        assert out is not None
        text = out.as_text()
        if self._match(text) is not None:
            return True
        why = f"no match for pattern {self._pattern}, got {quoted(text)}"
        return Score(passed=False, explanation=why)


regex = builtin(
    "core",
    "regex",
    passed("regex", "the output matches the pattern"),
    example="evalsi eval --data math.jsonl --evaluators regex "
    "--param 'regex.pattern=^\\d+$' --param regex.mode=fullmatch",
)(Regex)
