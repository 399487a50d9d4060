"""Reading a record into candidate programs and a test plan, with errors that name the field.

Candidates (``output``): program text (a fenced code block is taken when there is one), or a
JSON list of such texts (n candidates, for pass@k).

Tests (``reference``, or ``metadata.<tests_field>``), one of:

* **check style** (HumanEval): code defining ``check(candidate)``; the entry point
  (``metadata.entry_point`` or the ``entry_point`` param) names the function passed to it.
  One test, ``check``.
* **test functions**: code with top-level ``def test_*():`` functions; each is one test, the
  other top-level statements are shared setup. The solution's names are in scope.
* **assert statements**: code whose top-level ``assert`` statements are each one test (the
  statements before an assert run first). The solution's names are in scope.
* **a list of strings**: each string is one test (a snippet of asserts).
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from evalsi.core import Content, Record

_TAG = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)")
_PY_TAGS = ("python", "py", "python3", "")


class ShapeError(ValueError):
    """A record whose fields do not have the documented shape (the record is an ERROR)."""


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of each fenced block of ``text``, in order, in time linear in
    ``text`` (a target's output is anyone's text; the regular expression this replaces grew
    with the square of it)."""
    blocks: list[tuple[str, str]] = []
    at = 0
    while (start := text.find("```", at)) >= 0:
        newline = text.find("\n", start + 3)
        if newline < 0:
            break
        end = text.find("```", newline + 1)
        if end < 0:
            break
        tag = _TAG.match(text, start + 3, newline)
        blocks.append((tag[1] if tag else "", text[newline + 1 : end]))
        at = end + 3
    return blocks


def extract_code(text: str) -> str:
    """The program in ``text``: the first ```python (or untagged) fenced block, else the first
    fenced block of any language, else the whole text."""
    blocks = fenced_blocks(text)
    for tag, body in blocks:
        if tag.lower() in _PY_TAGS:
            return str(body)
    if blocks:
        return str(blocks[0][1])
    return text


def candidates_of(output: Content, *, multiple: bool | None) -> tuple[list[str], bool]:
    """The candidate programs of ``output`` and whether the record holds a list of them.

    ``multiple`` None: a JSON list (a list value, or text that parses as a JSON list of
    strings) is n candidates, anything else one. True: it must be a list. False: one program.
    """
    value: Any = output.json if output.kind == "json" else None
    if value is None and output.kind == "text" and multiple is not False:
        text = (output.text or "").strip()
        if text.startswith("["):
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                value = None
    if isinstance(value, list) and multiple is not False:
        if not value or not all(isinstance(v, str) for v in value):
            raise ShapeError(
                "output: expected a non-empty JSON list of program strings (n candidates), "
                f"got a list of {_kinds(value)}"
            )
        return [extract_code(v) for v in value], True
    if multiple:
        raise ShapeError(
            f"output: the candidates param says a JSON list of programs, got {output.kind}"
        )
    if output.kind not in ("text", "messages", "json") or (
        output.kind == "json" and not isinstance(output.json, str)
    ):
        raise ShapeError(f"output: expected program text, got {output.kind}")
    return [extract_code(output.as_text())], False


def _kinds(values: list[Any]) -> str:
    names = sorted({type(v).__name__ for v in values}) or ["nothing"]
    return ", ".join(names)


@dataclass(slots=True)
class SuitePlan:
    """What the harness runs: ``kind`` (check | functions | asserts | list), shared ``setup``
    code and the tests (name, code, and for test functions the function to ``call``)."""

    kind: str
    setup: str = ""
    tests: list[dict[str, str]] = field(default_factory=list)
    entry_point: str | None = None

    def to_json(self, timeout: float) -> dict[str, Any]:
        return {**asdict(self), "timeout": timeout}


def read_tests(record: Record, *, tests_field: str, entry_point: str) -> SuitePlan:
    """The test plan of ``record`` (see the module docstring for the accepted shapes)."""
    where = f"metadata.{tests_field}" if tests_field else "reference"
    raw: Any
    if tests_field:
        raw = record.metadata.get(tests_field)
        if raw is None:
            raise ShapeError(f"{where}: missing (the tests_field param names it)")
    else:
        ref = record.reference
        if ref is None:
            raise ShapeError("reference: missing; it holds the tests")
        raw = ref.json if ref.kind == "json" else ref.as_text()
    entry = entry_point or record.metadata.get("entry_point") or None
    if entry is not None and (not isinstance(entry, str) or not entry.isidentifier()):
        raise ShapeError(f"metadata.entry_point: expected a Python identifier, got {entry!r}")
    if isinstance(raw, list):
        if not raw or not all(isinstance(t, str) and t.strip() for t in raw):
            raise ShapeError(
                f"{where}: expected test code, or a non-empty list of test snippets (strings)"
            )
        for i, snippet in enumerate(raw):
            _parse(snippet, f"{where}[{i}]")
        snippets = [{"name": f"test_{i + 1}", "code": t} for i, t in enumerate(raw)]
        return SuitePlan("list", "", snippets, entry)
    if not isinstance(raw, str) or not raw.strip():
        raise ShapeError(
            f"{where}: expected test code, or a non-empty list of test snippets (strings), "
            f"got {type(raw).__name__}"
        )
    tree = _parse(raw, where)
    body = tree.body
    defines = {n.name for n in body if isinstance(n, ast.FunctionDef)}
    if "check" in defines:
        if entry is None:
            raise ShapeError(
                f"{where} defines check(candidate), so an entry point is needed: set "
                "metadata.entry_point or the entry_point param to the function's name"
            )
        return SuitePlan("check", raw, [{"name": "check", "code": "check(candidate)"}], entry)
    funcs = [n for n in body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    if funcs:
        setup = [n for n in body if n not in funcs]
        calls = [{"name": f.name, "code": _segment(raw, f), "call": f.name} for f in funcs]
        return SuitePlan("functions", "\n".join(_segment(raw, n) for n in setup), calls, entry)
    asserts = [n for n in body if isinstance(n, ast.Assert)]
    if not asserts:
        raise ShapeError(
            f"{where}: found no test: expected check(candidate), def test_*() functions, or "
            "top-level assert statements"
        )
    tests: list[dict[str, str]] = []
    before: list[str] = []
    for node in body:
        if isinstance(node, ast.Assert):
            code = "\n".join([*before, _segment(raw, node)])
            tests.append({"name": f"assert_{len(tests) + 1} (line {node.lineno})", "code": code})
        else:
            before.append(_segment(raw, node))
    return SuitePlan("asserts", "", tests, entry)


def _parse(code: str, where: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as e:
        raise ShapeError(
            f"{where}: the test code does not parse: {e.msg} (line {e.lineno})"
        ) from None


def _segment(source: str, node: ast.stmt) -> str:
    """The source of a top-level statement, decorators included."""
    lines = source.splitlines()
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    end = node.end_lineno or node.lineno
    return "\n".join(lines[start - 1 : end])
