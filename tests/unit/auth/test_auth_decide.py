"""The decision order (deny → require → role → allow → default deny), rules that fail to
evaluate, role conditions, the rule index, escalation checks and config problems by name."""

from __future__ import annotations

import threading

import pytest

from evalsi.auth import Access, AuthConfigError, AuthSettings, PermissionDenied, Principal
from evalsi.auth._rules import fields_read
from evalsi.core import cel_module

ALICE = Principal("user", "corp", "alice", groups=("eng",), claims={"repository": "acme/a"})


def _access(**more: object) -> Access:
    base: dict[str, object] = {"enabled": True, "projects": {"p": {}, "q": {}}}
    base.update(more)
    return Access(AuthSettings(**base))  # type: ignore[arg-type]


def _decide(access: Access, who: Principal, action: str, **resource: object) -> tuple[bool, str]:
    d = access.decide(who, action, {"project": "p", "labels": {}, **resource})
    return d.allowed, d.by


def test_default_deny_then_a_bound_role_allows() -> None:
    assert _decide(_access(), ALICE, "runs.read") == (False, "default deny")
    bound = _access(bindings=(("viewer", "group:corp/eng", "p"),))
    allowed, by = _decide(bound, ALICE, "runs.read")
    assert allowed
    assert "viewer" in by
    assert _decide(bound, ALICE, "runs.create")[0] is False
    assert bound.decide(ALICE, "runs.read", {"project": "q", "labels": {}}).allowed is False


def test_deny_beats_a_role_and_require_must_hold() -> None:
    rules = ({"name": "nope", "deny": 'principal.subject == "alice"'},)
    access = _access(bindings=(("owner", "user:corp/alice", "*"),), rules=rules)
    assert _decide(access, ALICE, "runs.read") == (False, "deny rule nope")
    rules = ({"name": "code", "require": '!resource.runs_code || "sandbox" in principal.groups'},)
    access = _access(bindings=(("owner", "user:corp/alice", "*"),), rules=rules)
    assert _decide(access, ALICE, "runs.create", runs_code=True) == (False, "require rule code")
    assert _decide(access, ALICE, "runs.create", runs_code=False)[0] is True
    # A require rule that fails to evaluate (no runs_code at all) does not hold: deny.
    assert _decide(access, ALICE, "runs.read") == (False, "require rule code")


def test_a_failing_deny_rule_does_not_deny_and_allow_rules_come_last() -> None:
    rules = (
        {"name": "broken", "deny": "resource.missing.field == 1"},
        {"name": "ci", "allow": 'jwt.repository == "acme/a" && request.action == "runs.read"'},
    )
    access = _access(rules=rules)
    assert _decide(access, ALICE, "runs.read") == (True, "allow rule ci")
    assert _decide(access, ALICE, "runs.create") == (False, "default deny")


def test_role_conditions_and_the_explained_path() -> None:
    roles = ({"name": "qwen", "permissions": ["runs.create"],
              "condition": 'resource.target.model == "qwen3"'},)  # fmt: skip
    access = _access(roles=roles, bindings=(("qwen", "user:corp/alice", "p"),))
    assert _decide(access, ALICE, "runs.create", target={"model": "qwen3"})[0] is True
    assert _decide(access, ALICE, "runs.create", target={"model": "gpt"})[0] is False
    d = access.decide(ALICE, "runs.create", {"project": "p", "target": {"model": "gpt"}},
                      explain=True)  # fmt: skip
    assert any("condition does not hold" in step for step in d.path)
    assert d.path[-1] == "decision: deny (default deny)"


def test_rules_are_indexed_by_the_actions_they_name() -> None:
    deny = 'request.action == "runs.create" && resource.labels.x == "{}"'
    rules = (
        *({"name": f"r{i}", "deny": deny.format(i)} for i in range(50)),
        {"name": "any", "require": 'request.action != "runs.cancel" || principal.id != ""'},
    )
    access = _access(rules=rules)
    index = access.authorizer._rules
    assert len(index["runs.create"]["deny"]) == 50
    assert index["runs.read"]["deny"] == ()
    assert index["runs.read"]["require"] == ()
    assert len(index["runs.cancel"]["require"]) == 1


def test_every_variable_reaches_what_reads_it() -> None:
    # A decision converts only the variables its action's rules and the role conditions read:
    # each one must still arrive, whichever program reads it.
    ci = Principal("apikey", "apikey", "ci", labels={"team": "t"})
    cases = [
        (ALICE, 'jwt.repository == "acme/a"'),
        (ci, 'apiKey.name == "ci" && apiKey.labels.team == "t"'),
        (ALICE, 'principal.groups.exists(g, g == "eng")'),
        (ALICE, 'request.action == "runs.read" && request.protocol == "grpc"'),
        (ALICE, 'resource.labels.app == "a"'),
        (ALICE, 'source.address == "10.0.0.1:5"'),
    ]
    resource = {"project": "p", "labels": {"app": "a"}}
    for who, expr in cases:
        access = _access(rules=({"name": "only", "allow": expr},))
        d = access.decide(who, "runs.read", resource, {"protocol": "grpc"}, "10.0.0.1:5")
        assert (d.allowed, d.by) == (True, "allow rule only"), expr
    assert not access.decide(ALICE, "runs.read", resource, {"protocol": "grpc"}, "").allowed
    roles = ({"name": "lan", "permissions": ["runs.read"],
              "condition": 'source.address == "10.0.0.1:5"'},)  # fmt: skip
    rules = ({"name": "bob", "deny": 'principal.subject == "bob"'},)
    access = _access(roles=roles, bindings=(("lan", "user:corp/alice", "p"),), rules=rules)
    assert access.decide(ALICE, "runs.read", resource, {}, "10.0.0.1:5").allowed
    assert not access.decide(ALICE, "runs.read", resource, {}, "10.0.0.2:5").allowed
    by_claim = _access(bindings=(("viewer", 'cel:jwt.repository == "acme/a"', "p"),), rules=rules)
    assert by_claim.decide(ALICE, "runs.read", resource).allowed
    assert not by_claim.decide(ci, "runs.read", resource).allowed


@pytest.mark.parametrize(
    ("expr", "reads"),
    [
        ('principal.subject == "a"', {"principal": {"subject"}}),
        ('request.action != "x" || "g" in principal.groups || principal . id == ""',
         {"principal": {"groups", "id"}, "request": {"action"}}),
        ("has(resource.labels.team) && resource.labels.team == jwt.team",
         {"resource": {"labels"}, "jwt": {"team"}}),
        # Anything but name.field reads every field: indexed, iterated, whole, a method call,
        # a comment between the name and the field.
        ('principal["subject"] == "a"', {"principal": None}),
        ('principal.exists(k, k == "email")', {"principal": None}),
        ("size(principal) == 9", {"principal": None}),
        ("principal.size() == 9", {"principal": None}),
        ('"groups" in principal && principal.subject == "a"', {"principal": None}),
        ('[resource][0].labels.app == "a"', {"resource": None}),
        ('principal // the subject\n.subject == "a"', {"principal": None}),
        # A name inside a string, or a loop variable, only adds (never hides) what is read.
        ('principal.subject == "principal"', {"principal": None}),
        ('principal.groups.exists(g, g == "eng")', {"principal": {"groups"}}),
    ],
)  # fmt: skip
def test_fields_read_errs_only_towards_more(expr: str, reads: dict[str, object]) -> None:
    program = cel_module().compile(expr)
    found = fields_read(expr, program)
    assert {k: (set(v) if v is not None else None) for k, v in found.items()} == reads


@pytest.mark.parametrize(
    "expr",
    [
        "size(principal) == 9",
        'principal["subject"] == "alice" && principal.kind == "user"',
        'principal.exists(k, k == "email") && principal.all(k, k != "claims")',
        '[resource][0].labels.app == "a" && size(resource) == 2',
        "size(jwt) == 1",
        'request.size() == 3 && request.headers["x-team"] == "t"',
    ],
)
def test_a_rule_that_reads_a_whole_variable_sees_all_of_it(expr: str) -> None:
    access = _access(rules=({"name": "whole", "allow": expr},))
    request = {"protocol": "grpc", "headers": {"x-team": "t"}}
    d = access.decide(ALICE, "runs.read", {"project": "p", "labels": {"app": "a"}}, request)
    assert (d.allowed, d.by) == (True, "allow rule whole"), expr


def test_a_context_is_reused_only_for_exactly_the_same_values() -> None:
    # 1, 1.0, True and "1" are four values (and {"n": 1} == {"n": True} in Python): each
    # decision must see its own, however often and in whatever order they come.
    rules = ({"name": "int", "allow": "resource.n + 1 == 2"},)
    access = _access(rules=rules)
    cases: list[tuple[object, bool]] = [(1, True), (1.0, False), (True, False), ("1", False)]
    cases.append((2, False))
    for value, allowed in [*cases, *reversed(cases), *cases]:
        d = access.decide(ALICE, "runs.read", {"project": "p", "labels": {}, "n": value})
        assert d.allowed is allowed, repr(value)
    # Values the key cannot name exactly (a tuple key, a set) are converted every time.
    for odd in ({(1,): 1}, {1}):
        assert not access.decide(ALICE, "runs.read", {"project": "p", "n": odd}).allowed


def test_decisions_from_many_threads_see_their_own_values() -> None:
    rules = ({"name": "team", "allow": "resource.labels.team == principal.subject"},)
    access = _access(rules=rules)
    people = [Principal("user", "corp", f"u{i}") for i in range(8)]
    wrong: list[str] = []

    def work(me: Principal) -> None:
        for i in range(300):
            team = me.subject if i % 2 else "other"
            d = access.decide(me, "runs.read", {"project": "p", "labels": {"team": team}})
            if d.allowed is not (team == me.subject):
                wrong.append(f"{me.subject} {team} {d.by}")

    threads = [threading.Thread(target=work, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_escalation_is_refused() -> None:
    access = _access(bindings=(("admin", "user:corp/alice", "p"),))
    assert access.authorizer.can_grant(ALICE, "p", "editor") is None
    assert "owner" in (access.authorizer.can_grant(ALICE, "p", "owner") or "")
    assert access.authorizer.can_grant(ALICE, "q", "viewer") is not None
    with pytest.raises(PermissionDenied):
        access._may_grant(ALICE, "p", "owner")


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"rules": ({"name": "bad", "deny": "request.action =="},)}, "deny bad"),
        ({"rules": ({"name": "typo", "allow": "requst.action == 'x'"},)}, "unknown name"),
        ({"roles": ({"name": "r", "permissions": ["runs.crate"]},)}, "runs.crate"),
        ({"roles": ({"name": "a", "inherits": ["b"]}, {"name": "b", "inherits": ["a"]})}, "cycle"),
        ({"roles": ({"name": "viewer", "permissions": []},)}, "built-in"),
        ({"roles": ({"name": "r", "permissions": ["metrics.read"]},)}, "owner"),
        ({"bindings": (("viewer", "bob", "p"),)}, "subject"),
        ({"bindings": (("nobody", "user:corp/x", "p"),)}, "no role"),
        (
            {"keys": ({"name": "k", "key": "plaintext", "project": "p", "role": "viewer"},)},
            "sha256",
        ),
    ],
)
def test_a_bad_config_stops_with_the_place_named(settings: dict[str, object], named: str) -> None:
    with pytest.raises(AuthConfigError, match=named):
        _access(**settings)


def test_a_project_role_reads_the_catalog_which_belongs_to_no_project() -> None:
    access = _access()
    viewer = Principal("apikey", "key", "v", grants={"p": ("viewer",)})
    assert access.decide(viewer, "catalog.read", {"project": ""}).allowed
    assert not access.decide(viewer, "metrics.read", {"project": ""}).allowed  # owner only
    assert not access.decide(viewer, "runs.read", {"project": "q"}).allowed
    nobody = Principal("user", "corp", "n")
    assert not access.decide(nobody, "catalog.read", {"project": ""}).allowed


def test_conditions_read_the_projects_labels_under_the_resources_own() -> None:
    role = {"name": "shop-runner", "inherits": ["viewer"], "permissions": ["runs.create"],
            "condition": 'resource.labels.team == "shop"'}  # fmt: skip
    access = _access(
        projects={"p": {"team": "shop"}, "q": {"team": "search"}},
        roles=(role,),
        bindings=(("shop-runner", "user:corp/alice", "*"),),
    )
    assert access.decide(ALICE, "runs.create", {"project": "p", "labels": {}}).allowed
    assert not access.decide(ALICE, "runs.create", {"project": "q", "labels": {}}).allowed
    own = {"project": "q", "labels": {"team": "shop"}}  # a run's own labels come first
    assert access.decide(ALICE, "runs.create", own).allowed
    # a role's condition holds for every action it grants, those it inherits too
    assert not access.decide(ALICE, "runs.read", {"project": "q", "labels": {}}).allowed
