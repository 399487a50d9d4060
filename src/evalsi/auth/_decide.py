"""The decision: may this principal take this action on this resource?

The order, agentgateway's:

1. a ``deny`` rule that matches denies;
2. a ``require`` rule that does not hold denies;
3. a role the principal holds in the resource's project (bound, carried by its API key, or
   mapped from its token's ``roleClaims``) whose permissions cover the action and whose
   condition holds allows;
4. an ``allow`` rule that matches allows;
5. otherwise the request is denied.

``self.read`` (who-am-i and the lists filtered to the caller) is allowed to any authenticated
principal once the deny and require rules pass. Every decision names what decided it, and with
``explain`` the whole path (``evalsi auth check``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.auth._permissions import INSTALL_WIDE, SELF
from evalsi.auth._principal import Principal
from evalsi.auth._roles import Binding, Role, normal_subject, subject_keys
from evalsi.auth._rules import KINDS, Reads, Rule, fields_read, index, merge_reads
from evalsi.auth._vocabulary import VARIABLES
from evalsi.core import cel_module

_EVERY: Reads = dict.fromkeys(VARIABLES)
_CONTEXTS = 1024
"""CEL contexts an Authorizer keeps per thread (all dropped when it holds this many)."""
_SCALARS = frozenset({str, int, float, bool, type(None)})


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    action: str
    project: str
    by: str  # the rule, role or default that decided
    path: tuple[str, ...] = ()  # every step, when explained

    @property
    def word(self) -> str:
        return "allow" if self.allowed else "deny"


@dataclass(frozen=True, slots=True)
class Held:
    """A role the principal holds in a project, and why."""

    role: str
    via: str  # "binding user:corp/alice in checkout", "API key", "token claim app_roles"


@dataclass(slots=True)
class _Vars:
    """The CEL variables of one decision, converted once, when a rule or condition needs them.

    Only what ``reads`` names is converted: the variables, and their fields, that some program
    which may run here reads. Turning Python values into CEL values costs about a microsecond
    a string, most of a decision's time; what no program reads cannot change a result. A
    context made from exactly the same values is taken from ``contexts`` when given (the
    programs are pure: no custom functions, so their results depend on the values alone)."""

    principal: Principal
    roles: tuple[str, ...]
    request: Mapping[str, Any]
    resource: Mapping[str, Any]
    source: str
    reads: Reads = field(default_factory=lambda: dict(_EVERY))
    contexts: dict[str, Any] | None = None
    _context: Any = field(default=None)

    def context(self) -> Any:
        if self._context is None:
            variables: dict[str, Any] = {}
            for name, fields in self.reads.items():
                value = self._value(name)
                if fields is not None:
                    value = {k: v for k, v in value.items() if k in fields}
                variables[name] = value
            contexts = self.contexts
            key = repr(variables) if contexts is not None and _plain(variables) else None
            context = contexts.get(key) if contexts is not None and key is not None else None
            if context is None:
                context = cel_module().Context(variables=variables)
                if contexts is not None and key is not None:
                    if len(contexts) >= _CONTEXTS:
                        contexts.clear()
                    contexts[key] = context
            self._context = context
        return self._context

    def _value(self, name: str) -> dict[str, Any]:
        p = self.principal
        if name == "jwt":
            return dict(p.claims)
        if name == "apiKey":
            return {"name": p.subject, "labels": dict(p.labels)} if p.kind == "apikey" else {}
        if name == "principal":
            return p.to_cel(self.roles)
        if name == "request":
            return dict(self.request)
        if name == "resource":
            return dict(self.resource)
        return {"address": self.source}


def _plain(value: Any) -> bool:
    """Whether ``value`` is made of str, int, float, bool, None, lists, tuples and dicts with
    str keys only: then its repr names it exactly, type and value at every level (where
    ``{"n": 1} == {"n": True}``, their reprs differ)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is list or kind is tuple:
        return all(_plain(v) for v in value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


def _reads(programs: Iterable[tuple[str, Any]]) -> Reads:
    """What the (expression, program) pairs read, together."""
    return merge_reads(
        fields_read(expr, program) for expr, program in programs if program is not None
    )


def _holds(program: Any, variables: _Vars) -> bool:
    try:
        return program.execute(variables.context()) is True
    except Exception:  # noqa: BLE001 - a rule that fails to evaluate is not matched
        return False


class Authorizer:
    """Decisions over one set of roles, bindings and rules (rebuilt when they change)."""

    def __init__(
        self,
        roles: Mapping[str, Role],
        bindings: Sequence[Binding],
        rules: Sequence[Rule],
    ) -> None:
        self.roles = dict(roles)
        self.bindings = list(bindings)
        self.rules = list(rules)
        self._rules = index(rules)
        self._exact: dict[str, list[Binding]] = {}
        self._cel: list[Binding] = []
        for b in bindings:
            if b.kind == "cel":
                self._cel.append(b)
            else:
                self._exact.setdefault(normal_subject(b.subject), []).append(b)
        # Per action, what its rules and the role conditions read.
        conditions = [(role.condition, role.program) for role in self.roles.values()]
        self._reads = {
            action: _reads(
                [*((r.expr, r.program) for kind in KINDS for r in by_kind[kind]), *conditions]
            )
            for action, by_kind in self._rules.items()
        }
        self._cel_reads = _reads((b.subject[4:], b.program) for b in self._cel)
        self._local = threading.local()  # a context is never shared between threads

    def held(self, principal: Principal, project: str) -> list[Held]:
        """The roles ``principal`` holds in ``project``."""
        out = [
            Held(role, "credential")
            for scope in (project, "*")
            for role in principal.grants.get(scope, ())
        ]
        for key in subject_keys(principal):
            for b in self._exact.get(key, ()):
                if b.project in (project, "*"):
                    out.append(Held(b.role, f"binding {b.subject} in {b.project}"))
        if self._cel:
            variables = _Vars(principal, (), {}, {}, "", self._cel_reads)
            for b in self._cel:
                if b.project in (project, "*") and _holds(b.program, variables):
                    out.append(Held(b.role, f"binding {b.subject} in {b.project}"))
        return out

    def projects_of(self, principal: Principal) -> set[str]:
        """Projects where ``principal`` holds some role (``*`` among them: every project)."""
        found = {scope for scope, roles in principal.grants.items() if roles}
        for key in subject_keys(principal):
            found.update(b.project for b in self._exact.get(key, ()))
        variables = _Vars(principal, (), {}, {}, "", self._cel_reads)
        found.update(b.project for b in self._cel if _holds(b.program, variables))
        return found

    def decide(
        self,
        principal: Principal,
        action: str,
        resource: Mapping[str, Any],
        request: Mapping[str, Any] | None = None,
        source: str = "",
        *,
        explain: bool = False,
    ) -> Decision:
        project = str(resource.get("project", ""))
        path: list[str] = []
        held = self.held(principal, project)
        if not project and action not in INSTALL_WIDE:
            # Nothing of a project's (the catalog, the API's description): a role that grants
            # it in any project of the caller's grants it here.
            held += [h for p in sorted(self.projects_of(principal) - {"*"})
                     for h in self.held(principal, p)]  # fmt: skip
        variables = _Vars(
            principal,
            tuple(h.role for h in held),
            {"action": action, **(request or {})},
            resource,
            source,
            self._reads.get(action, _EVERY),
            self._contexts(),
        )
        rules = self._rules.get(action) or dict.fromkeys(KINDS, ())

        def done(allowed: bool, by: str) -> Decision:
            if explain:
                path.append(f"decision: {'allow' if allowed else 'deny'} ({by})")
            return Decision(allowed, action, project, by, tuple(path))

        for rule in rules["deny"]:
            matched = _holds(rule.program, variables)
            if explain:
                path.append(f"{rule.label()}: {'matches' if matched else 'no match'}")
            if matched:
                return done(False, rule.label())
        for rule in rules["require"]:
            held_rule = _holds(rule.program, variables)
            if explain:
                path.append(f"{rule.label()}: {'holds' if held_rule else 'does not hold'}")
            if not held_rule:
                return done(False, rule.label())
        if action == SELF and principal.authenticated:
            return done(True, "any authenticated principal")
        for h in held:
            role = self.roles.get(h.role)
            if role is None:
                if explain:
                    path.append(f"role {h.role} ({h.via}): no such role")
                continue
            if action not in role.actions:
                if explain:
                    path.append(f"role {h.role} ({h.via}): does not grant {action}")
                continue
            if role.program is not None and not _holds(role.program, variables):
                if explain:
                    path.append(f"role {h.role} ({h.via}): condition does not hold")
                continue
            return done(True, f"role {h.role} ({h.via})")
        if explain and not held:
            path.append(f"no role in project {project!r}")
        for rule in rules["allow"]:
            matched = _holds(rule.program, variables)
            if explain:
                path.append(f"{rule.label()}: {'matches' if matched else 'no match'}")
            if matched:
                return done(True, rule.label())
        return done(False, "default deny")

    def _contexts(self) -> dict[str, Any]:
        """This thread's contexts by the repr of their values."""
        found: dict[str, Any] | None = getattr(self._local, "contexts", None)
        if found is None:
            found = self._local.contexts = {}
        return found

    def can_grant(self, granter: Principal, project: str, role_name: str) -> str | None:
        """Why ``granter`` may not give ``role_name`` in ``project`` (a binding or an API key),
        or None. A principal can grant only what it holds there itself, with conditions at
        least as strict: every action of the role must come from one of the granter's own
        roles in that project whose condition is none or the same as the granted role's."""
        role = self.roles.get(role_name)
        if role is None:
            return f"no role named {role_name!r}"
        own = [self.roles[h.role] for h in self.held(granter, project) if h.role in self.roles]
        if any(r.name == "owner" for r in own):
            return None
        if project == "*" or role.name == "owner":
            return "only an owner grants roles in every project, or the owner role"
        missing = sorted(
            a
            for a in role.actions
            if not any(a in r.actions and r.condition in ("", role.condition) for r in own)
        )
        if missing:
            return (
                f"granting {role_name!r} in {project!r} needs {', '.join(missing)}, "
                "which you do not hold there yourself"
            )
        return None
