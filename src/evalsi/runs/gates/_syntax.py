"""What a gate may say, checked before any data is read: names, tokens, positions.

``EvaluatorMetrics`` and ``MetricRef`` say what a gate may name; a small lexer (``_tokens``)
finds each name's offset so that every static error (unknown name or field, bad ``metric(...)``
arguments, a ``passAtK(k)`` without a whole ``k``, CEL's own syntax errors) names its line and
column; ``_simple_side`` finds the metric side of ``A op B`` for the verdict's display. The
verdicts themselves live in ``_gates``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from evalsi.core import UserError, cel_module
from evalsi.runs._isolation import LEVELS

if TYPE_CHECKING:
    import cel

    from evalsi.evaluators import BoundEvaluator

MAX_GATE_LENGTH = 2000
"""Longest accepted expression, in characters (the CEL binding has no cost limit)."""
MAX_K = 10_000

FIELDS = (
    "mean", "std", "n", "scored", "skipped", "errors", "cancelled", "infra_errors", "ci",
    "isolation", "enforced",
)  # fmt: skip
LEVEL_WORDS = tuple(LEVELS)
"""Isolation level names a gate may use as constants (``none`` = 0 ... ``vm`` = 4), to compare
with ``metric(...).isolation``."""
CI_FIELDS = ("low", "high")
METHODS = ("passAtK", "passHatK")
FUNCTIONS = ("metric", "delta", "flaky_cases", "has", "size", "int", "uint", "double")
BASELINE = re.compile(r"\bbaseline\s*=(?!=)")
"""``delta('m', baseline='RUN')``: CEL has no keyword arguments, so ``baseline=`` is read as
blanks of the same width (every offset in an error message stays the one the user wrote)."""
_OPERATORS = frozenset(
    {
        "_+_", "_-_", "_*_", "_/_", "_%_", "-_", "!_", "_==_", "_!=_", "_<_", "_<=_", "_>_",
        "_>=_", "_&&_", "_||_", "_?_:_", "_[_]", "@in", "@not_strictly_false",
    }
)  # fmt: skip
_ALLOWED_FUNCTIONS = _OPERATORS | set(FUNCTIONS) | set(METHODS)
_COMPARISONS = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_LITERAL_WORDS = frozenset({"true", "false", "null", "in"})
_HELP = (
    "write e.g. metric('exact-match').mean >= 0.8; a metric has "
    + ", ".join(f for f in FIELDS if f != "ci")
    + ", ci.low, ci.high, passAtK(k), passHatK(k); isolation compares with the levels "
    + " < ".join(LEVEL_WORDS)
)


# ---------------------------------------------------------------------------------------------
# What a gate may name


@dataclass(frozen=True, slots=True)
class EvaluatorMetrics:
    """What a gate may name for one evaluator instance, known before any data is read.

    ``own`` is the metric its unnamed scores go to; ``declared`` its declared outputs (empty
    when it declares none, and then any metric name is accepted until the data says otherwise).
    """

    name: str
    own: str
    declared: tuple[str, ...] = ()

    @classmethod
    def of(cls, bound: BoundEvaluator) -> EvaluatorMetrics:
        manifest = bound.manifest
        return cls(bound.name, manifest.ref.name, tuple(o.name for o in manifest.outputs))

    def own_metric(self) -> str | None:
        if not self.declared or self.own in self.declared:
            return self.own
        return self.declared[0] if len(self.declared) == 1 else None

    def has(self, metric: str) -> bool:
        return not self.declared or metric in self.declared or metric == self.own


@dataclass(frozen=True, slots=True)
class MetricRef:
    """One ``metric(...)`` call in a gate, resolved to (evaluator instance, metric)."""

    evaluator: str
    metric: str
    text: str

    @property
    def label(self) -> str:
        return f"{self.evaluator}/{self.metric}"


# ---------------------------------------------------------------------------------------------
# Tokens: enough of CEL's lexical grammar to point at names; run only on text CEL has parsed.


@dataclass(frozen=True, slots=True)
class _Token:
    kind: Literal["ident", "string", "number", "op"]
    text: str
    start: int


_LEX = re.compile(
    r"(?P<space>[ \t\r\n\f]+|//[^\n]*)"
    r"|(?P<quote>(?:[rR][bB]?|[bB][rR]?)?(?:'''|\"\"\"|'|\"))"
    r"|(?P<number>0[xX][0-9a-fA-F]+[uU]?|\d*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)"
    r"|(?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])"
)


def _tokens(text: str) -> list[_Token] | int:
    """The tokens, or the offset of a character this lexer does not know."""
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _LEX.match(text, pos)
        if m is None:
            return pos
        kind = m.lastgroup
        if kind == "quote":
            end = _string_end(text, m.end(), m.group())
            if end < 0:
                return pos
            out.append(_Token("string", text[pos:end], pos))
            pos = end
            continue
        if kind != "space":
            out.append(_Token(kind, m.group(), pos))  # type: ignore[arg-type]
        pos = m.end()
    return out


def _string_end(text: str, body: int, opening: str) -> int:
    quote = opening.lstrip("rRbB")
    raw = "r" in opening[: len(opening) - len(quote)].lower()
    i = body
    while i < len(text):
        if text.startswith(quote, i):
            return i + len(quote)
        if text[i] == "\\" and not raw:
            i += 2
            continue
        if len(quote) == 1 and text[i] in "\r\n":
            return -1
        i += 1
    return -1


def _where(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}" if "\n" in text else f"column {column}"


# ---------------------------------------------------------------------------------------------
# The checks


@dataclass(frozen=True, slots=True)
class _Side:
    program: cel.Program
    text: str
    op: str  # as seen from this side: `0.8 <= m` is read as `m >= 0.8`
    other: str


@dataclass(slots=True)
class Reads:
    """What a gate reads: ``metric(...)`` calls (args -> index into ``refs``), ``delta(...)``
    calls (args -> index into ``deltas``: the metric and the baseline run), and whether it
    reads ``flaky_cases()``."""

    calls: dict[tuple[str, ...], int]
    refs: list[MetricRef]
    delta_calls: dict[tuple[str, ...], int]
    deltas: list[tuple[MetricRef, str]]
    cases: bool = False


def _check_tokens(
    expr: str,
    tokens: list[_Token],
    evaluators: Sequence[EvaluatorMetrics],
    bad: Callable[..., UserError],
) -> Reads:
    """Every name in the expression is a field, an allowed function, or a metric of the run."""
    reads = Reads({}, [], {}, [])
    for i, tok in enumerate(tokens):
        if tok.kind != "ident":
            continue
        prev = tokens[i - 1].text if i else ""
        before_dot = tokens[i - 2] if i >= 2 else None
        call = i + 1 < len(tokens) and tokens[i + 1].text == "("
        name = tok.text
        if prev == ".":
            after = before_dot.text if before_dot else ""
            if call and name in METHODS:
                _check_k(tokens, i, bad)
                if after not in (")", "]"):
                    raise bad(f"{name}(k) applies to metric(...)", tok.start)
            elif call:
                raise bad(f"unknown method .{name}()", tok.start)
            elif name in CI_FIELDS:
                if after != "ci":
                    raise bad(f"'{name}' is a field of ci: write .ci.{name}", tok.start)
            elif name in FIELDS:
                if after not in (")", "]"):
                    raise bad(f"'{name}' is a field of metric(...)", tok.start)
            else:
                raise bad(f"unknown field '{name}'", tok.start)
        elif name in _LITERAL_WORDS or (name in LEVEL_WORDS and not call):
            continue
        elif not call:
            if name == "metric":
                raise bad("metric needs a name: metric('exact-match')", tok.start)
            if name == "isolation":
                raise bad("'isolation' is a field of metric(...)", tok.start)
            if any(t.text == "isolation" for t in tokens):
                levels = ", ".join(LEVEL_WORDS)
                raise bad(f"unknown name '{name}' (the isolation levels are {levels})", tok.start)
            raise bad(f"unknown name '{name}'", tok.start)
        elif name == "metric":
            args, offsets = _metric_args(expr, tokens, i, bad)
            ref = _resolve(args, offsets, evaluators, tok, expr, bad)
            if args not in reads.calls:
                reads.calls[args] = len(reads.refs)
                reads.refs.append(ref)
        elif name == "delta":
            args, offsets = _metric_args(expr, tokens, i, bad, what="delta")
            if len(args) != 2 or not args[1].strip():
                raise bad(
                    "delta() takes a metric and the baseline run: "
                    "delta('exact-match', baseline='RUN_ID')",
                    tok.start,
                )
            ref = _resolve(args[:1], (offsets[0], offsets[-1]), evaluators, tok, expr, bad)
            if args not in reads.delta_calls:
                reads.delta_calls[args] = len(reads.deltas)
                reads.deltas.append((ref, args[1]))
        elif name == "flaky_cases":
            close = tokens[i + 2] if i + 2 < len(tokens) else None
            if close is None or close.text != ")":
                raise bad("flaky_cases() takes no argument", tok.start)
            reads.cases = True
        elif name in METHODS:
            raise bad(f"write metric('...').{name}(k), not {name}(...)", tok.start)
        elif name not in FUNCTIONS:
            allowed = ", ".join(f for f in FUNCTIONS if f != "metric")
            raise bad(f"unknown function '{name}' (the others allowed: {allowed})", tok.start)
    if not reads.refs and not reads.deltas and not reads.cases:
        raise bad("the gate reads no metric")
    return reads


def _check_k(tokens: list[_Token], i: int, bad: Callable[..., UserError]) -> None:
    name = tokens[i].text
    arg = tokens[i + 2] if i + 2 < len(tokens) else None
    close = tokens[i + 3] if i + 3 < len(tokens) else None
    digits = arg.text.rstrip("uU") if arg is not None else ""
    if arg is None or not digits.isdigit() or close is None or close.text != ")":
        where = arg.start if arg is not None else tokens[i].start
        raise bad(f"{name}(k) takes a whole number, e.g. {name}(3)", where)
    if not 1 <= int(digits) <= MAX_K:
        raise bad(f"{name}(k) needs 1 <= k <= {MAX_K:,}", arg.start)


def _metric_args(
    expr: str,
    tokens: list[_Token],
    i: int,
    bad: Callable[..., UserError],
    *,
    what: str = "metric",
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The quoted names of ``metric('a')`` or ``metric('a', 'b')`` (decoded by CEL itself),
    with the offset of each and, last, the offset just past the closing parenthesis."""
    args: list[str] = []
    offsets: list[int] = []
    j = i + 2
    while True:
        tok = tokens[j] if j < len(tokens) else None
        if tok is None or tok.kind != "string":
            where = tok.start if tok is not None else len(expr)
            raise bad(f"{what}() takes one or two quoted names", where)
        value = cel_module().evaluate(tok.text)
        if not isinstance(value, str):
            raise bad(f"{what}() takes text, not bytes", tok.start)
        args.append(value)
        offsets.append(tok.start)
        sep = tokens[j + 1] if j + 1 < len(tokens) else None
        if sep is not None and sep.text == ")" and len(args) <= 2:
            return tuple(args), (*offsets, sep.start + 1)
        if sep is None or sep.text != "," or len(args) >= 2:
            where = sep.start if sep is not None else len(expr)
            raise bad(f"{what}() takes one or two quoted names", where)
        j += 2


def _resolve(
    args: tuple[str, ...],
    offsets: tuple[int, ...],
    evaluators: Sequence[EvaluatorMetrics],
    tok: _Token,
    expr: str,
    bad: Callable[..., UserError],
) -> MetricRef:
    by_name = {e.name: e for e in evaluators}
    names = ", ".join(by_name) or "(none)"
    text = expr[tok.start : offsets[-1]]
    first = args[0]
    if len(args) == 2:
        ev = by_name.get(first)
        metric: str | None = args[1]
    elif first in by_name:
        ev, metric = by_name[first], None
    else:
        ev, metric = None, None
        for cut in (m.start() for m in re.finditer("/", first)):
            if first[:cut] in by_name:
                ev, metric = by_name[first[:cut]], first[cut + 1 :]
                break
    if ev is None:
        raise bad(
            f"no evaluator {first!r} in this run",
            offsets[0],
            hint=f"the evaluators are: {names}",
        )
    if metric is None:
        metric = ev.own_metric()
        if metric is None:
            raise bad(
                f"evaluator {ev.name!r} has several metrics",
                offsets[0],
                hint=f"name one: metric('{ev.name}', '{ev.declared[0]}'); "
                f"its metrics: {', '.join(ev.declared)}",
            )
    if not metric or not ev.has(metric):
        raise bad(
            f"evaluator {ev.name!r} has no metric {metric!r}",
            offsets[len(args) - 1],
            hint=f"its metrics: {', '.join(ev.declared)}",
        )
    return MetricRef(ev.name, metric, text)


def _simple_side(expr: str, tokens: list[_Token]) -> _Side | None:
    """For ``A op B`` with one top-level comparison: the side that reads a metric."""
    depth = 0
    found: list[_Token] = []
    for tok in tokens:
        if tok.text in "([{" and tok.kind == "op":
            depth += 1
        elif tok.text in ")]}" and tok.kind == "op":
            depth -= 1
        elif depth == 0 and tok.kind == "op" and tok.text in ("&&", "||", "?", ":"):
            return None
        elif depth == 0 and tok.kind == "op" and tok.text in _COMPARISONS:
            found.append(tok)
    if len(found) != 1:
        return None
    op = found[0]
    left, right = expr[: op.start].strip(), expr[op.start + len(op.text) :].strip()
    reads = [
        any(t.text in _READERS and t.kind == "ident" for t in _side_tokens(s))
        for s in (left, right)
    ]
    if reads[0]:
        text, other, shown_op = left, right, op.text
    elif reads[1]:
        text, other, shown_op = right, left, _COMPARISONS[op.text]
    else:
        return None
    try:
        program = cel_module().compile(text)
    except ValueError:
        return None
    return _Side(program, text, shown_op, other)


_READERS = ("metric", "delta", "flaky_cases")


def _side_tokens(text: str) -> list[_Token]:
    tokens = _tokens(text)
    return [] if isinstance(tokens, int) else tokens


# ---------------------------------------------------------------------------------------------
# Small helpers


def _shorten(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _first_sentence(text: str) -> str:
    first = text.strip().split("\n", 1)[0]
    cut = first.find(". ")
    return first if cut < 0 else first[: cut + 1]


def _syntax_error(expr: str, message: str) -> tuple[str, int | None]:
    """CEL's first ``<input>:LINE:COL: what`` as (what, offset into ``expr``)."""
    m = re.search(r"<input>:(\d+):(\d+): (?:Syntax error: )?([^\n]*)", message)
    if m is None:
        return f"syntax error: {_first_sentence(message)}", None
    line, column, what = int(m[1]), int(m[2]), m[3]
    starts = [0] + [i + 1 for i, c in enumerate(expr) if c == "\n"]
    offset = starts[min(line, len(starts)) - 1] + max(column - 1, 0)
    what = re.sub(r" expecting \{[^}]*\}", "", what)
    return f"syntax error: {what}", min(offset, len(expr))


def _find(tokens: list[_Token], name: str) -> int | None:
    for tok in tokens:
        if tok.text == name or (tok.kind == "string" and tok.text.strip("'\"") == name):
            return tok.start
    return None
