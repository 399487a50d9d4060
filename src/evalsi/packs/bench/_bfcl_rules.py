"""BFCL's AST rules for Python function calls, written for evalsi and proven equal to
``bfcl_eval.eval_checker.ast_eval.ast_checker`` on golden vectors
(``tests/unit/packs/bench/golden_bfcl_ast.jsonl``, made by ``tests/support/bfcl_golden.py``
with bfcl-eval itself): the same verdict and the same ``error_type`` on every vector.

bfcl-eval is not imported: its checker module imports every model handler it ships (OpenAI,
Anthropic, Cohere, Mistral, Google SDKs...) and the package pins numpy 1.26.4, faiss and
sentence-transformers, so it cannot sit beside evalsi's own dependencies.

The rules, as BFCL applies them. A call is ``{name: {param: value}}``; a possible answer is
``{name: {param: [allowed values]}}`` where ``""`` among the allowed values makes the parameter
optional. Per call: the name must match (a dotted name may arrive with ``_`` for ``.`` when the
model's API forbids dots), every required parameter must be present, no parameter may be
unknown to the function or to the answer, each value must have the declared type (an int is
accepted for a float; a value of the answer's type when that differs from the declared one is a
variable name and passes the type check), strings compare after dropping spaces and
``,./-_*^`` and ignoring case, lists and dicts compare item by item the same way, and every
answer parameter not marked optional must be given. ``simple``: exactly one call;
``multiple``: exactly one call, of the answer's function; ``parallel`` and
``parallel_multiple``: as many calls as answers, matched in any order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_NESTED = ("array", "tuple")
_NOISE = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True, slots=True)
class Verdict:
    """One check's outcome: ``error_type`` is BFCL's name for the first rule broken."""

    valid: bool
    error_type: str = ""
    error: str = ""


OK = Verdict(True)


def _bad(error_type: str, error: str) -> Verdict:
    return Verdict(False, error_type, error)


def check_calls(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]],
    possible: Sequence[Mapping[str, Any]],
    category: str,
    *,
    underscore_to_dot: bool = True,
) -> Verdict:
    """BFCL's AST verdict on ``calls`` (each ``{name: arguments}``) for one question."""
    if "parallel" in category:
        return _any_order(functions, calls, possible, underscore_to_dot)
    if "multiple" in category:
        if len(calls) != len(possible):
            return _bad("multiple_function_checker:wrong_count", "wrong number of calls")
        fn = _describe(functions, next(iter(possible[0])))
        return check_call(fn, calls[0], possible[0], underscore_to_dot)
    if len(calls) != 1:
        return _bad("simple_function_checker:wrong_count", f"expected 1 call, got {len(calls)}")
    return check_call(functions[0], calls[0], possible[0], underscore_to_dot)


def _any_order(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]],
    possible: Sequence[Mapping[str, Any]],
    underscore_to_dot: bool,
) -> Verdict:
    if len(calls) != len(possible):
        return _bad(
            "parallel_function_checker_no_order:wrong_count",
            f"expected {len(possible)} calls, got {len(calls)}",
        )
    used: set[int] = set()
    for i, answer in enumerate(possible):
        fn = _describe(functions, next(iter(answer)))
        for j, call in enumerate(calls):
            if j not in used and check_call(fn, call, answer, underscore_to_dot).valid:
                used.add(j)
                break
        else:
            return _bad(
                "parallel_function_checker_no_order:cannot_find_match",
                f"no call matches answer {i} ({next(iter(answer))})",
            )
    return OK


def _describe(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for fn in functions:
        if fn.get("name") == name:
            return fn
    raise ValueError(f"the question declares no function {name!r} that its answer names")


def check_call(
    fn: Mapping[str, Any],
    call: Mapping[str, Any],
    answer: Mapping[str, Any],
    underscore_to_dot: bool = True,
) -> Verdict:
    """One call against one possible answer of the function ``fn`` (BFCL's simple checker)."""
    allowed: Mapping[str, list[Any]] = next(iter(answer.values()))
    name = str(fn["name"])
    if underscore_to_dot and "." in name:
        name = name.replace(".", "_")
    params = fn["parameters"]
    properties: Mapping[str, Any] = params["properties"]
    if name not in call:
        return _bad("simple_function_checker:wrong_func_name", f"no call of {name!r}")
    given: Mapping[str, Any] = call[name]
    for param in params.get("required", []):
        if param not in given:
            return _bad("simple_function_checker:missing_required", f"missing {param!r}")
    for param, value in given.items():
        if param not in properties or param not in allowed:
            return _bad("simple_function_checker:unexpected_param", f"unexpected {param!r}")
        verdict = _check_value(param, value, allowed[param], properties[param])
        if not verdict.valid:
            return verdict
    for param, values in allowed.items():
        if param not in given and "" not in values:
            return _bad(
                "simple_function_checker:missing_optional",
                f"{param!r} not given and not optional",
            )
    return OK


def _check_value(param: str, value: Any, allowed: list[Any], prop: Mapping[str, Any]) -> Verdict:
    declared = str(prop["type"])
    if declared not in PYTHON_TYPES:
        raise ValueError(f"parameter {param!r}: BFCL has no Python type {declared!r}")
    expected = PYTHON_TYPES[declared]
    nested = PYTHON_TYPES[prop["items"]["type"]] if declared in _NESTED else None
    if declared == "tuple" and type(value) is tuple:
        value = list(value)
    if declared == "float" and type(value) is int:
        value = float(value)
    typed, variable = _type_check(value, allowed, expected, nested)
    if not typed.valid:
        return typed
    if not variable:
        if expected is dict:
            return _dict_check(param, value, allowed)
        if expected is list and nested is dict:
            return _list_of_dicts_check(param, value, allowed)
        if expected is str:
            return _string_check(param, value, allowed)
        if expected is list:
            return _list_check(param, value, allowed)
    if value not in allowed:
        return _bad("value_error:others", f"{param!r}: {value!r} is not one of {allowed!r}")
    return OK


def _answer_type(allowed: list[Any]) -> type | None:
    return next((type(a) for a in allowed if a != ""), None)


def _type_check(
    value: Any, allowed: list[Any], expected: type, nested: type | None
) -> tuple[Verdict, bool]:
    """(verdict, whether the value reads as a variable name) — BFCL's type rules."""
    answer_type = _answer_type(allowed)
    variable = answer_type is not None and answer_type is not expected
    failed = "type_error:simple"
    if type(value) is expected:
        if nested is None:
            return OK, variable
        items = cast(list[Any], value)  # a list: only the nested types (array, tuple) get here
        for option in allowed:
            items_ok = not isinstance(option, list) or all(
                _type_check(item, option, nested, None)[0].valid for item in items
            )
            if items_ok:
                return OK, variable
        failed = "type_error:nested"
    if answer_type is not None and type(value) is answer_type:
        # BFCL: a value of the answer's type is a variable... unless a nested check just failed
        if failed == "type_error:nested":
            return _bad(failed, "nested items of the wrong type"), True
        return OK, True
    return _bad(
        "type_error:simple", f"expected {expected.__name__}, got {type(value).__name__}"
    ), False


def standardize(text: str) -> str:
    """BFCL's string normal form: no spaces or ``,./-_*^``, lower case, ``'`` as ``"``."""
    return _NOISE.sub("", text).lower().replace("'", '"')


def _norm(value: Any) -> Any:
    return standardize(value) if type(value) is str else value


def _string_check(param: str, value: str, allowed: list[Any]) -> Verdict:
    if standardize(value) not in [standardize(a) for a in allowed if type(a) is str]:
        return _bad("value_error:string", f"{param!r}: {value!r} is not one of {allowed!r}")
    return OK


def _list_check(param: str, value: list[Any], allowed: list[Any]) -> Verdict:
    options = [[_norm(item) for item in option] for option in allowed]
    if [_norm(item) for item in value] not in options:
        return _bad("value_error:list/tuple", f"{param!r}: {value!r} is not one of {allowed!r}")
    return OK


def _dict_check(param: str, value: Mapping[str, Any], allowed: list[Any]) -> Verdict:
    verdict = _bad("dict_checker:unclear", f"{param!r}: no allowed dict")
    for option in allowed:
        if option == "":
            continue
        verdict = _dict_matches(value, option)
        if verdict.valid:
            return OK
    return verdict


def _dict_matches(value: Mapping[str, Any], option: Mapping[str, Any]) -> Verdict:
    # both passes run, and a missing key is the reported error even after a wrong value (BFCL)
    verdict = OK
    for key, item in value.items():
        if key not in option:
            verdict = _bad("value_error:dict_key", f"unexpected key {key!r}")
            break
        if _norm(item) not in [_norm(a) for a in option[key]]:
            verdict = _bad("value_error:dict_value", f"key {key!r}: {item!r} not allowed")
            break
    for key, values in option.items():
        if key not in value and "" not in values:
            return _bad("value_error:dict_key", f"missing key {key!r}")
    return verdict


def _list_of_dicts_check(param: str, value: list[Any], allowed: list[Any]) -> Verdict:
    verdict = _bad("list_dict_checker:unclear", f"{param!r}: no allowed list")
    for option in allowed:
        if len(value) != len(option):
            verdict = _bad("value_error:list_dict_count", f"{param!r}: wrong number of dicts")
            continue
        for item, want in zip(value, option, strict=True):
            verdict = _dict_check(param, item, [want])
            if not verdict.valid:
                break
        else:
            return OK
    return verdict
