"""Agent runs: the built-in agent (``ToolLoop``, run as a target by ``AgentTarget``), the tools
it may call (functions, MCP servers) and the environment the harness owns around them (tool
policy, approvals, scheduled faults, injected payloads), recording every call as trajectory
steps. The design and what lands when: ``docs/decisions/0010-agent-runs.md``."""

from evalsi.agents._environment import Approvals, Environment, Fault, Injection, ToolResult
from evalsi.agents._loop import Budgets, ToolLoop
from evalsi.agents._mcp import McpServer, McpTool
from evalsi.agents._policy import Decision, ToolPolicy
from evalsi.agents._sandbox_tools import sandbox_tools
from evalsi.agents._target import AgentTarget
from evalsi.agents._tools import (
    PERMISSIONS,
    FunctionTool,
    Permission,
    SandboxDenied,
    Tool,
    ToolFailed,
    ToolHints,
    ToolSpec,
    schema_of,
)
from evalsi.agents._workspace import workspace

__all__ = [
    "PERMISSIONS",
    "AgentTarget",
    "Approvals",
    "Budgets",
    "Decision",
    "Environment",
    "Fault",
    "FunctionTool",
    "Injection",
    "McpServer",
    "McpTool",
    "Permission",
    "SandboxDenied",
    "Tool",
    "ToolFailed",
    "ToolHints",
    "ToolLoop",
    "ToolPolicy",
    "ToolResult",
    "ToolSpec",
    "sandbox_tools",
    "schema_of",
    "workspace",
]
