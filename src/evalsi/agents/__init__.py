"""Agent runs: the tools an agent may call and the environment the harness owns around them
(tool policy, approvals, scheduled faults, injected payloads), recording every call as
trajectory steps. The design and what lands when: ``docs/decisions/0010-agent-runs.md``."""

from evalsi.agents._environment import Approvals, Environment, Fault, Injection, ToolResult
from evalsi.agents._policy import Decision, ToolPolicy
from evalsi.agents._tools import (
    PERMISSIONS,
    FunctionTool,
    Permission,
    Tool,
    ToolFailed,
    ToolHints,
    ToolSpec,
    schema_of,
)

__all__ = [
    "PERMISSIONS",
    "Approvals",
    "Decision",
    "Environment",
    "Fault",
    "FunctionTool",
    "Injection",
    "Permission",
    "Tool",
    "ToolFailed",
    "ToolHints",
    "ToolPolicy",
    "ToolResult",
    "ToolSpec",
    "schema_of",
]
