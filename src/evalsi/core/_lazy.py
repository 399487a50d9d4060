"""Lazy package exports: a package's face imports a submodule only when one of its names is used.

A package ``__init__`` lists its exports as ordinary imports under ``if TYPE_CHECKING:`` (so
type checkers, import-linter and readers see exactly what it exports, and where from) and sets
``__getattr__ = lazy_exports(__name__, __file__)``. The first access of a name reads that block
once and imports the one submodule it comes from. ``evalsi eval`` thus does not import
calibration, judges, specs or the server's pieces it never uses (issue 16: start-up).
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def lazy_exports(package: str, file: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving the names imported under ``if TYPE_CHECKING:``."""
    where: dict[str, tuple[str, str]] | None = None

    def __getattr__(name: str) -> Any:
        nonlocal where
        if where is None:
            where = _type_checking_imports(file)
        found = where.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, original = found
        value = getattr(importlib.import_module(module), original)
        setattr(sys.modules[package], name, value)  # the next access is a plain attribute
        return value

    return __getattr__


class _LazyModule:
    """Stands for a module until an attribute is read: then imports it (thread-safe, through
    the import system's locks) and keeps what was read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str) -> Any:
    """``name``, imported when first used: for a slow library a module needs in a few functions
    only (``scipy.special`` takes longer to import than a small Score run takes to grade).

    Example:
        >>> json = lazy_module("json")
        >>> json.dumps([1])
        '[1]'
    """
    return _LazyModule(name)


BENCH_MARK_ENV = "EVALSI_BENCH_MARK"
_marked: set[str] = set()


def startup_mark(event: str) -> None:
    """A benchmark hook: with ``EVALSI_BENCH_MARK=1``, the first time ``event`` happens in this
    process, write ``evalsi-mark EVENT SECONDS`` to stderr, SECONDS being ``time.monotonic()``
    (one clock for every process of the machine, so a parent that noted it at spawn gets the
    time to that event). ``bench/startup.py`` reads ``first-record`` (``evalsi eval``) and
    ``first-call`` (``evalsi run``). Otherwise it costs one set lookup.
    """
    if event in _marked:
        return
    _marked.add(event)
    if os.environ.get(BENCH_MARK_ENV) == "1":
        print(f"evalsi-mark {event} {time.monotonic():.6f}", file=sys.stderr, flush=True)


def _type_checking_imports(file: str) -> dict[str, tuple[str, str]]:
    """``name -> (module, name in module)`` of the ``from M import ...`` under TYPE_CHECKING."""
    tree = ast.parse(Path(file).read_text(encoding="utf-8"), filename=file)
    where: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                for alias in stmt.names:
                    where[alias.asname or alias.name] = (stmt.module, alias.name)
    return where


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )
