"""The task's workspace: the state the harness owns for one task of an agent run.

Each task of an environment that has state (fixtures, sandbox tools or checkers) gets a fresh
sandbox on the ladder; its workspace directory holds the task's files. Fixtures are written
there before the agent starts, tools act on it (sandbox tools through the sandbox, function
tools through ``workspace()``), checkers read it once the agent stops, and it is destroyed after
the task. A resumed run builds a new workspace per task, so nothing a finished task did is
replayed.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from pathlib import Path

from evalsi.agents._tools import ToolFailed
from evalsi.sandbox import AsyncSandbox

_current: contextvars.ContextVar[AsyncSandbox | None] = contextvars.ContextVar(
    "evalsi_task_sandbox", default=None
)


def current_sandbox() -> AsyncSandbox:
    """The running task's sandbox; ``ToolFailed`` outside a task with a workspace."""
    sandbox = _current.get()
    if sandbox is None:
        raise ToolFailed(
            "this tool needs the task's workspace, and the environment has none "
            "(give spec.environment a sandbox, fixtures or a checker)"
        )
    return sandbox


def workspace() -> Path:
    """The running task's workspace directory, for function tools that keep state in files.

    Example (a function tool)::

        def balance(account: str) -> float:
            accounts = json.loads((workspace() / "accounts.json").read_text())
            return accounts[account]
    """
    return current_sandbox().workspace


@contextlib.contextmanager
def bound(sandbox: AsyncSandbox | None) -> Iterator[None]:
    """Make ``sandbox`` the current task's for the calls made inside (and the asyncio tasks and
    tool threads they start, which copy the context)."""
    token = _current.set(sandbox)
    try:
        yield
    finally:
        _current.reset(token)
