"""MCP server mode: evalsi's API as MCP tools and resources, over stdio (``evalsi mcp``) and at
``/mcp`` on ``evalsi serve`` (streamable HTTP), through the ``mcp`` SDK's low-level server.

Each tool is one RPC. Its input is the JSON form of the RPC's request message (proto3 JSON,
unknown fields refused) and its input schema is generated from the proto by the same builder
as the OpenAPI document (``protocol.message_schema``): one schema, every surface. A tool is
answered by the handler object gRPC, Connect and REST call — on the server the guarded one,
so each call is authenticated and authorized as any other request — and returns the response
message's JSON, as structured content and as text. A handler's refusal (bad input, not found,
permission denied) is a tool error naming the field, never a protocol error or a traceback.

``start_run`` waits for the run to end: while it runs the client gets progress notifications
(tasks done of total) when it asked for them, and cancelling the request cancels the run.
A run's Markdown report is a resource, ``evalsi://runs/{id}/report.md``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import orjson
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import Headers, RequestContext
from google.protobuf import descriptor_pool, json_format

from evalsi import __version__
from evalsi.core import UserError
from evalsi.server._errors import to_connect_error
from evalsi.server.protocol import handler_attr, message_schema, message_to_dict, parse_dict

log = logging.getLogger("evalsi.server.mcp")

SERVER_NAME = "evalsi"
REPORT_URI = "evalsi://runs/{id}/report.md"
PROJECT_REPORT_URI = "evalsi://projects/{project}/runs/{id}/report.md"
_REPORT = re.compile(r"^evalsi://runs/(?P<id>[^/\s]{1,200})/report\.md$")
_PROJECT_REPORT = re.compile(
    r"^evalsi://projects/(?P<project>[A-Za-z0-9][A-Za-z0-9._-]{0,63})/runs/(?P<id>[^/\s]{1,200})"
    r"/report\.md$"
)
_RESOURCE_ERROR = -32002  # MCP's "resource not found"; the message says why (API code first)
_V1 = "evalsi.v1alpha1."
WATCH_EVERY_S = 0.5  # how often a waiting start_run looks at its run when no update came


@dataclass(frozen=True)
class McpTool:
    """One tool: the RPC it calls and what an agent is told of it."""

    name: str
    rpc: str  # Service/Method, under evalsi.v1alpha1
    description: str
    read_only: bool = True
    destructive: bool = False

    @property
    def service(self) -> str:
        return _V1 + self.rpc.split("/")[0]

    @property
    def method(self) -> Any:
        return _method(self.rpc)


def _method(rpc: str) -> Any:
    """The descriptor of ``Service/Method`` (its generated module imported first)."""
    service, method = rpc.split("/")
    importlib.import_module(f"evalsi._proto.evalsi.v1alpha1.{handler_attr(service)}_pb2")
    return descriptor_pool.Default().FindServiceByName(_V1 + service).methods_by_name[method]


TOOLS: tuple[McpTool, ...] = (
    McpTool(
        "list_evaluators",
        "CatalogService/ListEvaluators",
        "List the evaluators this evalsi can run (name, description, params schema, outputs). "
        "Use a name in `evaluate` or in a run spec's `evaluators`.",
    ),
    McpTool(
        "evaluate",
        "EvaluationService/Evaluate",
        "Grade records you already have with evaluators; stores a Score run and returns its "
        "metrics with 95% intervals and gate verdicts. Each record needs an `id`; its `input`, "
        '`output` and `reference` are Content objects, e.g. {"id": "1", "output": '
        '{"text": "Paris"}, "reference": {"text": "Paris"}}; evaluators are '
        '{"ref": NAME}. The input is the JSON form of EvaluateRequest (POST '
        "/v1alpha1/evaluate).",
        read_only=False,
    ),
    McpTool(
        "start_run",
        "RunService/CreateRun",
        "Run an EvalRun spec (`run`: the spec as JSON, apiVersion evals.si/v1alpha1, kind "
        "EvalRun) and wait for it to end: a target is called on every dataset row and graded. "
        "Sends progress notifications while it runs; cancelling the request cancels the run. "
        "Returns the finished run (status, metrics with intervals, gates, exitCode). With "
        "`dryRun` it only checks the spec.",
        read_only=False,
    ),
    McpTool(
        "get_run",
        "RunService/GetRun",
        "One run's status, metrics with intervals, gates and progress (`id`: a run id, a "
        "unique prefix, or `latest`).",
    ),
    McpTool(
        "list_runs",
        "RunService/ListRuns",
        "The project's runs, newest first.",
    ),
    McpTool(
        "compare_runs",
        "RunService/CompareRuns",
        "Compare a candidate run with a baseline run on the same samples: per metric the "
        "paired difference (candidate - baseline) with its interval and p-value, and a verdict "
        "(improved, regressed or no significant difference).",
    ),
    McpTool(
        "list_traces",
        "TraceService/ListTraces",
        "Query the traces evalsi received over OpenTelemetry (filters by time, service, "
        "status, score), newest first, with their online scores.",
    ),
    McpTool(
        "promote",
        "PromotionService/Promote",
        "Append a run's failing tasks, or the project's flagged traces, to a dataset as rows "
        "with provenance, so they become regression tests.",
        read_only=False,
    ),
)


def tool_schemas() -> dict[str, dict[str, Any]]:
    """Each tool's input schema, by name: its request message's, from the proto."""
    return {t.name: message_schema(t.method.input_type) for t in TOOLS}


Authenticate = Callable[[Any], Awaitable[None]]
"""Called with the MCP request's HTTP request before each call (None over stdio): binds the
caller for the guarded handlers, or raises ``Unauthenticated``."""


class McpTools:
    """The tools and resources over ``handlers`` (service name → handler object)."""

    def __init__(
        self,
        handlers: Mapping[str, Any],
        render_report: Callable[[str], Awaitable[str]],
        *,
        authenticate: Authenticate | None = None,
    ) -> None:
        self.handlers = handlers
        self.render_report = render_report  # a run id (already authorized) → Markdown
        self.authenticate = authenticate
        self._schemas = tool_schemas()
        self._tools = {t.name: t for t in TOOLS}

    def server(self) -> Any:
        """The ``mcp`` low-level server answering them."""
        from mcp.server.lowlevel import Server

        return Server(
            SERVER_NAME,
            version=__version__,
            instructions=(
                "evalsi evaluates LLM apps and agents. `list_evaluators` shows what can grade; "
                "`evaluate` grades records you have; `start_run` runs an EvalRun spec and "
                "waits; `compare_runs` tells whether a change made things better or worse."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
        )

    # -- tools ------------------------------------------------------------------------------
    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=self._schemas[t.name],
                    annotations=types.ToolAnnotations(
                        read_only_hint=t.read_only,
                        destructive_hint=t.destructive,
                        open_world_hint=t.name == "start_run",  # it calls the spec's target
                    ),
                )
                for t in TOOLS
            ]
        )

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self._tools.get(params.name)
        if tool is None:
            known = ", ".join(self._tools)
            return _error(f"no tool named {params.name!r}; the tools are: {known}")
        try:
            await self._bind(ctx)
            request = _request(tool, params.arguments)
            if tool.name == "start_run":
                answer = await self._start_run(ctx, request)
            else:
                answer = await self._call(tool.service, tool.method, request, ctx)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - every refusal is a tool error, worded once
            return _error(_describe(e))
        doc = message_to_dict(answer, defaults=True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=orjson.dumps(doc).decode())],
            structured_content=doc,
        )

    async def _bind(self, ctx: Any) -> None:
        if self.authenticate is not None:
            await self.authenticate(getattr(ctx, "request", None))

    async def _call(self, service: str, method: Any, request: Any, ctx: Any) -> Any:
        function = getattr(self.handlers[service], handler_attr(method.name))
        return await function(request, _rpc_context(method, ctx))

    async def _start_run(self, ctx: Any, request: Any) -> Any:
        """CreateRun, then wait for the end with progress; a cancelled call cancels the run."""
        created = await self._call(
            _V1 + "RunService", _method("RunService/CreateRun"), request, ctx
        )
        if request.dry_run:
            return created
        from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb

        ref = {"id": created.run.id, "project_id": request.project_id}
        token = _progress_token(ctx)
        try:
            while True:
                got = await self._call(
                    _V1 + "RunService", _method("RunService/GetRun"), pb.GetRunRequest(**ref), ctx
                )
                run = got.run
                if run.status not in ("queued", "running"):
                    return got
                if token is not None:
                    done, total = run.progress.tasks_done, run.progress.tasks_total
                    await ctx.session.send_progress_notification(
                        token,
                        float(done),
                        float(total) if total else None,
                        f"run {run.id}: {done} of {total or '?'} tasks",
                        related_request_id=ctx.request_id,
                    )
                await asyncio.sleep(WATCH_EVERY_S)
        except asyncio.CancelledError:
            # The client gave up on the call: the run must not go on spending for nobody.
            await asyncio.shield(self._cancel(ref, ctx))
            raise
        except Exception as e:  # noqa: BLE001 - the run started but cannot be followed
            stopped = await asyncio.shield(self._cancel(ref, ctx))
            raise UserError(
                f"run {ref['id']} started, but this call cannot follow it ({_describe(e)}); "
                + ("it was cancelled" if stopped else "it is still running: cancel it with "
                   "RunService.CancelRun")
            ) from None  # fmt: skip

    async def _cancel(self, ref: Mapping[str, str], ctx: Any) -> bool:
        """Cancel the run ``ref`` names; whether that was done (the caller may lack the right)."""
        from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb

        try:
            await self._call(
                _V1 + "RunService", _method("RunService/CancelRun"), pb.CancelRunRequest(**ref), ctx
            )
        except Exception as e:  # noqa: BLE001
            log.warning("run %s: not cancelled after its start_run call ended: %s", ref["id"], e)
            return False
        return True

    # -- resources --------------------------------------------------------------------------
    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    async def _list_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name="run-report",
                    uri_template=REPORT_URI,
                    description="A run's report in Markdown: metrics with intervals, gates, "
                    "slices, failures (`id`: a run id, a unique prefix, or `latest`; the "
                    "project `default`).",
                    mime_type="text/markdown",
                ),
                types.ResourceTemplate(
                    name="project-run-report",
                    uri_template=PROJECT_REPORT_URI,
                    description="A run's report in Markdown, for a run of another project.",
                    mime_type="text/markdown",
                ),
            ]
        )

    async def _read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        from mcp.shared.exceptions import MCPError

        from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb

        uri = str(params.uri)
        found = _REPORT.match(uri) or _PROJECT_REPORT.match(uri)
        if found is None:
            raise MCPError(types.INVALID_PARAMS, f"no resource {uri!r}; reports are {REPORT_URI}")
        try:
            await self._bind(ctx)
            # GetRun first: the caller must be allowed to read the run, and a prefix resolves.
            got = await self._call(
                _V1 + "RunService",
                _method("RunService/GetRun"),
                pb.GetRunRequest(id=found["id"], project_id=found.groupdict().get("project") or ""),
                ctx,
            )
            text = await self.render_report(got.run.id)
        except Exception as e:  # noqa: BLE001 - worded as the tools word them, never raw
            raise MCPError(_RESOURCE_ERROR, _describe(e)) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)]
        )


def _request(tool: McpTool, arguments: Mapping[str, Any] | None) -> Any:
    """The tool's request message from its arguments (proto3 JSON), or a ``UserError``."""
    cls = _message_class(tool.method.input_type)
    try:
        return parse_dict(dict(arguments or {}), cls)
    except (json_format.ParseError, ValueError, TypeError) as e:
        raise UserError(f"{tool.name}: the arguments are not a valid {cls.__name__}: {e}") from None


def _message_class(descriptor: Any) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


def _rpc_context(method: Any, ctx: Any) -> Any:
    """What a handler is called with, as REST builds it: the MCP request's HTTP headers."""
    request = getattr(ctx, "request", None)
    headers = Headers()
    client = None
    if request is not None and hasattr(request, "headers"):
        for key, value in request.headers.items():
            headers.add(key, value)
        if request.client is not None:
            client = f"{request.client.host}:{request.client.port}"
    info: MethodInfo[Any, Any] = MethodInfo(
        name=method.name,
        service_name=method.containing_service.full_name,
        input=_message_class(method.input_type),
        output=_message_class(method.output_type),
        idempotency_level=IdempotencyLevel.UNKNOWN,
        stream_type=StreamType.UNARY,
    )
    return RequestContext(
        method=info, http_method="POST", request_headers=headers, client_address=client
    )


def _progress_token(ctx: Any) -> str | int | None:
    meta = getattr(ctx, "meta", None)
    if not isinstance(meta, Mapping):
        return None
    token = meta.get("progress_token", meta.get("progressToken"))
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


def _describe(exc: Exception) -> str:
    err = to_connect_error(exc)  # logs what was not expected
    return f"{err.code.value}: {err.message}"


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


__all__ = ["PROJECT_REPORT_URI", "REPORT_URI", "TOOLS", "McpTool", "McpTools", "tool_schemas"]
