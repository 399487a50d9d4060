"""Sandbox tools: ``exec``, ``read_file`` and ``write_file``, acting on the running task's
sandbox (``_workspace.current_sandbox()``), so an agent's commands run on the isolation ladder
and its files stay in the task's workspace, which is thrown away after the task.

What the confinement stops is a ``SandboxDenied`` (the environment records a
``sandbox_denial`` step): an ``exec`` whose outcome is ``denied`` (a syscall the filter kills),
a path the workspace's copy functions refuse as an escape (``SandboxEscape``: absolute, ``..``,
a symlink or special file on the way), a write to a read-only workspace. Paths are never
checked here: ``copy_in``/``copy_out`` are the confinement, and this module only reads how they
refused. A command that merely fails inside the sandbox (a network call answered EPERM, a write
to the read-only system) is the command's own exit, not a denial; a timeout or an exceeded
limit is a failure the agent sees; a broken sandbox (``runner_failure``) is infrastructure.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from evalsi.agents._environment import MAX_RESULT_BYTES
from evalsi.agents._tools import SandboxDenied, Tool, ToolFailed, ToolSpec
from evalsi.agents._workspace import current_sandbox
from evalsi.connectors import InfraError
from evalsi.core import JsonValue, UserError
from evalsi.sandbox import ExecResult, SandboxEscape, SandboxFileError

STREAM_BYTES = MAX_RESULT_BYTES // 2 - 1024
"""Each of ``exec``'s stdout and stderr (as JSON): together they stay under the environment's
result bound, so the result keeps its shape instead of becoming cut JSON text."""
READ_BYTES = 16 << 20
"""The largest file ``read_file`` reads (the sandbox's ``copy_out`` cap): its text is then cut
to the result bound; a larger file is an error pointing at ``exec`` (``head``, ``grep``)."""

_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class ExecTool:
    """Run a command in the task's sandbox, in the workspace."""

    spec = ToolSpec(
        name="exec",
        description=(
            "Run a command in the task's sandbox, with the workspace as the working directory. "
            "`command` is a list of strings (program and arguments, run without a shell) or one "
            "string (run with `sh -c`). Returns exit_code, stdout and stderr (long output is cut "
            "short). The sandbox may deny the network and parts of the system; its timeout "
            "caps `timeout_seconds`."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {
                    "anyOf": [
                        {"type": "array", "items": {"type": "string"}, "minItems": 1},
                        {"type": "string", "minLength": 1},
                    ],
                    "description": 'e.g. ["python3", "main.py"] or "ls -la | head"',
                },
                "timeout_seconds": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "stop the command after this long (capped by the sandbox's)",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        permission="write",  # it can change the workspace, which is the task's to throw away
        reversible=True,
        exposure="internal",
    )

    async def call(self, arguments: Mapping[str, Any]) -> JsonValue:
        _expect(arguments, "exec", required=("command",), optional=("timeout_seconds",))
        argv = _argv(arguments["command"])
        sandbox = current_sandbox()
        cap = sandbox.sync.spec.timeout_seconds
        timeout = _timeout(arguments.get("timeout_seconds"), cap)
        result = await sandbox.exec(argv, timeout=timeout)
        return _exec_result(result, timeout or cap)


class ReadFileTool:
    """Read a text file of the task's workspace."""

    spec = ToolSpec(
        name="read_file",
        description=(
            "Read a text file of the workspace. `path` is relative to the workspace (no "
            "absolute paths, no `..`; symlinks are not followed). A long file is cut short; "
            "a binary file is refused (inspect it with exec)."
        ),
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string", "description": "e.g. src/main.py"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        permission="read",
        reversible=True,
        exposure="internal",
    )

    async def call(self, arguments: Mapping[str, Any]) -> JsonValue:
        _expect(arguments, "read_file", required=("path",))
        path = _path(arguments["path"], "read_file")
        sandbox = current_sandbox()
        with _refusals("read_file", path):
            data = await sandbox.copy_out(path, max_bytes=READ_BYTES)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if "\0" in text or (data and not text):
            raise ToolFailed(
                f"read_file: {path!r} is binary ({len(data):,} bytes), not UTF-8 text; "
                "inspect it with exec (e.g. `od -c`, `file`)"
            )
        return _cut(text, MAX_RESULT_BYTES - 1024, len(data))


class WriteFileTool:
    """Write a text file into the task's workspace."""

    spec = ToolSpec(
        name="write_file",
        description=(
            "Write `content` (text) to a file of the workspace, replacing it if it exists and "
            "creating its parent directories. `path` is relative to the workspace (no absolute "
            "paths, no `..`)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "e.g. src/main.py"},
                "content": {"type": "string"},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
        permission="write",
        reversible=True,
        exposure="internal",
    )

    async def call(self, arguments: Mapping[str, Any]) -> JsonValue:
        _expect(arguments, "write_file", required=("path", "content"))
        path = _path(arguments["path"], "write_file")
        content = arguments["content"]
        if not isinstance(content, str):
            raise ToolFailed(f"write_file: `content` must be a string, got {_kind(content)}")
        sandbox = current_sandbox()
        if sandbox.sync.spec.file_access == "read-only":
            raise SandboxDenied(f"write_file {path!r}: the workspace is read-only")
        data = content.encode("utf-8", "replace")  # a lone surrogate becomes "?"
        with _refusals("write_file", path):
            await sandbox.copy_in(data, path)
        return {"path": path, "bytes": len(data)}


_TOOLS: dict[str, type[ExecTool | ReadFileTool | WriteFileTool]] = {
    "exec": ExecTool,
    "read_file": ReadFileTool,
    "write_file": WriteFileTool,
}


def sandbox_tools(names: Sequence[str]) -> list[Tool]:
    """The sandbox tools named, in that order, each acting on the running task's sandbox.

    Example:
        >>> [t.spec.name for t in sandbox_tools(["exec", "read_file"])]
        ['exec', 'read_file']
    """
    where = "spec.environment.tools.sandbox"
    allowed = f"the sandbox tools are: {', '.join(_TOOLS)}"
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise UserError(
            f"{where}: expected a non-empty list of tool names, got {names!r}",
            hint=allowed,
        )
    tools: list[Tool] = []
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or name not in _TOOLS:
            raise UserError(f"{where}: no sandbox tool named {name!r}", hint=allowed)
        if name in seen:
            raise UserError(f"{where}: {name!r} is listed twice", hint=allowed)
        seen.add(name)
        tools.append(_TOOLS[name]())
    return tools


def _expect(
    arguments: Mapping[str, Any],
    tool: str,
    *,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> None:
    missing = [a for a in required if a not in arguments]
    extra = sorted(set(arguments) - {*required, *optional})
    if missing or extra:
        what = [f"missing {', '.join(missing)}"] if missing else []
        what += [f"unexpected {', '.join(extra)}"] if extra else []
        raise ToolFailed(
            f"bad arguments for {tool}: {'; '.join(what)} "
            f"(takes {', '.join((*required, *optional))})"
        )


def _argv(command: Any) -> list[str]:
    if isinstance(command, str) and command.strip() and "\0" not in command:
        return ["sh", "-c", command]
    if (
        isinstance(command, list)
        and command
        and all(isinstance(a, str) and "\0" not in a for a in command)
        and command[0]
    ):
        return list(command)
    raise ToolFailed(
        'exec: `command` must be a non-empty list of strings (e.g. ["ls", "-la"]) or a '
        f"non-empty string run with sh -c, got {_kind(command)}"
    )


def _timeout(value: Any, cap: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ToolFailed(f"exec: `timeout_seconds` must be a positive number, got {value!r}")
    return min(float(value), cap)


def _path(value: Any, tool: str) -> str:
    if not isinstance(value, str) or not value:
        raise ToolFailed(f"{tool}: `path` must be a non-empty string, got {_kind(value)}")
    return value


def _exec_result(result: ExecResult, timeout: float) -> JsonValue:
    outcome = result.outcome
    if outcome.kind == "runner_failure":
        raise InfraError(
            "sandbox",
            f"the task's sandbox failed ({result.isolation.driver}): {outcome.detail}",
        )
    if outcome.kind == "denied":
        raise SandboxDenied(f"the sandbox stopped the command ({outcome.detail or 'denied'})")
    if outcome.kind == "timeout":
        raise ToolFailed(f"exec: the command did not finish within {timeout:g}s and was stopped")
    if outcome.kind == "resource_exceeded":
        raise ToolFailed(
            f"exec: the command went over the sandbox's {outcome.detail or 'resource'} limit "
            "and was stopped"
        )
    return {
        "exit_code": outcome.code,
        "stdout": _stream(result.stdout, result.stdout_truncated),
        "stderr": _stream(result.stderr, result.stderr_truncated),
    }


def _stream(data: bytes, truncated: bool) -> str:
    text = data.decode("utf-8", "replace")
    if truncated:  # the sandbox kept its cap and dropped the rest
        text += "\n[... cut by the sandbox: the output went over its limit]"
    return _cut(text, STREAM_BYTES, len(data))


def _cut(text: str, budget: int, size: int) -> str:
    """``text`` if its JSON fits ``budget`` bytes, else its start that does, with a note."""
    if len(orjson.dumps(text)) <= budget:
        return text
    note = f"\n[... cut by the harness: {size:,} bytes in all]"
    room = budget - len(note) - 2
    cut = text.encode("utf-8")[:room].decode("utf-8", "ignore")
    while len(orjson.dumps(cut)) > room:  # escapes (control characters) take more room
        cut = cut[: len(cut) * 3 // 4]
    return cut + note


@contextlib.contextmanager
def _refusals(tool: str, path: str) -> Iterator[None]:
    """How ``copy_in``/``copy_out`` refused, as the agent sees it: an escape is a denial, the
    rest (a missing file, a directory, a full workspace) is an ordinary failure."""
    try:
        yield
    except SandboxEscape as e:
        raise SandboxDenied(f"{tool}: {e}") from None
    except SandboxFileError as e:
        raise ToolFailed(f"{tool}: {e}") from None
    except OSError as e:
        if e.errno not in _FULL:
            raise
        raise ToolFailed(f"{tool} {path!r}: the workspace is full ({e.strerror})") from None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
