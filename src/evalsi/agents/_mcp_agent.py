"""An agent behind an MCP server (``spec.target.agent.mcp``), through the ``mcp`` SDK: one of
its tools is the agent (called with ``{inputArgument: the task's input, **arguments}``), or one
of its prompts (fetched with the same arguments; its messages are the transcript).

Each task talks to a fresh connection (for a ``command``, a fresh server process, started in
the spec's directory): the server's progress notifications and log messages then belong to that
task alone and become its steps, and no state leaks from one sample into the next. The tool
call itself is a ``tool_call`` step. A result flagged ``isError`` is the agent failing
(``stop_reason`` ``error``, graded); a server that will not start, dies or stops answering is
infrastructure (``InfraError``).

The server is reached once when the run starts (unless it replays), so a tool or prompt it does
not have stops the run there, naming ``spec.target.agent.mcp.tool`` (or ``.prompt``). Each task's
call goes through the cassette (channel ``mcp``): the answer and the notifications that came
with it are recorded together, and a replay needs no server at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import tempfile
from collections.abc import AsyncIterator
from typing import IO, TYPE_CHECKING, Any

import orjson

from evalsi.agents._cassette import exchange
from evalsi.agents._harness import CheckResult, Final, HarnessInfo, TaskSetup
from evalsi.agents._mcp import resolve_program
from evalsi.connectors import InfraError
from evalsi.core import Content, JsonValue, Step, ToolCall, UserError, missing_extra
from evalsi.specs import McpAgentSpec

if TYPE_CHECKING:
    from mcp import Client

    from evalsi.agents._connectors import ConnectorContext

DEFAULT_SECONDS = 1800.0
"""One call's limit without ``maxDuration`` (as for any harness)."""

START_SECONDS = 30.0
"""How long a server may take to answer the handshake."""

MAX_NOTIFICATIONS = 1000
"""Progress notifications and log messages kept per call (the rest are counted, not kept)."""

MAX_TEXT = 16_000
"""Characters of text a step keeps."""

MAX_OUTPUT = 1_000_000
"""Characters of the answer kept."""

_PAGES = 100  # pages of tools/list or prompts/list read before giving up


@contextlib.asynccontextmanager
async def connect(
    section: McpAgentSpec, context: ConnectorContext
) -> AsyncIterator[McpAgentHarness]:
    """The MCP agent ``section`` names, checked once (unless the run replays)."""
    try:
        import mcp  # noqa: F401
    except ModuleNotFoundError as e:
        raise (missing_extra(e, "MCP agents") or e) from None
    if section.url and context.egress is not None:
        from evalsi.agents._egress import check_resolved

        await check_resolved(context.egress, section.url, f"{context.where}.url")
    harness = McpAgentHarness(section, context)
    if not context.replaying:
        await harness.probe()
    yield harness


class McpAgentHarness:
    """Calls one MCP server's tool (or prompt) with each task's input (see the module)."""

    def __init__(self, section: McpAgentSpec, context: ConnectorContext) -> None:
        self.section = section
        self.context = context
        self.where = context.where
        self.seconds = context.agent.max_seconds or DEFAULT_SECONDS
        self.server = section.url or " ".join(section.command)
        self.name = section.tool or section.prompt
        self._tasks: dict[str, TaskSetup] = {}
        self._names = itertools.count()

    async def probe(self) -> None:
        """Reach the server and find the tool or prompt: what is wrong here is the spec's."""
        field = "tool" if self.section.tool else "prompt"
        try:
            async with self._client(logs=None) as client:
                names = await (self._tools(client) if field == "tool" else self._prompts(client))
        except InfraError as e:
            raise UserError(
                f"{self.where}: MCP server {self.server} did not start: {e.message}",
                hint="run the command (or open the URL) by hand to see why",
            ) from None
        if self.name not in names:
            raise UserError(
                f"{self.where}.{field}: MCP server {self.server} has no {field} named "
                f"{self.name!r}",
                hint=f"it has: {', '.join(sorted(names)) or '(none)'}",
            )

    async def describe(self) -> HarnessInfo:
        return HarnessInfo(f"mcp:{self.name}")

    async def setup(self, task: TaskSetup) -> str:
        session = f"{task.task_id}/{task.trial}/{next(self._names)}"
        self._tasks[session] = task
        return session

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        task = self._tasks[session]
        s = self.section
        arguments: dict[str, JsonValue] = {**s.arguments, s.input_argument: task.input.as_text()}
        method = "tools/call" if s.tool else "prompts/get"
        request: dict[str, JsonValue] = {
            "method": method,
            "server": self.server,
            "name": self.name,
            "arguments": arguments,
        }
        try:
            async with asyncio.timeout(self.seconds):
                answer = await exchange("mcp", request, lambda: self._call(method, arguments))
        except TimeoutError:
            yield Final(Content.of_text(""), stop_reason="timeout")
            return
        if not isinstance(answer, dict):
            raise InfraError("malformed_response", f"MCP server {self.server}: not an object")
        for note in answer.get("notifications") or ():
            yield _note_step(note)
        if method == "tools/call":
            for event in _tool_events(self.name, arguments, answer.get("result")):
                yield event
        else:
            for event in _prompt_events(answer.get("result")):
                yield event

    async def check(self, session: str) -> CheckResult:
        return CheckResult()

    async def teardown(self, session: str) -> None:
        self._tasks.pop(session, None)

    # -- the connection ------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _client(self, logs: list[JsonValue] | None) -> AsyncIterator[Client]:
        """A fresh connection; whatever stops it is an ``InfraError`` naming the cause."""
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        from evalsi.agents._mcp import _root

        stderr: IO[str] | None = None
        target: Any = self.section.url
        if self.section.command:
            stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            params = StdioServerParameters(
                command=resolve_program(self.section.command[0]),
                args=list(self.section.command[1:]),
                env=dict(self.section.env) or None,
                cwd=self.section.cwd or None,
            )
            target = stdio_client(params, errlog=stderr)

        async def log(params: Any) -> None:
            if logs is None:
                return
            if len(logs) < MAX_NOTIFICATIONS:
                logs.append({"log": params.level, "data": _json(params.data)})

        client = Client(
            target,
            read_timeout_seconds=self.seconds,
            logging_callback=log,
            log_level="debug",
        )
        try:
            try:
                async with asyncio.timeout(START_SECONDS):
                    await client.__aenter__()
            except Exception as e:  # noqa: BLE001 - whatever stops it, the server is the cause
                cause = _root(e)
                why = (
                    f"no answer to the handshake within {START_SECONDS:g}s"
                    if isinstance(cause, TimeoutError)
                    else f"{type(cause).__name__}: {cause}"
                )
                raise InfraError("connection", f"{why}{_tail(stderr)}") from None
            try:
                yield client
            finally:
                with contextlib.suppress(Exception):  # a server already gone has nothing to close
                    await client.__aexit__(None, None, None)
        finally:
            if stderr is not None:
                stderr.close()

    async def _tools(self, client: Client) -> set[str]:
        names: set[str] = set()
        cursor: str | None = None
        for _ in range(_PAGES):
            page = await client.list_tools(cursor=cursor)
            names.update(t.name for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return names

    async def _prompts(self, client: Client) -> set[str]:
        names: set[str] = set()
        cursor: str | None = None
        for _ in range(_PAGES):
            page = await client.list_prompts(cursor=cursor)
            names.update(p.name for p in page.prompts)
            cursor = page.next_cursor
            if not cursor:
                break
        return names

    async def _call(self, method: str, arguments: dict[str, JsonValue]) -> dict[str, JsonValue]:
        """The call, live: its result and the notifications that came with it, as JSON."""
        from mcp.shared.exceptions import MCPError

        notes: list[JsonValue] = []

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if len(notes) < MAX_NOTIFICATIONS:
                notes.append({"progress": progress, "total": total, "message": message})

        try:
            async with self._client(notes) as client:
                if method == "tools/call":
                    result: Any = await client.call_tool(
                        self.name, dict(arguments), progress_callback=progress
                    )
                else:
                    strings = {
                        k: v if isinstance(v, str) else _dumps(v) for k, v in arguments.items()
                    }
                    result = await client.get_prompt(self.name, strings)
        except InfraError as e:
            raise InfraError(e.kind, f"MCP server {self.server}: {e.message}") from None
        except MCPError as e:
            raise InfraError("connection", f"MCP server {self.server}: {e.message}") from None
        except (OSError, EOFError) as e:
            raise InfraError("connection", f"MCP server {self.server}: {e}") from None
        except Exception as e:  # noqa: BLE001 - a broken answer, a dead stream
            from evalsi.agents._mcp import _root

            cause = _root(e)
            raise InfraError(
                "connection", f"MCP server {self.server}: {type(cause).__name__}: {cause}"
            ) from None
        value = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        value.pop("_meta", None)
        return {"result": value, "notifications": notes}


def _tool_events(name: str, arguments: dict[str, JsonValue], result: Any) -> list[Step | Final]:
    if not isinstance(result, dict):
        raise InfraError("malformed_response", f"MCP tool {name}: no result")
    text = _blocks_text(result.get("content") or ())
    structured = result.get("structuredContent")
    if not text and structured is not None:
        text = _dumps(structured)
    failed = bool(result.get("isError"))
    step = Step(
        kind="tool_call",
        name=name,
        input=arguments,
        output=_cut(text),
        tool_call=ToolCall(name, arguments),
        error=_cut(text) if failed else "",
    )
    final = Final(
        Content.of_text(text[:MAX_OUTPUT]), stop_reason="error" if failed else "final_answer"
    )
    return [step, final]


def _prompt_events(result: Any) -> list[Step | Final]:
    if not isinstance(result, dict):
        raise InfraError("malformed_response", "MCP prompt: no result")
    steps: list[Step | Final] = []
    texts: list[tuple[str, str]] = []
    for message in result.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = str(message.get("role") or "")
        text = _blocks_text([message.get("content")])
        texts.append((role, text))
        steps.append(Step(kind="message", name=role, output=_cut(text)))
    said = [t for role, t in texts if role == "assistant"]
    answer = said[-1] if said else "\n".join(t for _, t in texts)
    steps.append(Final(Content.of_text(answer[:MAX_OUTPUT])))
    return steps


def _note_step(note: Any) -> Step:
    if not isinstance(note, dict):
        raise InfraError("malformed_response", "MCP notification not an object")
    if "log" in note:
        return Step(
            kind="other", name="log", output={"level": note["log"], "data": note.get("data")}
        )
    return Step(kind="other", name="progress", output=dict(note))


def _blocks_text(blocks: Any) -> str:
    """Text blocks joined; other blocks (images, resources) by their type."""
    out: list[str] = []
    for b in blocks if isinstance(blocks, list | tuple) else ():
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            out.append(str(b.get("text", "")))
        else:
            out.append(
                f"[{b.get('type', 'block')}{' ' + b['mimeType'] if b.get('mimeType') else ''}]"
            )
    return "\n".join(out)


def _json(value: Any) -> JsonValue:
    """A log message's data as bounded JSON."""
    try:
        text = _dumps(value)
    except TypeError:
        return _cut(repr(value))
    return value if len(text) <= MAX_TEXT else _cut(text)


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}… [{len(text) - MAX_TEXT} more characters]"


def _tail(stderr: IO[str] | None, limit: int = 600) -> str:
    if stderr is None:
        return ""
    stderr.flush()
    stderr.seek(0)
    text = stderr.read()[-limit:].strip()
    return f"\n  server stderr: {text}" if text else ""
