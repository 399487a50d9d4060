"""A command-line agent (``spec.target.agent.cli``) run in the task's sandbox, on its workspace.

The agent is a program, so its trajectory is what evalsi can see from outside: its exit, its
output (the tail, capped), the commands it reports in ``commandsFile`` (one JSON object a line,
``{"command", "exit_code"}``; its own word, recorded as ``shell`` tool calls) and, when the
workspace is a repository, the ``git diff`` it left, taken before any checker touches the
workspace. The task's input is in ``.evalsi/task.md`` and ``EVALSI_TASK``.

One run of the agent is one cassette exchange (channel ``cli``): the request names the command,
the input and the workspace it started from (commit and fixtures); the answer holds everything
above. A replay re-applies the recorded diff to the fresh checkout instead of running the
agent, so the checkers grade the same workspace and the agent never runs.

An agent failing is graded: a non-zero exit (or a confinement's denial, or a resource limit) is
``stop_reason: error``, running out of time is ``timeout``. A sandbox that broke loses the task
(``InfraError("sandbox")``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import orjson

from evalsi.agents._cassette import exchange
from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._git_workspace import current_checkout, resolve_revision
from evalsi.agents._harness import CheckResult, Final, HarnessInfo, TaskSetup
from evalsi.agents._workspace import current_sandbox
from evalsi.connectors import InfraError
from evalsi.core import Content, JsonValue, Step, ToolCall, UserError, request_key
from evalsi.sandbox import SandboxFileError
from evalsi.specs import CliAgentSpec

OUTPUT_CHARS = 16 * 1024
"""The tail of stdout and of stderr kept in the trajectory (the sandbox caps each at 1 MiB)."""
COMMANDS_BYTES = 1 << 20
"""The commands file read; a bigger one is cut (noted)."""
MAX_COMMANDS = 1000
"""Reported commands kept; more are counted in a note."""
COMMAND_CHARS = 2000
TASK_FILE = ".evalsi/task.md"


@contextlib.asynccontextmanager
async def connect(section: CliAgentSpec, context: ConnectorContext) -> AsyncIterator[CliHarness]:
    """The harness; a workspace-less environment or a repository naming no commit is refused
    before the first task."""
    env = context.environment_spec
    if not env.has_workspace():
        raise UserError(
            f"{context.where}: a cli agent runs in the task's sandbox; the environment has none",
            hint="give spec.environment a repository, a sandbox, fixtures or a checker",
        )
    if env.repository is not None:
        resolve_revision(env.repository.path, env.repository.commit, "spec.environment.repository")
    yield CliHarness(section)


class CliHarness:
    """Runs ``section.command`` once per task in the task's sandbox."""

    restores_workspace = True  # a replay re-applies the recorded diff: checkers run live

    def __init__(self, section: CliAgentSpec) -> None:
        self.section = section
        self._tasks: dict[str, TaskSetup] = {}
        self._ends: dict[str, dict[str, JsonValue]] = {}
        self._names = itertools.count()

    async def describe(self) -> HarnessInfo:
        return HarnessInfo("evalsi-cli", tools=())

    async def setup(self, task: TaskSetup) -> str:
        session = f"{task.task_id}/{task.trial}/{next(self._names)}"
        self._tasks[session] = task
        return session

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        task = self._tasks[session]
        text = task.input.as_text()
        checkout = current_checkout()
        request: dict[str, JsonValue] = {
            "command": list(self.section.command),
            "input": text,
            "workspace": {
                "commit": checkout.revision.sha if checkout is not None else None,
                "fixtures": request_key(dict(task.fixtures)) if task.fixtures else None,
            },
        }
        ran = False

        async def live() -> JsonValue:
            nonlocal ran
            ran = True
            return await self._execute(text)

        answer: dict[str, Any] = await exchange("cli", request, live)
        diff = answer.get("diff")
        if not ran and checkout is not None and diff:
            if answer.get("diff_truncated"):
                raise InfraError(
                    "cassette", "replay: the recorded diff was cut; it cannot be re-applied"
                )
            await asyncio.to_thread(checkout.apply, diff)
        for step in _steps(self.section, answer):
            yield step
        self._ends[session] = {
            k: answer.get(k) for k in ("exit", "exit_code", "diff", "diff_truncated")
            if answer.get(k) is not None
        }  # fmt: skip
        output = diff if checkout is not None else answer.get("stdout", "")
        yield Final(Content.of_text(str(output or "")), stop_reason=_stop_reason(answer))

    async def _execute(self, text: str) -> dict[str, JsonValue]:
        sandbox = current_sandbox()
        s = self.section
        try:
            await sandbox.copy_in(text.encode(), TASK_FILE)
        except (OSError, SandboxFileError) as e:
            raise InfraError("sandbox", f"cli: cannot write {TASK_FILE}: {e}") from None
        env = {**s.env, "EVALSI_TASK": text, "EVALSI_COMMANDS_FILE": s.commands_file}
        result = await sandbox.exec(list(s.command), timeout=s.timeout_s, env=env)
        outcome = result.outcome
        if outcome.is_infra:
            raise InfraError("sandbox", f"cli: the sandbox failed: {outcome.detail}")
        answer: dict[str, JsonValue] = {
            "exit": outcome.kind,
            "exit_code": outcome.code,
            "detail": outcome.detail,
            "duration_ms": round(result.duration_ms, 1),
            "stdout": _tail(result.stdout, result.stdout_truncated),
            "stderr": _tail(result.stderr, result.stderr_truncated),
        }
        commands, notes = await _commands(s.commands_file)
        answer["commands"] = commands
        answer["notes"] = notes
        checkout = current_checkout()
        if checkout is not None:
            try:
                diff, cut = await asyncio.to_thread(checkout.diff)
            except Exception as e:  # noqa: BLE001 - git on the host failed: not the agent
                raise InfraError("sandbox", f"workspace: git diff failed: {e}") from None
            answer["diff"] = diff
            answer["diff_truncated"] = cut
        return answer

    async def check(self, session: str) -> CheckResult:
        return CheckResult(end_state=self._ends.get(session) or None)

    async def teardown(self, session: str) -> None:
        self._tasks.pop(session, None)
        self._ends.pop(session, None)


def _tail(data: bytes, truncated: bool) -> str:
    text = data.decode(errors="replace")
    if len(text) > OUTPUT_CHARS:
        return "…" + text[-OUTPUT_CHARS:]
    return text + ("\n[output cut by the sandbox]" if truncated else "")


async def _commands(path: str) -> tuple[list[JsonValue], list[JsonValue]]:
    """The commands the agent reported, and notes on what was skipped."""
    sandbox = current_sandbox()
    try:
        data = await sandbox.copy_out(path, max_bytes=COMMANDS_BYTES)
    except SandboxFileError as e:
        if "does not exist" in str(e):
            return [], []
        return [], [f"{path}: not read: {e}"]
    except OSError as e:
        return [], [f"{path}: not read: {e}"]
    return parse_commands(data, path)


def parse_commands(data: bytes, path: str) -> tuple[list[JsonValue], list[JsonValue]]:
    """The ``{command, exit_code}`` lines of a commands file (at most ``MAX_COMMANDS``, each
    command cut to ``COMMAND_CHARS``), and notes on the lines skipped."""
    commands: list[JsonValue] = []
    notes: list[JsonValue] = []
    skipped = 0
    lines = data.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        entry = _command(line)
        if entry is None:
            skipped += 1
            if skipped <= 5:
                notes.append(f"{path}:{number}: skipped (expected {{command, exit_code}})")
            continue
        if len(commands) >= MAX_COMMANDS:
            notes.append(f"{path}: only the first {MAX_COMMANDS} commands are kept")
            break
        commands.append(entry)
    if skipped > 5:
        notes.append(f"{path}: {skipped} malformed lines skipped in all")
    return commands, notes


def _command(line: bytes) -> dict[str, JsonValue] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("command"), str):
        return None
    code = value.get("exit_code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        return None
    return {"command": value["command"][:COMMAND_CHARS], "exit_code": code}


def _steps(section: CliAgentSpec, answer: dict[str, Any]) -> list[Step]:
    steps = [
        Step(
            "agent",
            "cli",
            input={"command": list(section.command)},
            output={
                k: answer.get(k) for k in ("exit", "exit_code", "detail", "duration_ms")
                if answer.get(k) not in (None, "")
            },
            error="" if _stop_reason(answer) == "final_answer" else _describe(answer),
        )
    ]  # fmt: skip
    for entry in answer.get("commands") or ():
        code = entry.get("exit_code")
        steps.append(
            Step(
                "tool_call",
                "shell",
                input={"command": entry["command"]},
                output={"exit_code": code},
                tool_call=ToolCall("shell", {"command": entry["command"]}),
                error=f"exit {code}" if code not in (None, 0) else "",
            )
        )
    for stream in ("stdout", "stderr"):
        if answer.get(stream):
            steps.append(Step("other", stream, output=answer[stream]))
    for note in answer.get("notes") or ():
        steps.append(Step("other", "note", output=note))
    if answer.get("diff") is not None:
        out: dict[str, JsonValue] = {"diff": answer["diff"]}
        if answer.get("diff_truncated"):
            out["truncated"] = True
        steps.append(Step("other", "git_diff", output=out))
    return steps


def _stop_reason(answer: dict[str, Any]) -> str:
    if answer.get("exit") == "timeout":
        return "timeout"
    if answer.get("exit") == "exit" and answer.get("exit_code") == 0:
        return "final_answer"
    return "error"


def _describe(answer: dict[str, Any]) -> str:
    if answer.get("exit") == "exit":
        return f"exit {answer.get('exit_code')}"
    detail = answer.get("detail") or ""
    return f"{answer.get('exit')}: {detail}" if detail else str(answer.get("exit"))
