"""The decision order (deny → require → role → allow → default deny), rules that fail to
evaluate, role conditions, the rule index, escalation checks and config problems by name."""

from __future__ import annotations

import pytest

from evalsi.auth import Access, AuthConfigError, AuthSettings, PermissionDenied, Principal

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
