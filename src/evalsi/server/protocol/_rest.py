"""The REST gateway: the ``google.api.http`` routes of the protos, on the same handlers.

Routes are read from the service descriptors at runtime, so a new annotated RPC gets its REST
route (and its OpenAPI entry, ``_openapi``) without code here. Per request:

* path variables (``/v1alpha1/runs/{id}``, ``/v1alpha1/runs/{id}:cancel``) are matched on the
  raw path, one segment each, so ``%2F`` inside a value stays inside it;
* a GET reads the other fields from the query string (``?pageSize=5&status=done``; snake_case
  works too, repeated fields repeat the key); a ``body: "*"`` method reads a JSON object;
* the JSON is proto3 JSON, parsed with ``json_format`` and unknown fields refused (400 naming
  them), then the handler method the RPC protocols call is awaited with it;
* the answer is proto3 JSON in camelCase **with default values included** (``"passed":
  false``, ``"records": "0"``), friendlier to curl and jq than Connect's omitted defaults; a
  server stream (WatchRun) is newline-delimited JSON, one message per line, and an error after
  the first line arrives as a last line ``{"error": {...}}``;
* errors are ``{"code": "invalid_argument", "message": ..., "details": []}`` with the status
  ``_errors.http_status`` gives (400, 404, 409, 413, 503; 500 only for our own faults).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

import orjson
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import Headers, RequestContext
from google.api import annotations_pb2  # type: ignore[import-untyped]
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

from evalsi.core import UserError
from evalsi.server._errors import OversizeError, aclose, error_body, http_status, to_connect_error
from evalsi.server._metrics import Metrics
from evalsi.server.protocol._json_codec import message_to_dict, parse_dict

JSON = "application/json"
NDJSON = "application/x-ndjson"
VERBS = ("get", "put", "post", "delete", "patch")
# Query values of these well-known types are parsed from their JSON string form.
_STRING_WKT = frozenset(
    {"google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask"}
)
_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


@dataclass(frozen=True)
class PathVar:
    field: str  # dotted proto field path, e.g. "id"
    group: str  # regex group name


@dataclass(frozen=True)
class RestMethod:
    """One RPC's REST binding, from its ``google.api.http`` option."""

    service: str
    method: Any  # MethodDescriptor
    verb: str  # upper case
    template: str  # as written in the proto: /v1alpha1/runs/{id}:cancel
    openapi_path: str  # /v1alpha1/runs/{id}:cancel (variables reduced to {field})
    body: str  # "", "*" or a field name
    regex: re.Pattern[str]
    path_vars: tuple[PathVar, ...]
    input_cls: Any
    output_cls: Any
    attr: str  # the handler method: snake_case of the RPC name
    server_streaming: bool

    @property
    def name(self) -> str:
        return str(self.method.name)


def handler_attr(method_name: str) -> str:
    """The handler method protoc-gen-connectrpc names for an RPC (``GetRun`` → ``get_run``)."""
    return _SNAKE.sub("_", method_name).lower()


def http_rules(services: Iterable[str], pool: Any = None) -> list[RestMethod]:
    """Every REST binding of the named services, most specific first (custom verbs first,
    so ``/runs/{id}:watch`` is not taken for ``/runs/{id}``)."""
    pool = pool if pool is not None else descriptor_pool.Default()
    out: list[RestMethod] = []
    for service_name in services:
        service = pool.FindServiceByName(service_name)
        for method in service.methods:
            options = method.GetOptions()
            if not options.HasExtension(annotations_pb2.http):
                continue
            rule = options.Extensions[annotations_pb2.http]
            bindings = [rule, *rule.additional_bindings]
            for binding in bindings:
                verb = binding.WhichOneof("pattern")
                if verb not in VERBS:
                    continue
                out.append(_bind(service_name, method, verb, getattr(binding, verb), binding.body))
    out.sort(key=lambda m: (":" not in m.template.rsplit("/", 1)[-1], -len(m.template)))
    return out


def _bind(service: str, method: Any, verb: str, template: str, body: str) -> RestMethod:
    regex, openapi_path, path_vars = compile_template(template)
    return RestMethod(
        service=service,
        method=method,
        verb=verb.upper(),
        template=template,
        openapi_path=openapi_path,
        body=body,
        regex=regex,
        path_vars=path_vars,
        input_cls=message_factory.GetMessageClass(method.input_type),
        output_cls=message_factory.GetMessageClass(method.output_type),
        attr=handler_attr(method.name),
        server_streaming=bool(method.server_streaming),
    )


def compile_template(template: str) -> tuple[re.Pattern[str], str, tuple[PathVar, ...]]:
    """A ``google.api.http`` path template as a regex over the raw path, its OpenAPI form and
    its variables. Supports ``{f}``, ``{f=*}``, ``{f=a/*/b}``, ``{f=**}``, ``*``, ``**`` and a
    trailing ``:verb``."""
    if not template.startswith("/"):
        raise ValueError(f"http rule {template!r} must start with '/'")
    path, verb = template, ""
    tail_start = template.rfind("}")
    colon = template.find(":", max(tail_start, template.rfind("/")))
    if colon != -1:
        path, verb = template[:colon], template[colon:]
    regex, openapi = "", ""
    path_vars: list[PathVar] = []
    i = 0
    while i < len(path):
        if path[i] == "{":
            end = path.index("}", i)
            field, _, pattern = path[i + 1 : end].partition("=")
            group = f"v{len(path_vars)}"
            path_vars.append(PathVar(field, group))
            regex += f"(?P<{group}>{_segments_regex(pattern or '*')})"
            openapi += "{" + field + "}"
            i = end + 1
        else:
            nxt = path.find("{", i)
            literal = path[i:] if nxt == -1 else path[i:nxt]
            regex += _segments_regex(literal)
            openapi += literal
            i += len(literal)
    return re.compile(f"^{regex}{re.escape(verb)}$"), openapi + verb, tuple(path_vars)


_WILDCARDS = {"*": "[^/]+", "**": ".+"}


def _segments_regex(pattern: str) -> str:
    return "/".join(_WILDCARDS.get(seg) or re.escape(seg) for seg in pattern.split("/"))


# --- requests --------------------------------------------------------------------------------


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or ``OversizeError`` as soon as it passes ``limit`` (with or without a
    Content-Length)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise OversizeError(limit)
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise OversizeError(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _clean(e: Exception) -> str:
    return " ".join(str(e).split())


def parse_json(body: bytes, what: str) -> Any:
    """The JSON value of ``body`` (``{}`` when empty), or ``UserError`` saying what is wrong."""
    try:
        return json.loads(body.decode("utf-8")) if body.strip() else {}
    except UnicodeDecodeError as e:
        raise UserError(f"{what}: not UTF-8 (byte {e.start})") from e
    except json.JSONDecodeError as e:
        raise UserError(f"{what}: malformed JSON: {e}") from e
    except RecursionError as e:
        raise UserError(f"{what}: JSON nested too deeply") from e


def parse_json_object(body: bytes, what: str) -> dict[str, Any]:
    doc = parse_json(body, what)
    if not isinstance(doc, dict):
        raise UserError(f"{what}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _field(message: Any, name: str) -> Any:
    """The field a JSON or query key names: its proto name or its camelCase JSON name."""
    field = message.fields_by_name.get(name)
    if field is None:
        field = next((f for f in message.fields if f.json_name == name), None)
    return field


def _put(doc: dict[str, Any], message: Any, dotted: str, value: Any, where: str) -> None:
    """Set ``dotted`` (a field path) in the JSON document of ``message`` to ``value``."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        field = _field(message, part)
        if field is None:
            raise UserError(f"{where} {dotted!r}: {message.full_name} has no field {part!r}")
        # The same field may already be there under its other spelling.
        other = field.json_name if part == field.name else field.name
        if i == len(parts) - 1:
            doc.pop(other, None)
            doc[field.name] = value
            return
        if field.message_type is None or field.is_repeated:
            raise UserError(f"{where} {dotted!r}: {part!r} is not a message field")
        child = doc.pop(other, None) or doc.get(field.name) or {}
        if not isinstance(child, dict):
            raise UserError(f"{where} {dotted!r}: {part!r} must be an object")
        doc[field.name] = child
        doc, message = child, field.message_type


def _leaf(message: Any, dotted: str) -> Any:
    field = None
    for part in dotted.split("."):
        field = _field(message, part) if message is not None else None
        if field is None:
            raise UserError(f"unknown query parameter {dotted!r} (no such field in the request)")
        message = field.message_type
    return field


def _scalar(field: Any, text: str, where: str) -> Any:
    """A query or path string as the JSON value proto3 JSON expects for ``field``."""
    if field.type == FieldDescriptor.TYPE_BOOL:
        if text.lower() in ("true", "1"):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise UserError(f"{where}: expected true or false, got {text!r}")
    if field.type == FieldDescriptor.TYPE_ENUM and text.lstrip("-").isdigit():
        return int(text)
    if (
        field.type == FieldDescriptor.TYPE_MESSAGE
        and field.message_type.full_name not in _STRING_WKT
    ):
        raise UserError(f"{where}: a message field cannot be set from the URL")
    # Numbers stay strings: proto3 JSON accepts "5" and "0.5" and range-checks them.
    return text


def build_request(rm: RestMethod, path_params: Mapping[str, str], query: str, body: bytes) -> Any:
    desc = rm.method.input_type
    doc: dict[str, Any] = {}
    if rm.body == "*":
        doc = parse_json_object(body, "request body")
    elif rm.body:
        field = _field(desc, rm.body)
        doc[field.name] = parse_json(body, "request body")
    bound = {v.field for v in rm.path_vars}
    if rm.body != "*":
        repeated: dict[str, list[Any]] = {}
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key in bound:
                continue
            field = _leaf(desc, key)
            where = f"query parameter {key!r}"
            converted = _scalar(field, value, where)
            if field.is_repeated:
                repeated.setdefault(key, []).append(converted)
            elif key in repeated:
                raise UserError(f"{where} is given more than once")
            else:
                repeated[key] = [converted]
        for key, values in repeated.items():
            field = _leaf(desc, key)
            _put(doc, desc, key, values if field.is_repeated else values[0], "query parameter")
    for var in rm.path_vars:
        field = _leaf(desc, var.field)
        value = _scalar(field, path_params[var.group], f"path parameter {var.field!r}")
        _put(doc, desc, var.field, value, "path parameter")
    try:
        message = parse_dict(doc, rm.input_cls)
    except json_format.ParseError as e:
        raise UserError(f"invalid request: {_clean(e)}") from e
    except RecursionError as e:
        raise UserError("invalid request: nested too deeply") from e
    return message


def to_json_bytes(message: Any) -> bytes:
    """Compact proto3 JSON with defaults (json_format's ``always_print_fields_with_no_presence``
    output, through ``_json_codec``'s faster printer)."""
    return orjson.dumps(message_to_dict(message, defaults=True))


# --- routes ----------------------------------------------------------------------------------


class RestRoute(BaseRoute):
    """Every RPC bound to one path template (GET and POST on ``/v1alpha1/runs`` are one route).

    A path that matches with another HTTP method answers 405, as Starlette's own routes do.
    """

    def __init__(
        self,
        methods: Sequence[RestMethod],
        handlers: Mapping[str, Any],
        *,
        max_body_bytes: int,
        metrics: Metrics | None,
    ) -> None:
        self.regex = methods[0].regex
        self.by_verb = {m.verb: m for m in methods}
        self._handlers = handlers
        self._limit = max_body_bytes
        self._metrics = metrics
        self._infos = {m.verb: _method_info(m) for m in methods}

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        raw = scope.get("raw_path")
        path = raw.decode("latin-1").split("?", 1)[0] if raw else scope["path"]
        found = self.regex.match(path)
        if found is None:
            return Match.NONE, {}
        params = {k: unquote(v) for k, v in found.groupdict().items()}
        match = Match.FULL if scope["method"] in self.by_verb else Match.PARTIAL
        return match, {"path_params": params}

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        rm = self.by_verb.get(scope["method"])
        if rm is None:
            allow = ", ".join(sorted(self.by_verb))
            err = ConnectError(Code.UNIMPLEMENTED, f"{scope['method']} is not allowed here")
            response: Response = JSONResponse(
                error_body(err), status_code=405, headers={"Allow": allow}
            )
            await response(scope, receive, send)
            return
        started = time.perf_counter()
        outcome = ["ok"]
        try:
            response = await self._call(rm, scope, receive, outcome)
        except Exception as e:  # noqa: BLE001 - every failure becomes an error response
            err = to_connect_error(e)
            outcome[0] = err.code.value
            response = JSONResponse(error_body(err), status_code=http_status(err.code))
        await response(scope, receive, send)
        if self._metrics is not None:
            self._metrics.observe(
                rm.service, rm.name, "rest", outcome[0], time.perf_counter() - started
            )

    async def _call(
        self, rm: RestMethod, scope: Scope, receive: Receive, outcome: list[str]
    ) -> Response:
        request = Request(scope, receive)
        body = await read_body(request, self._limit) if rm.body else b""
        message = build_request(
            rm, scope["path_params"], scope.get("query_string", b"").decode("latin-1"), body
        )
        headers = Headers()
        for key, value in request.headers.items():
            headers.add(key, value)
        client = scope.get("client")
        ctx: Any = RequestContext(
            method=self._infos[rm.verb],
            http_method=rm.verb,
            request_headers=headers,
            client_address=f"{client[0]}:{client[1]}" if client else None,
        )
        function = getattr(self._handlers[rm.service], rm.attr)
        if not rm.server_streaming:
            return Response(to_json_bytes(await function(message, ctx)), media_type=JSON)
        stream = aiter(function(message, ctx))
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return Response(b"", media_type=NDJSON)
        except BaseException:
            await aclose(stream)
            raise
        return StreamingResponse(_ndjson(first, stream, outcome), media_type=NDJSON)


async def _ndjson(first: Any, rest: AsyncIterator[Any], outcome: list[str]) -> AsyncIterator[bytes]:
    try:
        yield to_json_bytes(first) + b"\n"
        async for message in rest:
            yield to_json_bytes(message) + b"\n"
    except Exception as e:  # noqa: BLE001 - reported to the client in the stream
        # The status line has gone out; the error can only be the last line.
        err = to_connect_error(e)
        outcome[0] = err.code.value
        yield json.dumps({"error": error_body(err)}).encode() + b"\n"
    finally:
        await aclose(rest)


def _method_info(rm: RestMethod) -> MethodInfo[Any, Any]:
    return MethodInfo(
        name=rm.name,
        service_name=rm.service,
        input=rm.input_cls,
        output=rm.output_cls,
        idempotency_level=IdempotencyLevel.UNKNOWN,
        stream_type=StreamType.SERVER_STREAM if rm.server_streaming else StreamType.UNARY,
    )


def rest_routes(
    handlers: Mapping[str, Any], *, max_body_bytes: int, metrics: Metrics | None = None
) -> list[BaseRoute]:
    """One route per path template of the services in ``handlers`` (service name → handler)."""
    grouped: dict[str, list[RestMethod]] = {}
    for rm in http_rules(handlers):
        grouped.setdefault(rm.regex.pattern, []).append(rm)
    return [
        RestRoute(group, handlers, max_body_bytes=max_body_bytes, metrics=metrics)
        for group in grouped.values()
    ]
