"""Install-wide CEL rules, agentgateway style: ``deny``, ``require`` and ``allow``.

A rule that fails to evaluate (a missing key, a type mismatch) counts as not matched: a deny
that errors does not deny, and a require that errors does not hold (so it denies).
Restrictions belong in require rules.

Rules are indexed by the actions they can concern, so a server with a thousand rules evaluates
only a few per request: a deny or allow rule whose top-level conjunction includes
``request.action == "x"`` (or ``request.action in [...]``) cannot match another action, and a
require rule of the form ``request.action != "x" || ...`` holds trivially for the others.
``fields_read`` tells which variables and fields an expression reads, so a decision converts
only those to CEL values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.auth._permissions import PERMISSIONS
from evalsi.auth._vocabulary import VARIABLES, VOCABULARY
from evalsi.core import ConditionError, compile_condition

Kind = Literal["deny", "require", "allow"]
KINDS: tuple[Kind, ...] = ("deny", "require", "allow")

_EQ = re.compile(r"""^\(?\s*request\.action\s*==\s*(?:"([\w.]+)"|'([\w.]+)')\s*\)?$""")
_IN = re.compile(r"""^\(?\s*request\.action\s+in\s*\[([^\]]*)\]\s*\)?$""")
_NE = re.compile(r"""^\(?\s*request\.action\s*!=\s*(?:"([\w.]+)"|'([\w.]+)')\s*\)?$""")
_LITERAL = re.compile(r"""\s*(?:"([\w.]+)"|'([\w.]+)')\s*""")
_NAMES = {name: re.compile(rf"(?<![A-Za-z0-9_]){name}(?![A-Za-z0-9_])") for name in VARIABLES}
_SELECT = re.compile(r"\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_])(?!\s*\()")

Reads = dict[str, frozenset[str] | None]
"""Per variable read, the top-level fields read; None: any of them may be."""


@dataclass(frozen=True, slots=True)
class Rule:
    kind: Kind
    expr: str
    name: str
    actions: frozenset[str] | None = None  # None: may concern any action
    program: Any = field(default=None, compare=False, repr=False)

    def label(self) -> str:
        return f"{self.kind} rule {self.name}"


def compile_rules(items: Sequence[Mapping[str, Any]], where: str) -> tuple[list[Rule], list[str]]:
    """Rules from ``authorization.rules``: each item one of ``{deny|require|allow: EXPR}``,
    with an optional ``name``; the problems found, each naming its rule."""
    rules: list[Rule] = []
    problems: list[str] = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        kinds = [k for k in KINDS if k in item]
        extra = sorted(set(item) - {*KINDS, "name"})
        if len(kinds) != 1 or extra:
            problems.append(f"{at}: expected exactly one of deny, require, allow (and a name)")
            continue
        kind = kinds[0]
        expr = item[kind]
        name = str(item.get("name") or f"#{i}")
        try:
            program = compile_condition(expr, VOCABULARY)
        except ConditionError as e:
            problems.append(f"{at} ({kind} {name}): {e}")
            continue
        rules.append(Rule(kind, expr, name, _actions(kind, expr), program))
    return rules, problems


def _actions(kind: Kind, expr: str) -> frozenset[str] | None:
    """The actions a rule can concern, from its top-level shape; None when it cannot tell."""
    if kind == "require":
        for part in split_top(expr, "||"):
            m = _NE.match(part.strip())
            if m:
                return _known({m[1] or m[2]})
        return None
    for part in split_top(expr, "&&"):
        part = part.strip()
        m = _EQ.match(part)
        if m:
            return _known({m[1] or m[2]})
        m = _IN.match(part)
        if m:
            items = m[1].split(",")
            found = [_LITERAL.fullmatch(x) for x in items if x.strip()]
            if found and all(found):
                return _known({f[1] or f[2] for f in found if f})
    return None


def _known(actions: set[str]) -> frozenset[str] | None:
    # A misspelt action matches nothing: leave it to the evaluation (it is still correct).
    return frozenset(actions) if actions <= set(PERMISSIONS) else None


def split_top(expr: str, op: str) -> list[str]:
    """``expr`` split at ``op`` outside parentheses, brackets and string literals."""
    parts: list[str] = []
    depth = 0
    quote = ""
    start = i = 0
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(op, i):
            parts.append(expr[start:i])
            i += len(op)
            start = i
            continue
        i += 1
    parts.append(expr[start:])
    return parts


def index(rules: Iterable[Rule]) -> dict[str, dict[Kind, tuple[Rule, ...]]]:
    """Per action, the rules of each kind that can concern it (in config order)."""
    out: dict[str, dict[Kind, tuple[Rule, ...]]] = {}
    listed = list(rules)
    for action in PERMISSIONS:
        out[action] = {
            kind: tuple(
                r for r in listed if r.kind == kind and (r.actions is None or action in r.actions)
            )
            for kind in KINDS
        }
    return out


def fields_read(expr: str, program: Any) -> Reads:
    """The variables ``program`` (compiled from ``expr``) reads, each with the top-level fields
    it reads, or None when it may read any.

    Only ``name.field`` (not a method call) is followed. Any other occurrence of the name
    (indexed, iterated, passed whole, in a string or a comment) counts as reading every field,
    so the answer can only err towards reading more.
    """
    out: Reads = {}
    for name in sorted(set(program.variables()) & set(VARIABLES)):
        selects = [_SELECT.match(expr, m.end()) for m in _NAMES[name].finditer(expr)]
        fields = {s[1] for s in selects if s is not None}
        # None: some occurrence is not name.field, or none was found at all
        whole = not selects or any(s is None for s in selects)
        out[name] = None if whole else frozenset(fields)
    return out


def merge_reads(reads: Iterable[Reads]) -> Reads:
    """What any of ``reads`` reads."""
    out: Reads = {}
    for read in reads:
        for name, fields in read.items():
            had = out.get(name, frozenset())
            out[name] = None if had is None or fields is None else had | fields
    return out
