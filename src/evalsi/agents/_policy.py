"""Tool policy: which calls reach a tool. One rule decides each call, in this precedence:

1. an explicit ``deny`` of the tool blocks it;
2. an explicit ``allow`` lets it through;
3. a destructive tool (effective permission ``irreversible``) is blocked unless the policy
   allows destructive tools;
4. in read-only mode, any tool that may write is blocked;
5. otherwise the ``default`` decides.

A blocked call never reaches the tool: the environment records it as a ``policy_block`` step
and answers the agent with a refusal it can recover from. A block is the environment doing its
job, not the agent failing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from evalsi.agents._tools import ToolSpec
from evalsi.core import UserError


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: str  # deny | allow | destructive | read_only | default
    reason: str


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """Example:
    >>> from evalsi.agents._tools import ToolSpec
    >>> p = ToolPolicy(allow=frozenset({"wipe"}))
    >>> p.decide(ToolSpec("wipe", permission="irreversible")).rule
    'allow'
    >>> p.decide(ToolSpec("drop", permission="irreversible")).allowed
    False
    """

    allow: frozenset[str] = frozenset()
    deny: frozenset[str] = frozenset()
    allow_destructive: bool = False
    read_only: bool = False
    default: Literal["allow", "deny"] = "allow"

    def decide(self, spec: ToolSpec) -> Decision:
        name = spec.name
        if name in self.deny:
            return Decision(False, "deny", f"the policy denies {name}")
        if name in self.allow:
            return Decision(True, "allow", f"the policy allows {name}")
        permission = spec.effective()
        if permission == "irreversible" and not self.allow_destructive:
            return Decision(False, "destructive", f"{name} is destructive, blocked by default")
        if self.read_only and permission != "read":
            return Decision(False, "read_only", f"{name} may write; the policy is read-only")
        if self.default == "deny":
            return Decision(False, "default", f"{name} is not allowed (default: deny)")
        return Decision(True, "default", "allowed by default")

    def check_names(self, tools: Iterable[str]) -> None:
        """Refuse a policy that names a tool the environment does not have (a typo would
        otherwise silently allow or deny nothing)."""
        known = set(tools)
        for field, names in (("allow", self.allow), ("deny", self.deny)):
            unknown = sorted(names - known)
            if unknown:
                raise UserError(
                    f"spec.environment.policy.{field}: no tool named {', '.join(unknown)}",
                    hint=f"the tools are: {', '.join(sorted(known)) or '(none)'}",
                )
