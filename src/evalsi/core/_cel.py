"""The CEL engine (the ``common-expression-language`` package) without its command line, and the
checks every user-written condition gets (policies, authorization rules, role conditions).

``import cel`` runs the package's ``__init__``, which imports its own CLI and with it typer, rich
and prompt-toolkit: about 0.1 s that a run with gates paid before its first target call. The
engine itself is one compiled module, ``cel.cel``; this loads it alone and registers it under
that name, so a later ``import cel`` anywhere in the process finds and reuses it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cel

_ENGINE = "cel.cel"
_lock = threading.Lock()


def cel_module() -> ModuleType:
    """The compiled CEL engine: ``compile``, ``evaluate``, ``Context``, ``Program``.

    Example:
        >>> cel_module().evaluate("1 + 2")
        3
    """
    loaded = sys.modules.get(_ENGINE)
    if loaded is not None:
        return loaded
    with _lock:
        loaded = sys.modules.get(_ENGINE)
        return loaded if loaded is not None else _load()


def _load() -> ModuleType:
    package = importlib.util.find_spec("cel")  # finds the package without running its __init__
    folders = package.submodule_search_locations if package is not None else None
    for folder in folders or ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"cel{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader(_ENGINE, str(path))
                spec = importlib.util.spec_from_file_location(_ENGINE, path, loader=loader)
                assert spec is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[_ENGINE] = module
                loader.exec_module(module)
                return module
    return importlib.import_module(_ENGINE)  # an unexpected layout: the ordinary way


# -- user-written conditions -----------------------------------------------------------------

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


def evaluate_condition(
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
