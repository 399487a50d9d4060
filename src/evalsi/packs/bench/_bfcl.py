"""``bfcl-ast`` and ``bfcl-exec``: the Berkeley Function Calling Leaderboard's scorers over an
agent's tool calls, for rows made by ``evalsi.benchmarks.import_bfcl``.

The calls graded are the record's ``tool_call`` steps (a run's, or a dataset's trajectory), as
BFCL's ``[{name: arguments}]``. ``bfcl-ast`` applies BFCL's AST rules (``_bfcl_rules``) to the
question's functions (``metadata.functions``) and possible answers
(``reference.possible_answer``). ``bfcl-exec`` runs the calls and the ground truth's
(``reference.ground_truth``, Python call expressions whose arguments must be literals: they are
parsed, never evaluated) through the functions of a module you name, in evalsi's process, and
compares the results by BFCL's ``execution_result_type``: ``exact_match`` (equal),
``real_time_match`` (numbers within a relative ``tolerance``, default 0.2, else equal) or
``structural_match`` (same type; same keys for a dict, same length for a list).
"""

from __future__ import annotations

import ast
import importlib
import json
import math
from collections.abc import Mapping
from typing import Any

from evalsi.core import ParamError, Record, Score
from evalsi.evaluators import Skip
from evalsi.packs._declare import builtin, clip, passed
from evalsi.packs.bench._bfcl_rules import check_calls

RESULT_KINDS = ("exact_match", "real_time_match", "structural_match")


def record_calls(record: Record) -> list[dict[str, Any]]:
    """The record's tool calls as BFCL's ``[{name: arguments}]``, in order; arguments that
    arrived as JSON text are parsed (a call whose text is not an object keeps ``{}``)."""
    calls: list[dict[str, Any]] = []
    steps = record.trajectory.steps if record.trajectory is not None else []
    for step in steps:
        if step.kind != "tool_call" or step.tool_call is None:
            continue
        args: Any = step.tool_call.arguments
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {}
        calls.append({step.tool_call.name: args if isinstance(args, dict) else {}})
    return calls


def _reference(record: Record, key: str) -> Any:
    ref = record.reference.value if record.reference is not None else None
    if not isinstance(ref, dict) or key not in ref:
        raise Skip(f"no reference.{key} (rows from evalsi.benchmarks.import_bfcl carry it)")
    return ref[key]


def _category(record: Record) -> str:
    category = record.metadata.get("bfcl_category") or record.metadata.get("category")
    if not isinstance(category, str):
        raise Skip("no metadata.bfcl_category")
    return category


class BfclAst:
    """BFCL's AST check of the calls against the question's possible answers.

    Args:
        underscore_to_dot: the model called dotted functions (``math.hypot``) by an
            underscore name (``math_hypot``), as APIs that forbid dots in tool names make it
            (BFCL's setting for OpenAI-style models; evalsi's tools are named so).
    """

    def __init__(self, *, underscore_to_dot: bool = True) -> None:
        self.underscore_to_dot = underscore_to_dot

    def __call__(self, record: Record) -> Score:
        possible = _reference(record, "possible_answer")
        functions = record.metadata.get("functions")
        if not isinstance(functions, list) or not isinstance(possible, list) or not possible:
            raise Skip("no metadata.functions or reference.possible_answer to check against")
        calls = record_calls(record)
        verdict = check_calls(
            functions, calls, possible, _category(record), underscore_to_dot=self.underscore_to_dot
        )
        explanation = "valid" if verdict.valid else f"{verdict.error_type}: {verdict.error}"
        return Score(
            passed=verdict.valid,
            explanation=clip(explanation, 300),
            metadata={"error_type": verdict.error_type, "calls": len(calls)},
        )


bfcl_ast = builtin(
    "bench",
    "bfcl-ast",
    passed("bfcl-ast", "the calls pass BFCL's AST check (names, types, values, count, order)"),
    requires=("reference",),
    example="evalsi eval --data bfcl/bfcl.jsonl --evaluators bfcl-ast",
)(BfclAst)


class BfclExec:
    """BFCL's executable check: the calls' results against the ground truth calls' results.

    Args:
        functions: the module whose functions the calls name (``package.module``), imported
            in evalsi's process: only a module you trust.
        tolerance: the relative difference ``real_time_match`` allows between numbers.
    """

    def __init__(self, *, functions: str = "", tolerance: float = 0.2) -> None:
        if not functions:
            raise ParamError("bfcl-exec: param 'functions' must name a module (package.module)")
        if not 0 <= tolerance < 1:
            raise ParamError(f"bfcl-exec: param 'tolerance' must be in [0, 1), got {tolerance}")
        try:
            self.module = importlib.import_module(functions)
        except ImportError as e:
            raise ParamError(
                f"bfcl-exec: cannot import functions module {functions!r}: {e}"
            ) from None
        self.tolerance = tolerance

    def __call__(self, record: Record) -> Score:
        truth = _reference(record, "ground_truth")
        kinds = _reference(record, "execution_result_type")
        if not isinstance(truth, list) or not isinstance(kinds, list) or len(truth) != len(kinds):
            raise Skip("reference.ground_truth and execution_result_type must be equal lists")
        expected = [self._run(parse_call(text), f"ground truth {text!r}") for text in truth]
        calls = record_calls(record)
        if len(calls) != len(expected):
            return self._score(
                False, f"wrong number of calls: {len(calls)}, expected {len(expected)}"
            )
        got: list[Any] = []
        for call in calls:
            name, args = next(iter(call.items()))
            try:
                got.append(self._call(name, args))
            except Exception as e:  # noqa: BLE001 - the agent's call failed: its result
                return self._score(False, f"{name} raised {type(e).__name__}: {e}")
        used: set[int] = set()
        for want, kind in zip(expected, kinds, strict=True):
            match = next(
                (i for i, g in enumerate(got) if i not in used and self._same(g, want, kind)), None
            )
            if match is None:
                return self._score(False, f"no call returned {clip(repr(want), 80)} ({kind})")
            used.add(match)
        return self._score(True, f"all {len(expected)} results match")

    def _score(self, ok: bool, explanation: str) -> Score:
        return Score(passed=ok, explanation=clip(explanation, 300))

    def _call(self, name: str, args: Mapping[str, Any]) -> Any:
        fn = getattr(self.module, name, None)
        if not callable(fn) or name.startswith("_"):
            raise LookupError(f"no function {name!r} in {self.module.__name__}")
        return fn(**args)

    def _run(self, call: tuple[str, dict[str, Any]], where: str) -> Any:
        try:
            return self._call(*call)
        except Exception as e:  # noqa: BLE001 - the dataset's own truth: not the agent's failure
            raise ValueError(f"{where} failed: {type(e).__name__}: {e}") from None

    def _same(self, got: Any, want: Any, kind: str) -> bool:
        if kind == "structural_match":
            if type(got) is not type(want):
                return False
            if isinstance(want, dict):
                return set(got) == set(want)
            return not isinstance(want, list) or len(got) == len(want)
        if kind == "real_time_match" and _number(got) and _number(want):
            return math.isclose(got, want, rel_tol=self.tolerance)
        if kind not in RESULT_KINDS:
            raise ValueError(f"execution_result_type {kind!r} is not one of {RESULT_KINDS}")
        return bool(got == want)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    """``name(a=1, b='x')`` as ``(name, {a: 1, b: 'x'})``; literals only, never evaluated."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"ground truth {text!r} is not a call: {e.msg}") from None
    if not isinstance(node, ast.Call) or node.args:
        raise ValueError(f"ground truth {text!r}: expected name(keyword=literal, ...)")
    name = ast.unparse(node.func)
    try:
        args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except ValueError:
        raise ValueError(f"ground truth {text!r}: an argument is not a literal") from None
    return name, args


bfcl_exec = builtin(
    "bench",
    "bfcl-exec",
    passed("bfcl-exec", "the calls' results match the ground truth's (BFCL's exec categories)"),
    requires=("reference",),
    example=(
        "evalsi eval --data bfcl/bfcl-exec.jsonl --evaluators bfcl-exec "
        "--param bfcl-exec.functions=bfcl_functions"
    ),
)(BfclExec)
