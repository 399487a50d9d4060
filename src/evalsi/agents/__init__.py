"""Agent runs: ``AgentTarget`` runs a harness on each task — the built-in agent (``ToolLoop``
as ``BuiltinHarness``), a Python class, or a process speaking the harness protocol (``Harness``)
— with the tools it may call (functions, MCP servers, sandbox tools) in an environment the
harness owns (tool policy, approvals, scheduled faults, injected payloads), recording every call
as trajectory steps; each task has its own workspace (fixtures in, checkers and an end-state
snapshot out). The design: ``docs/decisions/0010-agent-runs.md``."""

from evalsi.agents._cassette import CassetteMiss, Tape, exchange, taping
from evalsi.agents._checkers import contains, snapshot
from evalsi.agents._environment import Approvals, Environment, Fault, Injection, ToolResult
from evalsi.agents._git_workspace import resolve_revision
from evalsi.agents._harness import (
    BuiltinHarness,
    CheckResult,
    Final,
    Harness,
    HarnessInfo,
    MultiTurnHarness,
    TaskSetup,
)
from evalsi.agents._loop import Budgets, ToolLoop
from evalsi.agents._mcp import McpServer, McpTool, resolve_program
from evalsi.agents._policy import Decision, ToolPolicy
from evalsi.agents._sandbox_tools import sandbox_tools
from evalsi.agents._scripted import ScriptedModel
from evalsi.agents._simulator import (
    ReplyCache,
    SimulatedUser,
    SimulatorAccount,
    UserSimulator,
    UserTurn,
)
from evalsi.agents._target import MAX_EVENTS, AgentTarget, RemoteHarness, Replay
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
from evalsi.agents._workspace import current_sandbox, workspace

__all__ = [
    "MAX_EVENTS",
    "PERMISSIONS",
    "AgentTarget",
    "Approvals",
    "Budgets",
    "BuiltinHarness",
    "CassetteMiss",
    "CheckResult",
    "Decision",
    "Environment",
    "Fault",
    "Final",
    "FunctionTool",
    "Harness",
    "HarnessInfo",
    "Injection",
    "McpServer",
    "McpTool",
    "MultiTurnHarness",
    "Permission",
    "RemoteHarness",
    "Replay",
    "ReplyCache",
    "SandboxDenied",
    "ScriptedModel",
    "SimulatedUser",
    "SimulatorAccount",
    "Tape",
    "TaskSetup",
    "Tool",
    "ToolFailed",
    "ToolHints",
    "ToolLoop",
    "ToolPolicy",
    "ToolResult",
    "ToolSpec",
    "UserSimulator",
    "UserTurn",
    "contains",
    "current_sandbox",
    "exchange",
    "resolve_program",
    "resolve_revision",
    "sandbox_tools",
    "schema_of",
    "snapshot",
    "taping",
    "workspace",
]
