"""Spec YAML with positions: parse a document and remember the line of every key and list item.

``parse_yaml`` returns the document as plain JSON-like values plus a map from each key path
(``("spec", "evaluators", 1, "ref")``) to the line it was written on, so that later checks can
say ``run.yaml:12: spec.target.model.baseUrl: ...``. It refuses what a spec cannot hold or what
would make checking it expensive: duplicate keys, recursive or exploding aliases, deep nesting,
and values proto3 JSON has no form for (sets, bytes, NaN, integers beyond 64 bits). Dates stay
the strings that were written, as proto3 JSON has no date type.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

from evalsi.core import SpecError

KeyPath = tuple[str | int, ...]

MAX_NODES = 100_000
"""Values in a document, counting each use of an alias (so an alias bomb stops early)."""
MAX_DEPTH = 64
_INT64 = (-(2**63), 2**64)
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MERGE_TAG = "tag:yaml.org,2002:merge"
_EMPTY_HINT = "an EvalRun starts with apiVersion: evals.si/v1alpha1 and kind: EvalRun"


class _Loader(yaml.SafeLoader):
    """SafeLoader without the implicit timestamp type: dates stay the strings that were written."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_yaml(text: str, shown: str) -> tuple[Any, dict[KeyPath, int]]:
    """The document in ``text`` and the line of each key path; ``shown`` names it in errors.

    Example:
        >>> doc, lines = parse_yaml("spec:\\n  trials: 3\\n", "run.yaml")
        >>> doc, lines[("spec", "trials")]
        ({'spec': {'trials': 3}}, 2)
    """
    loader: _Loader | None = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        doc = None
        if node is not None:
            lines[()] = node.start_mark.line + 1
            _Positions(shown, lines).walk(node, (), 0, set())
            doc = loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{shown}:{mark.line + 1}" if mark is not None else shown
        what = " ".join(p for p in (e.context, e.problem) if p)
        raise SpecError(f"{where}: not valid YAML: {what}") from e
    except yaml.YAMLError as e:
        raise SpecError(f"{shown}: not valid YAML: {e}") from e
    except RecursionError as e:
        raise SpecError(f"{shown}: not valid YAML: nested too deeply") from e
    except (ValueError, TypeError, OverflowError) as e:
        raise SpecError(f"{shown}: not valid YAML: a value cannot be read ({e})") from e
    finally:
        if loader is not None:
            loader.dispose()
    if doc is None:
        raise SpecError(f"{shown}: the file is empty", hint=_EMPTY_HINT)
    check_plain(doc, (), shown, lines)
    return doc, lines


class _Positions:
    """Walks the composed YAML graph before it becomes Python values, noting where things are."""

    def __init__(self, shown: str, lines: dict[KeyPath, int]) -> None:
        self.shown = shown
        self.lines = lines
        self.count = 0

    def fail(self, node: yaml.Node, message: str) -> SpecError:
        return SpecError(f"{self.shown}:{node.start_mark.line + 1}: {message}")

    def walk(self, node: yaml.Node, path: KeyPath, depth: int, stack: set[int]) -> None:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, f"the document has more than {MAX_NODES} values (with aliases)")
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nested more than {MAX_DEPTH} levels deep")
        if id(node) in stack:
            raise self.fail(node, "a YAML alias refers to a value that contains it")
        if isinstance(node, yaml.MappingNode):
            stack.add(id(node))
            self._mapping(node, path, depth, stack)
            stack.discard(id(node))
        elif isinstance(node, yaml.SequenceNode):
            stack.add(id(node))
            for i, item in enumerate(node.value):
                self.lines.setdefault((*path, i), item.start_mark.line + 1)
                self.walk(item, (*path, i), depth + 1, stack)
            stack.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: KeyPath, depth: int, stack: set[int]) -> None:
        seen: dict[str, int] = {}
        merged: list[yaml.Node] = []
        for key, value in node.value:
            if key.tag == _MERGE_TAG:
                merged.extend(value.value if isinstance(value, yaml.SequenceNode) else [value])
                continue
            if not isinstance(key, yaml.ScalarNode):
                raise self.fail(
                    key, f"{key_path_text(path) or 'the document'}: a key must be a string"
                )
            line = key.start_mark.line + 1
            if key.value in seen:
                raise self.fail(
                    key,
                    f"{key_path_text((*path, key.value))}: duplicate key (first written on line "
                    f"{seen[key.value]})",
                )
            seen[key.value] = line
            self.lines[(*path, key.value)] = line
            self.walk(value, (*path, key.value), depth + 1, stack)
        for source in merged:
            # Keys written in the mapping itself win over merged ones, as in construction.
            if isinstance(source, yaml.MappingNode):
                for key, value in source.value:
                    if isinstance(key, yaml.ScalarNode) and key.value not in seen:
                        seen[key.value] = key.start_mark.line + 1
                        self.lines.setdefault((*path, key.value), seen[key.value])
                        self.walk(value, (*path, key.value), depth + 1, stack)


def check_plain(value: Any, path: KeyPath, shown: str, lines: Mapping[KeyPath, int]) -> None:
    """Refuse what proto3 JSON cannot hold: non-string keys, sets, bytes, NaN, huge integers."""
    problem = ""
    if len(path) > MAX_DEPTH:
        problem = f"nested more than {MAX_DEPTH} levels deep"
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                problem = f"the key {key!r} is not a string (quote it)"
                break
            check_plain(item, (*path, key), shown, lines)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_plain(item, (*path, i), shown, lines)
    elif isinstance(value, float) and not math.isfinite(value):
        problem = "expected a finite number, got .nan or .inf"
    elif isinstance(value, int) and not isinstance(value, bool):
        if not _INT64[0] <= value < _INT64[1]:
            problem = "the integer is out of the 64-bit range"
    elif not (value is None or isinstance(value, str | float | bool)):
        problem = f"a {type(value).__name__} value is not allowed here (only JSON values)"
    if problem:
        raise SpecError(where(shown, lines, path) + problem)


def key_path_text(path: KeyPath) -> str:
    """``spec.evaluators[1].ref``; keys that are not identifiers are quoted: ``labels["a.b/c"]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def line_of(lines: Mapping[KeyPath, int], path: KeyPath) -> int:
    """The line of ``path``, else of its nearest ancestor that has one; 0 when none does."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return 0


def where(shown: str, lines: Mapping[KeyPath, int], path: KeyPath, line: int | None = None) -> str:
    """The ``file:line: path: `` prefix of an error message."""
    line = line_of(lines, path) if line is None else line
    head = f"{shown}:{line}" if line else shown
    return f"{head}: {key_path_text(path)}: " if path else f"{head}: "
