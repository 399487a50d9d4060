"""The CEL conditions of an online policy: what each may name, checked when the policy loads.

Four places hold CEL: the selector and the ``always`` rules (over ``resource``, ``span`` and
``trace``), a cascade step's ``when`` and ``promote.when`` (over the scores so far, with
``score('x')`` and ``passed('x')``), and an alert's ``when`` (over the window: ``mean('x')``,
``rate('x')``, ``count('x')`` and ``n``). The CEL binding has no type checker and no cost
limit, so a condition is bounded in length, may call only the functions listed here, may name
only its own variables (and the loop variables of its macros), and is dry-run on made-up data
so that a name it does not know, or a result that is not true/false, is an error at load time
rather than a silent "false" on every trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalsi.core import cel_module

if TYPE_CHECKING:
    import cel

MAX_EXPR_LENGTH = 2000
"""Longest accepted condition, in characters (the CEL binding has no cost limit)."""

_OPERATORS = frozenset(
    {
        "_+_", "_-_", "_*_", "_/_", "_%_", "-_", "!_", "_==_", "_!=_", "_<_", "_<=_", "_>_",
        "_>=_", "_&&_", "_||_", "_?_:_", "_[_]", "@in", "@not_strictly_false",
    }
)  # fmt: skip
STANDARD_FUNCTIONS = frozenset(
    {
        "size", "int", "uint", "double", "string", "bool", "startsWith", "endsWith",
        "contains", "matches", "min", "max",
    }
)  # fmt: skip
_MACRO_VAR = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,")
_NAMED_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(\s*(?:'([^'\\]*)'|\"([^\"\\]*)\")")
_UNDEFINED = re.compile(r"Undefined variable or function: '([^']+)'")


class ConditionError(ValueError):
    """What is wrong with a condition, in words for the field it came from."""


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What one kind of condition may name.

    ``samples`` are made-up contexts (variables) it is dry-run on; ``functions`` the custom
    functions (each also gets called in the dry run, with made-up results); ``named`` the
    functions whose first quoted argument must be one of ``names`` (an evaluator instance,
    optionally followed by ``/metric``).
    """

    variables: tuple[str, ...]
    samples: tuple[Mapping[str, Any], ...]
    functions: Mapping[str, Callable[..., Any]]
    named: tuple[str, ...] = ()


def compile_condition(expr: str, vocabulary: Vocabulary, names: Sequence[str] = ()) -> cel.Program:
    """Compile and check ``expr``; ``ConditionError`` says what is wrong with it."""
    if not isinstance(expr, str) or not expr.strip():
        raise ConditionError("expected a CEL condition, got an empty string")
    if len(expr) > MAX_EXPR_LENGTH:
        raise ConditionError(
            f"the condition is {len(expr):,} characters; the limit is {MAX_EXPR_LENGTH:,}"
        )
    if any("\ud800" <= c <= "\udfff" for c in expr):
        raise ConditionError("the condition is not valid Unicode text")
    try:
        program: cel.Program = cel_module().compile(expr)
    except ValueError as e:
        raise ConditionError(f"not valid CEL: {_first_line(str(e))}") from None
    loop_vars = set(_MACRO_VAR.findall(expr))
    allowed = set(vocabulary.variables) | loop_vars
    unknown_vars = sorted(set(program.variables()) - allowed)
    if unknown_vars:
        raise ConditionError(
            f"unknown name {unknown_vars[0]!r} (this condition may use: "
            f"{', '.join(vocabulary.variables) or 'no variables'})"
        )
    known_functions = _OPERATORS | STANDARD_FUNCTIONS | set(vocabulary.functions)
    unknown_functions = sorted(set(program.functions()) - known_functions)
    if unknown_functions:
        custom = ", ".join(f"{f}()" for f in vocabulary.functions) or "none"
        raise ConditionError(
            f"unknown function {unknown_functions[0]!r} (the custom functions here: {custom})"
        )
    _check_names(expr, vocabulary, names)
    _dry_run(program, vocabulary)
    return program


def _check_names(expr: str, vocabulary: Vocabulary, names: Sequence[str]) -> None:
    for m in _NAMED_CALL.finditer(expr):
        function, name = m[1], m[2] if m[2] is not None else m[3]
        if function not in vocabulary.named:
            continue
        instance = name.split("/", 1)[0]
        if name not in names and instance not in names:
            listed = ", ".join(names) or "none"
            raise ConditionError(
                f"{function}({name!r}): no evaluator {instance!r} before this point (the "
                f"evaluators it may read: {listed})"
            )


def _dry_run(program: cel.Program, vocabulary: Vocabulary) -> None:
    module = cel_module()
    for sample in vocabulary.samples:
        context = module.Context(variables=dict(sample), functions=dict(vocabulary.functions))
        try:
            result = program.execute(context)
        except RuntimeError as e:
            m = _UNDEFINED.search(str(e))
            if m is not None:
                raise ConditionError(f"unknown name {m[1]!r}") from None
            continue  # a failing custom function or 1/0: depends on the data
        except Exception:  # noqa: BLE001 - a missing key, x / 0, a list index: data-dependent
            continue  # decided per trace (``evaluate`` turns it into a ConditionError)
        if not isinstance(result, bool):
            raise ConditionError(
                f"gives {type(result).__name__}, not true or false (compare it with something)"
            )


def evaluate(
    program: cel.Program, variables: Mapping[str, Any], functions: Mapping[str, Any]
) -> bool:
    """The condition's verdict; any failure on this data (a missing key, a null compared, a
    type mismatch) raises ``ConditionError`` for the caller to count."""
    try:
        result = program.execute(
            cel_module().Context(variables=dict(variables), functions=dict(functions))
        )
    except Exception as e:  # noqa: BLE001 - the library raises Python's own errors too
        # RuntimeError for CEL's errors, and KeyError, TypeError, ZeroDivisionError,
        # IndexError... straight from the data: each is this condition failing on it
        raise ConditionError(_first_line(str(e)) or type(e).__name__) from None
    if not isinstance(result, bool):
        raise ConditionError(f"gave {type(result).__name__}, not true or false")
    return result


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0][:300]


# -- the vocabularies -----------------------------------------------------------------------------

TRACE_VARIABLES = ("resource", "span", "trace")


def _trace_samples() -> tuple[dict[str, Any], ...]:
    out = []
    for error in (False, True):
        span: dict[str, Any] = {
            "name": "agent", "type": "agent", "attributes": {}, "service": "svc",
            "error": error, "duration_ms": 1200.0 if error else 35.0,
        }  # fmt: skip
        trace = {
            "error": error, "duration_ms": span["duration_ms"], "span_count": 3,
            "service": "svc", "session_id": "s1",
        }  # fmt: skip
        out.append({"resource": {"service.name": "svc"}, "span": span, "trace": trace})
    return tuple(out)


def trace_vocabulary() -> Vocabulary:
    """The selector and ``always`` rules."""
    return Vocabulary(TRACE_VARIABLES, _trace_samples(), {})


def scores_vocabulary() -> Vocabulary:
    """A cascade step's ``when``, an ``onFeedback`` step's ``when`` and ``promote.when``."""
    samples = []
    for base, ok in zip(_trace_samples(), (True, False), strict=True):
        made_up = {
            "evaluator": "e", "metric": "e", "value": 1.0 if ok else 0.0, "passed": ok,
            "outcome": "scored", "label": "",
        }  # fmt: skip
        feedback = {"name": "feedback", "value": -1.0, "label": "", "negative": True}
        samples.append({**base, "scores": [made_up], "feedback": feedback})

    def score(name: Any, *_: Any) -> float:
        return 0.5

    def passed(name: Any, *_: Any) -> bool:
        return True

    return Vocabulary(
        (*TRACE_VARIABLES, "scores", "feedback"),
        tuple(samples),
        {"score": score, "passed": passed},
        named=("score", "passed"),
    )


def window_vocabulary() -> Vocabulary:
    """An alert's ``when``."""

    def number(*_: Any) -> float:
        return 0.5

    def count(*_: Any) -> int:
        return 10

    return Vocabulary(
        ("n",),
        ({"n": 10}, {"n": 0}),
        {"mean": number, "rate": number, "count": count},
        named=("mean", "rate", "count"),
    )
