"""Tool policy: the precedence (deny > allow > destructive blocked > read-only > default) holds
for every tool and policy; server hints can only make a tool more dangerous."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalsi.agents import PERMISSIONS, ToolHints, ToolPolicy, ToolSpec
from evalsi.core import UserError

NAMES = st.sampled_from(["read_db", "write_db", "wipe", "mail"])
hints = st.none() | st.builds(ToolHints, st.none() | st.booleans(), st.none() | st.booleans())
specs = st.builds(
    ToolSpec,
    name=NAMES,
    permission=st.sampled_from(PERMISSIONS),
    hints=hints,
    declared=st.booleans(),
)
policies = st.builds(
    ToolPolicy,
    allow=st.frozensets(NAMES),
    deny=st.frozensets(NAMES),
    allow_destructive=st.booleans(),
    read_only=st.booleans(),
    default=st.sampled_from(["allow", "deny"]),
)


def _expected(policy: ToolPolicy, spec: ToolSpec) -> tuple[bool, str]:
    """The precedence written out as a plain table, rule by rule."""
    permission = spec.effective()
    rules = [
        (spec.name in policy.deny, False, "deny"),
        (spec.name in policy.allow, True, "allow"),
        (permission == "irreversible" and not policy.allow_destructive, False, "destructive"),
        (policy.read_only and permission != "read", False, "read_only"),
        (True, policy.default == "allow", "default"),
    ]
    return next((allowed, rule) for hit, allowed, rule in rules if hit)


@given(policies, specs)
def test_one_rule_decides_in_precedence_order(policy: ToolPolicy, spec: ToolSpec) -> None:
    d = policy.decide(spec)
    assert (d.allowed, d.rule) == _expected(policy, spec)


@given(policies, specs)
def test_an_explicit_deny_always_blocks(policy: ToolPolicy, spec: ToolSpec) -> None:
    denied = ToolPolicy(policy.allow, policy.deny | {spec.name}, True, False, "allow")
    assert not denied.decide(spec).allowed


@given(specs)
def test_hints_never_lower_the_declared_permission(spec: ToolSpec) -> None:
    if spec.declared:
        assert PERMISSIONS.index(spec.effective()) >= PERMISSIONS.index(spec.permission)


@pytest.mark.parametrize(
    ("read_only", "destructive", "effective"),
    [
        (True, True, "irreversible"),  # claims both: treated as destructive
        (True, None, "read"),
        (True, False, "read"),
        (None, False, "write"),
        (None, None, "irreversible"),  # MCP's defaults: may destroy
        (False, True, "irreversible"),
    ],
)
def test_an_undeclared_tool_is_as_dangerous_as_its_hints_allow(
    read_only: bool | None, destructive: bool | None, effective: str
) -> None:
    spec = ToolSpec("t", hints=ToolHints(read_only, destructive), declared=False)
    assert spec.effective() == effective


def test_a_claim_of_read_only_does_not_lower_a_declared_write() -> None:
    spec = ToolSpec("t", permission="write", hints=ToolHints(read_only=True))
    assert spec.effective() == "write"
    assert not ToolPolicy(read_only=True).decide(spec).allowed


def test_an_undeclared_tool_without_hints_is_destructive() -> None:
    assert ToolSpec("t", declared=False).effective() == "irreversible"


def test_a_policy_naming_no_tool_is_refused_with_the_field() -> None:
    with pytest.raises(UserError, match=r"spec\.environment\.policy\.deny: no tool named wpie"):
        ToolPolicy(deny=frozenset({"wpie"})).check_names(["wipe", "read_db"])
    ToolPolicy(allow=frozenset({"wipe"})).check_names(["wipe"])  # known: fine
