"""CI gates: CEL conditions over a run's metric summaries, with an honest third verdict.

A gate reads like ``metric('exact-match').mean >= 0.8``. ``metric('evaluator')`` is that
evaluator's own metric; ``metric('evaluator', 'metric')`` or ``metric('evaluator/metric')`` a
named one. A metric has ``mean``, ``std``, ``n``, ``scored``, ``skipped``, ``errors``,
``cancelled``, ``infra_errors``, ``ci.low``, ``ci.high`` and the methods ``passAtK(k)`` and
``passHatK(k)``. The CEL binding passes a receiver to a registered function as its first
argument, so ``.passAtK(3)`` needs no rewriting.

Everything that can be wrong with a gate is found before any data is read (``Gate.parse``):
syntax, names that are neither a field nor an allowed function, evaluators and metrics the run
does not have, a result that is not true/false. The expression has no variables, so CEL's
comprehension macros cannot run and evaluation cost is bounded by the length cap.

A gate is **inconclusive** (never failed) when a metric it reads lacks eligible data: completion
``scored / (scored + skipped + errors + cancelled + infra_errors)`` below
``min_completion_rate``, evaluator error rate ``errors / (scored + errors)`` above
``max_evaluator_error_rate``, ``n == 0``, or a field it needs is undefined (``ci.low`` without an
interval, ``passAtK(3)`` without three trials).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from evalsi.core import MetricSummary, UserError

if TYPE_CHECKING:
    import cel

    from evalsi.evaluators import BoundEvaluator

MAX_GATE_LENGTH = 2000
"""Longest accepted expression, in characters (the CEL binding has no cost limit)."""
MAX_GATES = 100
MAX_K = 10_000

Verdict = Literal["passed", "failed", "inconclusive"]

FIELDS = ("mean", "std", "n", "scored", "skipped", "errors", "cancelled", "infra_errors", "ci")
CI_FIELDS = ("low", "high")
METHODS = ("passAtK", "passHatK")
FUNCTIONS = ("metric", "has", "size", "int", "uint", "double")
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
    + ", ci.low, ci.high, passAtK(k), passHatK(k)"
)


_MIXED = (
    "CEL does not mix int and double in arithmetic: write 100.0, not 100, or double(metric('x').n)"
)


def _cel() -> Any:
    # Imported on first use: the package's own CLI pulls in typer and prompt-toolkit (~0.1 s),
    # which runs without gates should not pay for.
    import cel

    return cel


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
# Results


@dataclass(frozen=True, slots=True)
class GateResult:
    """A gate's verdict. ``value`` is the observed side of a simple comparison (the number the
    threshold was checked against), else the expression's result; null when inconclusive."""

    expr: str
    verdict: Verdict
    value: float | int | bool | None
    reason: str

    @property
    def passed(self) -> bool | None:
        return None if self.verdict == "inconclusive" else self.verdict == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "passed": self.passed,
            "verdict": self.verdict,
            "value": self.value,
            "reason": self.reason,
        }


# ---------------------------------------------------------------------------------------------
# The gate


@dataclass(frozen=True, slots=True)
class _Side:
    program: cel.Program
    text: str
    op: str  # as seen from this side: `0.8 <= m` is read as `m >= 0.8`
    other: str


class Gate:
    """One parsed, statically checked gate; ``evaluate`` gives its verdict on a run's metrics.

    Example:
        >>> from evalsi.runs import EvaluatorMetrics, Gate
        >>> gate = Gate.parse("metric('exact-match').mean >= 0.8", [EvaluatorMetrics(
        ...     "exact-match", "exact-match", ("exact-match",))])
        >>> gate.refs[0].label
        'exact-match/exact-match'
    """

    __slots__ = ("_calls", "_program", "_side", "expr", "index", "refs")

    def __init__(
        self,
        expr: str,
        index: int,
        program: cel.Program,
        calls: dict[tuple[str, ...], int],
        refs: tuple[MetricRef, ...],
        side: _Side | None,
    ) -> None:
        self.expr = expr
        self.index = index
        self._program = program
        self._calls = calls
        self.refs = refs
        self._side = side

    def __repr__(self) -> str:
        return f"<Gate {self.expr!r}>"

    @classmethod
    def parse(cls, expr: str, evaluators: Sequence[EvaluatorMetrics], *, index: int = 1) -> Gate:
        """Parse and check ``expr`` against the run's evaluators; raise ``UserError`` if bad."""
        if not isinstance(expr, str):
            raise UserError(f"gate {index} must be a string, got {type(expr).__name__}")
        shown = _shorten(expr)

        def bad(problem: str, offset: int | None = None, hint: str | None = _HELP) -> UserError:
            where = "" if offset is None else f" at {_where(expr, offset)}"
            return UserError(f"gate {index} `{shown}`: {problem}{where}", hint=hint)

        if not expr.strip():
            raise bad("the expression is empty")
        if len(expr) > MAX_GATE_LENGTH:
            raise bad(
                f"the expression is {len(expr):,} characters; the limit is {MAX_GATE_LENGTH:,}",
                hint="split it into several gates",
            )
        bad_char = next((i for i, c in enumerate(expr) if "\ud800" <= c <= "\udfff"), None)
        if bad_char is not None:
            raise bad("the expression is not valid Unicode text", bad_char, hint=None)
        cel = _cel()
        try:
            program = cel.compile(expr)
        except ValueError as e:
            problem, offset = _syntax_error(expr, str(e))
            raise bad(problem, offset) from None
        tokens = _tokens(expr)
        if isinstance(tokens, int):
            raise bad("this gate uses syntax evalsi does not support", tokens)
        calls, refs = _check_tokens(expr, tokens, evaluators, bad)
        unknown = sorted(set(program.functions()) - _ALLOWED_FUNCTIONS)
        if unknown or program.variables():
            # The token check above names these with a position; this is the backstop.
            names = ", ".join(unknown + list(program.variables()))
            raise bad(f"unknown name(s): {names}")
        gate = cls(expr, index, program, calls, tuple(refs), _simple_side(expr, tokens))
        gate._dry_run(bad, tokens)
        return gate

    def _dry_run(self, bad: Callable[..., UserError], tokens: list[_Token]) -> None:
        """Evaluate on made-up complete metrics: type errors and non-boolean results are errors
        of the gate itself, whatever the data will be."""
        for profile in (_HIGH, _LOW):
            problems: list[str] = []
            fields = {k: v for k, v in profile.items() if k != "pass"}
            values = [dict(fields, __key=i) for i in range(len(self.refs))]
            context = self._context(values, problems, _constant(profile["pass"]))
            try:
                result = self._program.execute(context)
            except KeyError as e:
                key = str(e.args[0]) if e.args else ""
                raise bad(f"no field {key!r}", _find(tokens, key)) from None
            except TypeError as e:
                if problems:
                    raise bad("; ".join(problems)) from None
                text = _first_sentence(str(e))
                mixed = "int" in text and "float" in text
                raise bad(
                    f"the types do not fit: {text}", hint=_MIXED if mixed else _HELP
                ) from None
            except RuntimeError as e:
                # Every name is defined, so "undefined function" means no overload for the
                # argument's type (`size(0.5)`); other failures (1/0, overflow) depend on data.
                m = _UNDEFINED.search(str(e))
                if m is None:
                    continue
                call = next((t.start for t in tokens if t.text == m[1]), None)
                raise bad(_explain(e), call) from None
            except Exception:  # noqa: BLE001 - data-dependent (1/0, overflow): decided at run time
                continue
            if problems:
                raise bad("; ".join(problems))
            if not isinstance(result, bool):
                raise bad(
                    f"gives {_cel_type(result)}, not true or false",
                    hint="compare it with a threshold, e.g. "
                    f"{_shorten(self.expr, 50)} >= {30 if isinstance(result, int) else 0.8}",
                )

    def evaluate(
        self,
        metrics: Sequence[MetricSummary],
        *,
        min_completion_rate: float = 0.8,
        max_evaluator_error_rate: float = 0.1,
    ) -> GateResult:
        """The verdict on ``metrics``: passed, failed, or inconclusive (with the reason)."""
        table = {(m.evaluator, m.metric): m for m in metrics}
        problems: list[str] = []
        found: list[MetricSummary] = []
        for ref in self.refs:
            summary = table.get((ref.evaluator, ref.metric))
            if summary is None:
                have = [m.metric for m in metrics if m.evaluator == ref.evaluator]
                made = f" ({ref.evaluator} produced {', '.join(have)})" if have else ""
                problems.append(f"{ref.text}: this run has no such metric{made}")
                continue
            found.append(summary)
            why = _ineligible(summary, min_completion_rate, max_evaluator_error_rate)
            if why:
                problems.append(f"{ref.text}: {why}")
        if problems:
            return self._inconclusive("; ".join(dict.fromkeys(problems)))
        values = [dict(_fields(m), __key=i) for i, m in enumerate(found)]
        undefined: list[str] = []

        def pass_k(i: int, k: int, hat: bool) -> float | None:
            return _pass_k(found[i], self.refs[i], k, hat, undefined)

        context = self._context(values, undefined, pass_k)
        try:
            result = self._program.execute(context)
        except KeyError as e:
            key = str(e.args[0]) if e.args else ""
            return self._inconclusive(_undefined_field(key, self.refs, found) or f"no key {key!r}")
        except Exception as e:  # noqa: BLE001 - the CEL engine's errors become the reason
            reason = "; ".join(undefined) or f"could not evaluate: {_explain(e)}"
            return self._inconclusive(reason)
        if not isinstance(result, bool):
            return self._inconclusive(f"gave {_cel_type(result)}, not true or false")
        verdict: Verdict = "passed" if result else "failed"
        value: float | int | bool | None = result
        reason = f"the expression is {'true' if result else 'false'}"
        if self._side is not None:
            try:
                observed = _plain(self._side.program.execute(context))
            except Exception:  # noqa: BLE001 - the verdict stands; only the display degrades
                observed = None
            if observed is not None and not isinstance(observed, bool):
                value = observed
                side = self._side
                reason = (
                    f"{_fmt(observed)} {side.op} {side.other}"
                    if result
                    else f"{_fmt(observed)}, needs {side.op} {side.other}"
                )
        return GateResult(self.expr, verdict, value, reason)

    def _inconclusive(self, reason: str) -> GateResult:
        return GateResult(self.expr, "inconclusive", None, reason)

    def _context(
        self,
        values: list[dict[str, Any]],
        problems: list[str],
        pass_k: Callable[[int, int, bool], float | None],
    ) -> Any:
        calls = self._calls

        def metric(*args: Any) -> dict[str, Any] | None:
            index = calls.get(tuple(args))
            return None if index is None else values[index]

        def method(hat: bool) -> Callable[[Any, Any], float | None]:
            name = "passHatK" if hat else "passAtK"

            def call(receiver: Any, k: Any) -> float | None:
                i = receiver.get("__key") if isinstance(receiver, dict) else None
                if not isinstance(i, int) or not isinstance(k, int) or isinstance(k, bool):
                    problems.append(f"{name}(k) applies to metric(...) with a whole number k")
                    return None
                return pass_k(i, k, hat)

            return call

        return _cel().Context(
            functions={"metric": metric, "passAtK": method(False), "passHatK": method(True)}
        )


def _check_tokens(
    expr: str,
    tokens: list[_Token],
    evaluators: Sequence[EvaluatorMetrics],
    bad: Callable[..., UserError],
) -> tuple[dict[tuple[str, ...], int], list[MetricRef]]:
    """Every name in the expression is a field, an allowed function, or a metric of the run."""
    calls: dict[tuple[str, ...], int] = {}
    refs: list[MetricRef] = []
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
        elif name in _LITERAL_WORDS:
            continue
        elif not call:
            if name == "metric":
                raise bad("metric needs a name: metric('exact-match')", tok.start)
            raise bad(f"unknown name '{name}'", tok.start)
        elif name == "metric":
            args, offsets = _metric_args(expr, tokens, i, bad)
            ref = _resolve(args, offsets, evaluators, tok, expr, bad)
            if args not in calls:
                calls[args] = len(refs)
                refs.append(ref)
        elif name in METHODS:
            raise bad(f"write metric('...').{name}(k), not {name}(...)", tok.start)
        elif name not in FUNCTIONS:
            allowed = ", ".join(f for f in FUNCTIONS if f != "metric")
            raise bad(f"unknown function '{name}' (the others allowed: {allowed})", tok.start)
    if not refs:
        raise bad("the gate reads no metric")
    return calls, refs


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
    expr: str, tokens: list[_Token], i: int, bad: Callable[..., UserError]
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
            raise bad("metric() takes one or two quoted names", where)
        value = _cel().evaluate(tok.text)
        if not isinstance(value, str):
            raise bad("metric() takes text, not bytes", tok.start)
        args.append(value)
        offsets.append(tok.start)
        sep = tokens[j + 1] if j + 1 < len(tokens) else None
        if sep is not None and sep.text == ")" and len(args) <= 2:
            return tuple(args), (*offsets, sep.start + 1)
        if sep is None or sep.text != "," or len(args) >= 2:
            where = sep.start if sep is not None else len(expr)
            raise bad("metric() takes one or two quoted names", where)
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
        any(t.text == "metric" and t.kind == "ident" for t in _side_tokens(s))
        for s in (left, right)
    ]
    if reads[0]:
        text, other, shown_op = left, right, op.text
    elif reads[1]:
        text, other, shown_op = right, left, _COMPARISONS[op.text]
    else:
        return None
    try:
        program = _cel().compile(text)
    except ValueError:
        return None
    return _Side(program, text, shown_op, other)


def _side_tokens(text: str) -> list[_Token]:
    tokens = _tokens(text)
    return [] if isinstance(tokens, int) else tokens


# ---------------------------------------------------------------------------------------------
# Data


def _fields(m: MetricSummary) -> dict[str, Any]:
    """A metric as CEL sees it; undefined values are left out, so reading one is a KeyError."""
    out: dict[str, Any] = {
        "n": m.n,
        "scored": m.scored,
        "skipped": m.skipped,
        "errors": m.errors,
        "cancelled": m.cancelled,
        "infra_errors": m.infra_errors,
    }
    for key, value in (("mean", m.mean), ("std", m.std)):
        if value is not None and math.isfinite(value):
            out[key] = float(value)
    ci = {
        key: float(value)
        for key, value in (("low", m.ci.low), ("high", m.ci.high))
        if value is not None and math.isfinite(value)
    }
    out["ci"] = ci
    return out


_HIGH: dict[str, Any] = {
    "mean": 0.9, "std": 0.1, "n": 100, "scored": 100, "skipped": 0, "errors": 0, "cancelled": 0,
    "infra_errors": 0, "ci": {"low": 0.85, "high": 0.95}, "pass": 0.95,
}  # fmt: skip
_LOW: dict[str, Any] = {
    "mean": 0.1, "std": 0.3, "n": 3, "scored": 3, "skipped": 1, "errors": 1, "cancelled": 0,
    "infra_errors": 0, "ci": {"low": 0.0, "high": 0.4}, "pass": 0.05,
}  # fmt: skip


def _ineligible(m: MetricSummary, min_completion: float, max_errors: float) -> str | None:
    total = m.scored + m.skipped + m.errors + m.cancelled + m.infra_errors
    if total and m.scored / total < min_completion:
        lost = [
            f"{count} {what}"
            for count, what in (
                (m.skipped, "skipped"),
                (m.errors, "errors"),
                (m.cancelled, "cancelled"),
                (m.infra_errors, "infra errors"),
            )
            if count
        ]
        return (
            f"completion {_pct(m.scored / total)} is below {_pct(min_completion)} "
            f"({m.scored} of {total} scored; {', '.join(lost)})"
        )
    attempted = m.scored + m.errors
    if attempted and m.errors / attempted > max_errors:
        return (
            f"evaluator error rate {_pct(m.errors / attempted)} is above {_pct(max_errors)} "
            f"({m.errors} of {attempted})"
        )
    if m.n == 0:
        return "no scored values (n=0)"
    return None


def _pass_k(
    m: MetricSummary, ref: MetricRef, k: int, hat: bool, undefined: list[str]
) -> float | None:
    table = m.pass_hat_k if hat else m.pass_at_k
    name = "passHatK" if hat else "passAtK"
    value = table.get(str(k))
    if value is None and k == 1 and m.kind == "passed" and m.mean is not None:
        value = m.mean  # one trial: pass@1 and pass^1 are the pass rate
    if value is not None and math.isfinite(value):
        return float(value)
    if m.kind != "passed":
        why = f"pass@k needs a pass/fail metric; {ref.label} is a {m.kind} metric"
    elif table:
        why = f"this run has it for k in {', '.join(sorted(table, key=int))}"
    else:
        why = f"it needs at least {k} trials per sample; this run has one"
    undefined.append(f"{ref.text}.{name}({k}) is undefined: {why}")
    return None


def _undefined_field(
    key: str, refs: Sequence[MetricRef], found: Sequence[MetricSummary]
) -> str | None:
    for ref, m in zip(refs, found, strict=True):
        if key in CI_FIELDS and (m.ci.low if key == "low" else m.ci.high) is None:
            return f"{ref.text}.ci.{key} is undefined (interval method: {m.ci.method})"
        if key in ("mean", "std") and getattr(m, key) is None:
            return f"{ref.text}.{key} is undefined ({m.kind} metric, n={m.n})"
    return None


# ---------------------------------------------------------------------------------------------
# Many gates


def check_rates(min_completion_rate: float, max_evaluator_error_rate: float) -> None:
    """Both thresholds are fractions in [0, 1]."""
    for name, value in (
        ("min_completion_rate", min_completion_rate),
        ("max_evaluator_error_rate", max_evaluator_error_rate),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise UserError(
                f"{name} must be a number between 0 and 1, got {value!r}",
                hint="for example 0.8 (80%)",
            )


def parse_gates(
    exprs: str | Iterable[str],
    evaluators: Iterable[EvaluatorMetrics | BoundEvaluator],
    *,
    min_completion_rate: float = 0.8,
    max_evaluator_error_rate: float = 0.1,
) -> list[Gate]:
    """Parse and check every gate before any data is read; ``UserError`` names the bad one."""
    check_rates(min_completion_rate, max_evaluator_error_rate)
    items = [exprs] if isinstance(exprs, str) else list(exprs)
    if len(items) > MAX_GATES:
        raise UserError(f"{len(items)} gates given; the limit is {MAX_GATES}")
    targets = [e if isinstance(e, EvaluatorMetrics) else EvaluatorMetrics.of(e) for e in evaluators]
    return [Gate.parse(expr, targets, index=i) for i, expr in enumerate(items, 1)]


def evaluate_gates(
    gates: Sequence[Gate],
    metrics: Sequence[MetricSummary],
    *,
    min_completion_rate: float = 0.8,
    max_evaluator_error_rate: float = 0.1,
) -> list[dict[str, Any]]:
    """Every gate's verdict as the JSON dict of DESIGN.md §4 (plus ``verdict`` and ``reason``)."""
    return [
        g.evaluate(
            metrics,
            min_completion_rate=min_completion_rate,
            max_evaluator_error_rate=max_evaluator_error_rate,
        ).to_dict()
        for g in gates
    ]


def gates_exit_code(results: Iterable[Mapping[str, Any]]) -> int:
    """0 every gate passed (or none given); 1 one failed; 2 none failed but one is undecided.

    A failure wins over an inconclusive gate: what was measured already breaks the bar.
    """
    verdicts = {r.get("verdict") for r in results}
    if "failed" in verdicts:
        return 1
    if verdicts - {"passed"}:
        return 2
    return 0


GATE_COLUMNS = ("verdict", "gate", "value", "reason")
_MARKS = {"passed": ("✔", "+"), "failed": ("✘", "x"), "inconclusive": ("?", "?")}


def gate_rows(
    results: Iterable[Mapping[str, Any]], *, ascii_only: bool | None = None
) -> list[tuple[str, str, str, str]]:
    """Table rows for stored gate results; marks fall back to ASCII when stdout cannot print ✔."""
    if ascii_only is None:
        ascii_only = not _can_print("✔✘")
    rows = []
    for r in results:
        verdict = str(r.get("verdict") or _verdict_of(r.get("passed")))
        marks = _MARKS.get(verdict, ("?", "?"))
        mark = marks[1] if ascii_only else marks[0]
        expr = _shorten(str(r.get("expr", "")), 70)
        if ascii_only:
            expr = expr.replace("…", "...")
        value = r.get("value")
        rows.append((f"{mark} {verdict}", expr, _fmt(value), str(r.get("reason") or "")))
    return rows


def _verdict_of(passed: Any) -> str:
    return "inconclusive" if passed is None else "passed" if passed else "failed"


def _can_print(text: str) -> bool:
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Small helpers


def _shorten(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pct(x: float) -> str:
    return f"{x * 100:.4g}%"


def _plain(value: Any) -> float | int | bool | None:
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def _cel_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "a number"
    names = {"str": "a string", "bytes": "bytes", "list": "a list", "dict": "a map"}
    return names.get(type(value).__name__, type(value).__name__)


def _constant(rate: float) -> Callable[[int, int, bool], float | None]:
    def pass_k(_i: int, _k: int, _hat: bool) -> float | None:
        return rate

    return pass_k


_UNDEFINED = re.compile(r"Undefined variable or function: '(\w+)'")


def _explain(e: Exception) -> str:
    m = _UNDEFINED.search(str(e))
    if m is not None:  # the binding's words when no overload fits a built-in's argument
        return f"{m[1]}() does not take that type of argument"
    return _first_sentence(str(e))


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
