"""The permission list: every action a request can take, and the built-in roles over it.

Every RPC maps to exactly one of these actions (the server's action table, checked by a test
against the service descriptors). The list is a stable, versioned public contract: roles name
these strings, and ``runs.*`` or ``*`` name several at once.
"""

from __future__ import annotations

from collections.abc import Iterable

PERMISSIONS: dict[str, str] = {
    "catalog.read": "list evaluators, packs and connectors; the API description and reflection",
    "evaluations.run": "grade records (Evaluate, EvaluateStream): spends judge budget",
    "runs.read": "read runs, their results, tasks, bundles and comparisons",
    "runs.create": "start runs: calls targets and judges, may run code in the sandbox",
    "runs.cancel": "cancel a run",
    "runs.resume": "resume an interrupted run",
    "results.write": "ingest results computed elsewhere (IngestService)",
    "datasets.read": "list and read uploaded datasets",
    "datasets.write": "upload datasets and append rows",
    "reviews.read": "export and list people's reviews of results",
    "reviews.write": "import reviews",
    "traces.read": "read traces, sessions and spans",
    "traces.write": "send traces (OTLP) and feedback",
    "policies.read": "list online policies and their statistics",
    "policies.write": "apply and delete online policies (and promote traces to datasets)",
    "access.manage": "the project's API keys and role bindings",
    "audit.read": "read the project's audit log",
    "self.read": "who-am-i, the permission list, roles and the caller's projects",
    "projects.manage": "create projects (install-wide)",
    "metrics.read": "the Prometheus metrics (install-wide)",
}

INSTALL_WIDE = frozenset({"projects.manage", "metrics.read"})
"""Permissions only ``owner`` holds: no project role may carry them."""

SELF = "self.read"
"""Every authenticated principal may ask who it is."""

_VIEWER = ("catalog.read", "runs.read", "policies.read", "traces.read", "datasets.read",
           "reviews.read")  # fmt: skip
_RUNNER = ("evaluations.run", "runs.create", "runs.cancel", "runs.resume", "results.write")

BUILTIN_ROLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # name: (inherits, permissions)
    "viewer": ((), _VIEWER),
    "runner": (("viewer",), _RUNNER),
    "editor": (("runner",), ("policies.write", "datasets.write", "reviews.write")),
    "admin": (("editor",), ("access.manage", "audit.read")),
    "ingest": ((), ("traces.write",)),
    "owner": ((), ("*",)),
}
"""The roles every install has; ``owner`` is install-wide and cannot be redefined."""


def grants(pattern: str, action: str) -> bool:
    """Whether a permission ``pattern`` (an action, ``group.*`` or ``*``) covers ``action``."""
    if pattern == "*" or pattern == action:
        return True
    return pattern.endswith(".*") and action.startswith(pattern[:-1])


def check_permission(pattern: str) -> str | None:
    """What is wrong with a permission name in a role, or None."""
    if pattern == "*":
        return None
    if pattern.endswith(".*"):
        group = pattern[:-1]
        if any(p.startswith(group) for p in PERMISSIONS):
            return None
        return f"no permission starts with {group!r}"
    if pattern in PERMISSIONS:
        return None
    close = [p for p in PERMISSIONS if p.split(".")[0] == pattern.split(".")[0]]
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown permission {pattern!r}{hint}"


def expand(patterns: Iterable[str]) -> frozenset[str]:
    """Every action the patterns cover."""
    return frozenset(a for a in PERMISSIONS for p in patterns if grants(p, a))
