"""CI gates: CEL conditions over a run's metric summaries, with an honest third verdict.

A gate reads like ``metric('exact-match').mean >= 0.8``. ``metric('evaluator')`` is that
evaluator's own metric; ``metric('evaluator', 'metric')`` or ``metric('evaluator/metric')`` a
named one. A metric has ``mean``, ``std``, ``n``, ``scored``, ``skipped``, ``errors``,
``cancelled``, ``infra_errors``, ``ci.low``, ``ci.high``, ``isolation`` and the methods
``passAtK(k)`` and ``passHatK(k)``. ``isolation`` is the weakest sandbox level the evaluator's
scored results ran at, compared with the level constants ``none`` < ``confined`` <
``namespaced`` < ``kernel`` < ``vm`` (0 to 4): ``metric('code-exec-tests').isolation >=
namespaced``; ``enforced`` is true when every one of them had every limit it asked for
enforced (``&& metric('code-exec-tests').enforced`` refuses partial enforcement). The CEL
binding passes a receiver to a registered function as its first argument, so ``.passAtK(3)``
needs no rewriting. ``delta('evaluator', baseline='RUN')`` reads the paired comparison of the
run against a baseline run (``mean``, ``n``, ``ci.low``, ``ci.high``) and ``flaky_cases()`` the
scenarios whose trials disagree; both come from the caller that holds the store (``GateData``).

Everything that can be wrong with a gate is found before any data is read (``Gate.parse``):
syntax, names that are neither a field nor an allowed function, evaluators and metrics the run
does not have, a result that is not true/false. The expression has no variables but the five
level constants (and no method outside ``passAtK``/``passHatK``), so CEL's comprehension macros
cannot run and evaluation cost is bounded by the length cap.

A gate is **inconclusive** (never failed) when a metric it reads lacks eligible data: completion
``scored / (scored + skipped + errors + cancelled + infra_errors)`` below
``min_completion_rate``, evaluator error rate ``errors / (scored + errors)`` above
``max_evaluator_error_rate``, ``n == 0``, or a field it needs is undefined (``ci.low`` without an
interval, ``passAtK(3)`` without three trials, ``isolation`` or ``enforced`` when the evaluator
reported no sandbox isolation for some or all of its scored results).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalsi.core import MetricSummary, UserError, cel_module
from evalsi.runs._isolation import LEVELS, IsolationSummary
from evalsi.runs.gates._data import (
    _HIGH,
    _LOW,
    GateData,
    _fields,
    _ineligible,
    _pass_k,
    _undefined_field,
)
from evalsi.runs.gates._results import GateResult, Verdict, _fmt
from evalsi.runs.gates._syntax import (
    _ALLOWED_FUNCTIONS,
    _HELP,
    BASELINE,
    LEVEL_WORDS,
    MAX_GATE_LENGTH,
    EvaluatorMetrics,
    Reads,
    _check_tokens,
    _find,
    _first_sentence,
    _shorten,
    _Side,
    _simple_side,
    _syntax_error,
    _Token,
    _tokens,
    _where,
)

if TYPE_CHECKING:
    import cel

    from evalsi.evaluators import BoundEvaluator

MAX_GATES = 100


_MIXED = (
    "CEL does not mix int and double in arithmetic: write 100.0, not 100, or double(metric('x').n)"
)


# ---------------------------------------------------------------------------------------------
# The gate


class Gate:
    """One parsed, statically checked gate; ``evaluate`` gives its verdict on a run's metrics.

    Example:
        >>> from evalsi.runs import EvaluatorMetrics, Gate
        >>> gate = Gate.parse("metric('exact-match').mean >= 0.8", [EvaluatorMetrics(
        ...     "exact-match", "exact-match", ("exact-match",))])
        >>> gate.refs[0].label
        'exact-match/exact-match'
    """

    __slots__ = ("_program", "_reads", "_side", "expr", "index", "refs")

    def __init__(
        self, expr: str, index: int, program: cel.Program, reads: Reads, side: _Side | None
    ) -> None:
        self.expr = expr
        self.index = index
        self._program = program
        self._reads = reads
        self.refs = tuple(reads.refs)
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
        cel = cel_module()
        text = BASELINE.sub(lambda m: " " * len(m.group()), expr)
        try:
            program = cel.compile(text)
        except ValueError as e:
            problem, offset = _syntax_error(expr, str(e))
            raise bad(problem, offset) from None
        tokens = _tokens(text)
        if isinstance(tokens, int):
            raise bad("this gate uses syntax evalsi does not support", tokens)
        reads = _check_tokens(expr, tokens, evaluators, bad)  # offsets: the same in both
        unknown = sorted(set(program.functions()) - _ALLOWED_FUNCTIONS)
        variables = [v for v in program.variables() if v not in LEVEL_WORDS]
        if unknown or variables:
            # The token check above names these with a position; this is the backstop.
            names = ", ".join(unknown + variables)
            raise bad(f"unknown name(s): {names}")
        gate = cls(expr, index, program, reads, _simple_side(text, tokens))
        gate._dry_run(bad, tokens)
        return gate

    def _dry_run(self, bad: Callable[..., UserError], tokens: list[_Token]) -> None:
        """Evaluate on made-up complete metrics: type errors and non-boolean results are errors
        of the gate itself, whatever the data will be."""
        for profile in (_HIGH, _LOW):
            problems: list[str] = []
            fields = {k: v for k, v in profile.items() if k != "pass"}
            values = [dict(fields, __key=i) for i in range(len(self.refs))]
            deltas = [
                {"mean": fields["mean"] - 0.5, "n": fields["n"], "ci": fields["ci"]}
                for _ in self._reads.deltas
            ]
            flaky = 0 if profile is _HIGH else 3
            context = self._context(
                values, problems, _constant(profile["pass"]), deltas=deltas, flaky=flaky
            )
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
                    f"{_shorten(self.expr, 50)} >= {_threshold(self.expr, result)}",
                )

    def evaluate(
        self,
        metrics: Sequence[MetricSummary],
        *,
        min_completion_rate: float = 0.8,
        max_evaluator_error_rate: float = 0.1,
        isolation: Sequence[IsolationSummary] | None = None,
        data: GateData | None = None,
    ) -> GateResult:
        """The verdict on ``metrics``: passed, failed, or inconclusive (with the reason).

        ``isolation`` is the run's per-evaluator isolation (``ScoreResult.isolation``); without
        it, a gate that reads ``.isolation`` is inconclusive. ``data`` answers ``delta(...)``
        and ``flaky_cases()``; without it, a gate that reads them is inconclusive.
        """
        table = {(m.evaluator, m.metric): m for m in metrics}
        isolated = {s.evaluator: s for s in isolation or ()}
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
        deltas, flaky = self._extras(data, problems)
        if problems:
            return self._inconclusive("; ".join(dict.fromkeys(problems)))
        values = [dict(_fields(m, isolated.get(m.evaluator)), __key=i) for i, m in enumerate(found)]
        undefined: list[str] = []

        def pass_k(i: int, k: int, hat: bool) -> float | None:
            return _pass_k(found[i], self.refs[i], k, hat, undefined)

        context = self._context(values, undefined, pass_k, deltas=deltas, flaky=flaky)
        try:
            result = self._program.execute(context)
        except KeyError as e:
            key = str(e.args[0]) if e.args else ""
            if key in ("isolation", "enforced") and isolation is None:
                return self._inconclusive(
                    f"{key} is undefined: this run's sandbox isolation was not collected"
                )
            why = _undefined_field(key, self.refs, found, isolated)
            return self._inconclusive(why or f"no key {key!r}")
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
                shown = self._isolation_reason(result, isolated)
                if shown is not None:
                    reason = shown
        return GateResult(self.expr, verdict, value, reason)

    def _extras(
        self, data: GateData | None, problems: list[str]
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The values of the gate's ``delta(...)`` calls and of ``flaky_cases()``."""
        deltas: list[dict[str, Any]] = []
        for ref, baseline in self._reads.deltas:
            if data is None or data.delta is None:
                problems.append(f"{ref.text}: a paired delta needs the run's store")
                continue
            fields, why = data.delta(ref.evaluator, ref.metric, baseline)
            if fields is None:
                problems.append(f"{ref.text}: {why}")
            else:
                deltas.append(fields)
        flaky: int | None = None
        if self._reads.cases:
            if data is None or data.flaky_cases is None:
                problems.append("flaky_cases() needs the run's stored tasks")
            else:
                flaky = data.flaky_cases()
        return deltas, flaky

    def _isolation_reason(
        self, result: bool, isolated: Mapping[str, IsolationSummary]
    ) -> str | None:
        """For ``metric(...).isolation OP level``: the level by name, with its driver."""
        side = self._side
        if side is None:
            return None
        text = "".join(side.text.split())
        ref = next((r for r in self.refs if text == "".join(r.text.split()) + ".isolation"), None)
        if ref is None or ref.evaluator not in isolated:
            return None
        iso = isolated[ref.evaluator]
        other = side.other.strip()
        ran = f"{ref.evaluator} ran at {iso.level} ({iso.driver or 'driver unknown'})"
        if result:
            text = f"{ran}, {side.op} {other}"
        elif side.op in (">=", ">") and other in LEVELS and iso.rank <= LEVELS[other]:
            text = f"{ran}, {'below' if side.op == '>=' else 'not above'} {other}"
        else:
            text = f"{ran}, needs {side.op} {other}"
        if iso.enforcement == "partial":
            gaps = f": missing {', '.join(iso.missing)}" if iso.missing else ""
            text += f"; enforcement partial{gaps}"
        return text

    def _inconclusive(self, reason: str) -> GateResult:
        return GateResult(self.expr, "inconclusive", None, reason)

    def _context(
        self,
        values: list[dict[str, Any]],
        problems: list[str],
        pass_k: Callable[[int, int, bool], float | None],
        *,
        deltas: list[dict[str, Any]],
        flaky: int | None,
    ) -> Any:
        calls, delta_calls = self._reads.calls, self._reads.delta_calls

        def metric(*args: Any) -> dict[str, Any] | None:
            index = calls.get(tuple(args))
            return None if index is None else values[index]

        def delta(*args: Any) -> dict[str, Any] | None:
            index = delta_calls.get(tuple(args))
            return None if index is None or index >= len(deltas) else deltas[index]

        def flaky_cases() -> int | None:
            return flaky

        def method(hat: bool) -> Callable[[Any, Any], float | None]:
            name = "passHatK" if hat else "passAtK"

            def call(receiver: Any, k: Any) -> float | None:
                i = receiver.get("__key") if isinstance(receiver, dict) else None
                if not isinstance(i, int) or not isinstance(k, int) or isinstance(k, bool):
                    problems.append(f"{name}(k) applies to metric(...) with a whole number k")
                    return None
                return pass_k(i, k, hat)

            return call

        return cel_module().Context(
            variables=dict(LEVELS),
            functions={
                "metric": metric,
                "delta": delta,
                "flaky_cases": flaky_cases,
                "passAtK": method(False),
                "passHatK": method(True),
            },
        )


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
    isolation: Sequence[IsolationSummary] | None = None,
    data: GateData | None = None,
) -> list[dict[str, Any]]:
    """Every gate's verdict as the JSON dict of ``--format json`` (plus ``verdict`` and ``reason``).

    ``isolation``: the run's per-evaluator sandbox isolation, for gates that read it; ``data``:
    paired deltas and flaky cases, for gates that read them."""
    return [
        g.evaluate(
            metrics,
            min_completion_rate=min_completion_rate,
            max_evaluator_error_rate=max_evaluator_error_rate,
            isolation=isolation,
            data=data,
        ).to_dict()
        for g in gates
    ]


# ---------------------------------------------------------------------------------------------
# Small helpers


def _threshold(expr: str, result: Any) -> str:
    if expr.rstrip().endswith(".isolation"):
        return "namespaced"
    return "30" if isinstance(result, int) else "0.8"


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
