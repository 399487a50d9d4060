"""MCP tool servers as tools, through the ``mcp`` SDK (the ``agents`` extra): a command the
harness starts and talks to over stdio, or a streamable-HTTP URL.

The server's tool annotations become ``ToolHints`` (untrusted: they can only make a tool more
dangerous); what the spec declares of a tool (permission, data class...) is the trusted part.
A tool result flagged ``isError`` is a failure the agent sees; a server that dies or stops
answering is an ``InfraError``: the task is lost to infrastructure, not failed by the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from evalsi.agents._tools import ToolFailed, ToolHints, ToolSpec
from evalsi.connectors import InfraError
from evalsi.core import JsonValue, UserError, missing_extra

if TYPE_CHECKING:
    from mcp import Client

_PAGE_LIMIT = 100  # pages of tools/list read before giving up (a server that never stops)


def resolve_program(name: str) -> str:
    """The program a spec's command names: ``python`` or ``python3`` is evalsi's own
    interpreter, so a tool server or harness written in Python sees the packages evalsi does
    (whatever ``python`` the PATH would find); anything else is looked up on PATH as usual."""
    return sys.executable if name in ("python", "python3") else name


class McpServer:
    """One MCP server and its tools, open between ``async with`` and its end.

    Args:
        command: argv of a server to start (stdio), or
        url: the server's streamable-HTTP endpoint.
        declared: per tool name, what the harness declares of it (a ``ToolSpec`` whose
            permission, data class, reversibility and exposure replace the defaults).
        env: extra environment variables for a started server.
        timeout_s: how long one request may take before the server counts as gone.
    """

    def __init__(
        self,
        *,
        command: Sequence[str] = (),
        url: str = "",
        declared: Mapping[str, ToolSpec] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        if bool(command) == bool(url):
            raise UserError("an MCP server needs exactly one of command (stdio) or url (HTTP)")
        self.command = list(command)
        self.url = url
        self.declared = dict(declared or {})
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self.tools: list[McpTool] = []
        self._client: Client | None = None
        self._stderr: IO[str] | None = None

    @property
    def where(self) -> str:
        return self.url or " ".join(self.command)

    def stderr_tail(self, limit: int = 600) -> str:
        """The end of a started server's stderr, as a suffix for an error message."""
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        text = self._stderr.read()[-limit:].strip()
        return f"\n  server stderr: {text}" if text else ""

    async def __aenter__(self) -> McpServer:
        try:
            from mcp import Client, StdioServerParameters
            from mcp.client.stdio import stdio_client
        except ModuleNotFoundError as e:
            raise (missing_extra(e, "MCP tools") or e) from None
        target: Any = self.url
        if self.command:
            # The server gets the SDK's minimal environment (PATH, HOME...) plus what the spec
            # gives it, never this process's secrets; its stderr is kept, for the error below.
            self._stderr = tempfile.TemporaryFile(  # noqa: SIM115 - closed in __aexit__
                "w+", encoding="utf-8", errors="replace"
            )
            params = StdioServerParameters(
                command=resolve_program(self.command[0]),
                args=self.command[1:],
                env=self.env or None,
            )
            target = stdio_client(params, errlog=self._stderr)
        client = Client(target, read_timeout_seconds=self.timeout_s)
        try:
            async with asyncio.timeout(self.timeout_s):  # a server silent at the handshake
                await client.__aenter__()
        except Exception as e:  # noqa: BLE001 - whatever stops it, the spec's server is the cause
            stderr = self.stderr_tail()
            await self.__aexit__(None, None, None)
            cause = _root(e)
            why = (
                f"no answer to the handshake within {self.timeout_s:g}s"
                if isinstance(cause, TimeoutError)
                else f"{type(cause).__name__}: {cause}"
            )
            raise UserError(
                f"MCP server {self.where} did not start: {why}{stderr}",
                hint="run the command (or open the URL) by hand to see why",
            ) from None
        self._client = client
        try:
            self.tools = await self._list()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        unknown = sorted(self.declared.keys() - {t.spec.name for t in self.tools})
        if unknown:
            await self.__aexit__(None, None, None)
            raise UserError(
                f"spec.environment.tools: MCP server {self.where} has no tool named "
                f"{', '.join(unknown)}",
                hint=f"it has: {', '.join(sorted(t.spec.name for t in self.tools)) or '(none)'}",
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # a server already gone has nothing to close
                await client.__aexit__(exc_type, exc, tb)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def _list(self) -> list[McpTool]:
        client = self._require()
        tools: list[McpTool] = []
        cursor: str | None = None
        for _ in range(_PAGE_LIMIT):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                a = tool.annotations
                hints = ToolHints(
                    None if a is None else a.read_only_hint,
                    None if a is None else a.destructive_hint,
                )
                spec = ToolSpec(
                    tool.name,
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema or {"type": "object"}),
                    hints=hints,
                    declared=False,
                )
                own = self.declared.get(tool.name)
                if own is not None:
                    spec = replace(
                        own,
                        description=own.description or spec.description,
                        input_schema=spec.input_schema,
                        hints=hints,
                        declared=True,
                    )
                tools.append(McpTool(self, spec))
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise InfraError(
            "malformed_response", f"MCP server {self.where} listed tools past {_PAGE_LIMIT} pages"
        )

    def _require(self) -> Client:
        if self._client is None:
            raise InfraError("connection", f"MCP server {self.where} is not connected")
        return self._client


class McpTool:
    """One tool of an ``McpServer``."""

    def __init__(self, server: McpServer, spec: ToolSpec) -> None:
        self.server = server
        self.spec = spec

    async def call(self, arguments: Mapping[str, Any]) -> JsonValue:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        client = self.server._require()
        try:
            result = await client.call_tool(self.spec.name, dict(arguments))
        except MCPError as e:
            if e.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                raise InfraError(
                    "connection", f"MCP server {self.server.where}: {e.message}"
                ) from e
            raise ToolFailed(f"{self.spec.name}: {e.message}") from None
        except (OSError, EOFError) as e:
            raise InfraError("connection", f"MCP server {self.server.where}: {e}") from e
        content = _content(result.content)
        if result.is_error:
            raise ToolFailed(content if isinstance(content, str) else str(content))
        if result.structured_content is not None:
            return result.structured_content
        return content


def _root(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups: the SDK's task groups wrap it."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _content(blocks: Sequence[Any]) -> JsonValue:
    """Text blocks joined; other blocks (images, resources) by their type and mime type."""
    texts = [b.text for b in blocks if getattr(b, "type", "") == "text"]
    others = [
        {"type": b.type, **({"mime_type": b.mime_type} if getattr(b, "mime_type", None) else {})}
        for b in blocks
        if getattr(b, "type", "") != "text"
    ]
    if not others:
        return "\n".join(texts)
    return {"text": "\n".join(texts), "blocks": others}
