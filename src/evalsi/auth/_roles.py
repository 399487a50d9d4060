"""Roles and role bindings: who holds which permissions in which project.

A role is a name, permissions (with ``inherits`` expanded) and an optional CEL ``condition``
that must hold for the role to grant anything. A binding gives a role to a subject in a project
(``*``: every project). Subjects:

* ``user:<provider>/<subject>``, ``email:<address>`` (only when the provider asserts
  ``email_verified``), ``group:<provider>/<group>``, ``key:<name>`` (an API key);
* ``cel:<expression>`` for anything else (over ``jwt``, ``apiKey`` and ``principal``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalsi.auth._permissions import BUILTIN_ROLES, INSTALL_WIDE, check_permission, expand
from evalsi.auth._principal import Principal

SUBJECT_KINDS = ("user", "email", "group", "key", "cel")


@dataclass(frozen=True, slots=True)
class Role:
    """A role after ``inherits`` is expanded: ``actions`` is every action it grants."""

    name: str
    actions: frozenset[str]
    permissions: tuple[str, ...] = ()  # as written (patterns), for display
    inherits: tuple[str, ...] = ()
    condition: str = ""
    program: Any = field(default=None, compare=False, repr=False)
    builtin: bool = False


@dataclass(frozen=True, slots=True)
class Binding:
    """``role`` granted to ``subject`` in ``project`` (``*``: every project)."""

    role: str
    subject: str
    project: str
    id: str = ""  # set for bindings made through the API
    program: Any = field(default=None, compare=False, repr=False)  # a ``cel:`` subject's

    @property
    def kind(self) -> str:
        return self.subject.split(":", 1)[0]


def check_subject(subject: str) -> str | None:
    """What is wrong with a binding subject, or None."""
    kind, sep, rest = subject.partition(":")
    if not sep or kind not in SUBJECT_KINDS:
        return f"expected one of {', '.join(k + ':' for k in SUBJECT_KINDS)} before the subject"
    if not rest.strip():
        return f"{kind}: names nobody"
    if kind in ("user", "group") and "/" not in rest:
        return f"expected {kind}:<provider>/<name>"
    return None


def resolve_roles(defined: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Role], list[str]]:
    """The built-in roles plus ``defined`` (name, permissions, inherits, condition as written),
    with inheritance expanded; the problems found (unknown permission, unknown or cyclic
    inheritance, a built-in redefined, an install-wide permission in a custom role)."""
    problems: list[str] = []
    raw: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
        name: (inherits, perms, "") for name, (inherits, perms) in BUILTIN_ROLES.items()
    }
    for i, item in enumerate(defined):
        name = str(item.get("name", ""))
        where = f"rbac.roles[{i}] ({name})"
        if name in BUILTIN_ROLES:
            problems.append(f"{where}: {name!r} is a built-in role and cannot be redefined")
            continue
        if name in raw:
            problems.append(f"{where}: a second role named {name!r}")
            continue
        perms = tuple(str(p) for p in item.get("permissions", ()))
        for p in perms:
            wrong = check_permission(p)
            if wrong:
                problems.append(f"{where}.permissions: {wrong}")
            elif p in INSTALL_WIDE or p == "*":
                problems.append(f"{where}.permissions: {p!r} is reserved for the owner role")
        inherits = tuple(str(r) for r in item.get("inherits", ()))
        if "owner" in inherits:
            problems.append(f"{where}.inherits: no role may inherit owner")
        raw[name] = (inherits, perms, str(item.get("condition", "") or ""))
    roles: dict[str, Role] = {}
    for name in raw:
        actions, wrong = _expand(name, raw, ())
        if wrong:
            problems.append(f"role {name!r}: {wrong}")
            continue
        inherits, perms, condition = raw[name]
        roles[name] = Role(name, actions, perms, inherits, condition, builtin=name in BUILTIN_ROLES)
    return roles, problems


def _expand(
    name: str,
    raw: Mapping[str, tuple[tuple[str, ...], tuple[str, ...], str]],
    seen: tuple[str, ...],
) -> tuple[frozenset[str], str | None]:
    if name in seen:
        return frozenset(), f"inheritance cycle {' -> '.join((*seen, name))}"
    if name not in raw:
        return frozenset(), f"inherits unknown role {name!r}"
    inherits, perms, _ = raw[name]
    actions = set(expand(perms))
    for parent in inherits:
        more, wrong = _expand(parent, raw, (*seen, name))
        if wrong:
            return frozenset(), wrong
        actions |= more
    return frozenset(actions), None


def subject_keys(principal: Principal) -> list[str]:
    """The exact-match binding subjects that name ``principal``."""
    keys: list[str] = []
    if principal.kind == "apikey":
        keys.append(f"key:{principal.subject}")
    elif principal.kind in ("user", "service"):
        keys.append(f"user:{principal.provider}/{principal.subject}")
        if principal.email and principal.email_verified:
            keys.append(f"email:{principal.email.lower()}")
        keys += [f"group:{principal.provider}/{g}" for g in principal.groups]
    return keys


def normal_subject(subject: str) -> str:
    """Emails compare case-insensitively; every other subject as written."""
    kind, _, rest = subject.partition(":")
    return f"email:{rest.lower()}" if kind == "email" else subject
