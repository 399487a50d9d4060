"""The OpenAPI 3.1 document of the REST routes, generated from the same descriptors.

Paths come from ``_rest.http_rules`` (the routes the gateway serves, so the two cannot
disagree); schemas from the message descriptors, in the proto3 JSON mapping the gateway
speaks: camelCase names, 64-bit integers as strings, enums as their names, ``Struct`` and
``Value`` free-form, ``Timestamp`` an RFC 3339 string, ``Duration`` a string like ``"1.5s"``,
``double`` a number or ``"NaN"``/``"Infinity"``.

Descriptions are the proto comments. Generated ``_pb2`` modules carry no comments, so they
are read from a ``FileDescriptorSet`` compiled with ``--include_source_info``: the one passed
in, else ``evalsi/_proto/descriptors.binpb`` when the package ships it; without either the
document is the same minus descriptions and constraints.

Constraints the server enforces beyond the types (patterns, ranges, required fields) are
written in the proto, in the comment of the field or message they apply to, as one line::

    // Empty means "default".
    // @constraints {"pattern": "^[a-z]+$", "maxLength": 64}

The JSON object holds JSON Schema keywords merged into that field's (or message's) generated
schema; for a repeated field they apply to the array (``items`` reaches the elements). The line
is not part of the description. ``scripts/gen_schema.py`` reads the same lines, so a message
the YAML specs share is constrained alike in both documents. Other generated rules: a
``oneof`` of several fields allows at most one of them; a range on a ``double`` leaves out the
``"NaN"``/``"Infinity"`` strings (they fall outside every range); a body whose message has
required fields is itself required.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor

from evalsi.server.protocol._rest import NDJSON, RestMethod, http_rules

OPENAPI_VERSION = "3.1.0"
DESCRIPTOR_SET = "descriptors.binpb"
ERROR_SCHEMA = "evalsi.Error"
ANNOTATION = "@constraints"

# Paths into FileDescriptorProto for source_code_info (descriptor.proto field numbers).
_MESSAGE, _ENUM, _SERVICE = 4, 5, 6
_FIELD, _NESTED, _NESTED_ENUM, _METHOD, _ENUM_VALUE = 2, 3, 4, 2, 2

_F = FieldDescriptor
_INT32 = {_F.TYPE_INT32, _F.TYPE_SINT32, _F.TYPE_SFIXED32}
_UINT32 = {_F.TYPE_UINT32, _F.TYPE_FIXED32}
_INT64 = {_F.TYPE_INT64, _F.TYPE_SINT64, _F.TYPE_SFIXED64}
_UINT64 = {_F.TYPE_UINT64, _F.TYPE_FIXED64}


def decimal_upto(bound: int) -> str:
    """A regex (no anchors) for the decimal integers 0..``bound``, without leading zeros:
    a 64-bit string outside its type's range would be refused by the JSON parser."""
    digits = str(bound)
    alternatives = ["0"]
    if len(digits) > 1:
        alternatives.append(f"[1-9][0-9]{{0,{len(digits) - 2}}}")
    for i, d in enumerate(digits):
        lowest = 1 if i == 0 else 0
        if int(d) > lowest:
            rest = len(digits) - i - 1
            alternatives.append(
                f"{digits[:i]}[{lowest}-{int(d) - 1}]" + f"[0-9]{{{rest}}}" * (rest > 0)
            )
    alternatives.append(digits)
    return "(" + "|".join(alternatives) + ")"


_INT64_PATTERN = f"^-?{decimal_upto(2**63 - 1)}$"
_UINT64_PATTERN = f"^{decimal_upto(2**64 - 1)}$"
_RANGE = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")

_NUMBER: dict[str, Any] = {
    "oneOf": [{"type": "number"}, {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]}]
}
_WKT: dict[str, dict[str, Any]] = {
    "google.protobuf.Struct": {"type": "object", "additionalProperties": True},
    "google.protobuf.Value": {"description": "Any JSON value."},
    "google.protobuf.ListValue": {"type": "array", "items": {}},
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {
        "type": "string",
        "pattern": r"^-?[0-9]+(\.[0-9]{1,9})?s$",
        "description": 'Seconds with an "s" suffix, e.g. "1.5s".',
    },
    "google.protobuf.FieldMask": {"type": "string"},
    "google.protobuf.Empty": {"type": "object", "additionalProperties": False},
    "google.protobuf.Any": {
        "type": "object",
        "properties": {"@type": {"type": "string"}},
        "required": ["@type"],
        "additionalProperties": True,
    },
    "google.protobuf.DoubleValue": _NUMBER,
    "google.protobuf.FloatValue": _NUMBER,
    "google.protobuf.Int64Value": {"type": "string", "format": "int64", "pattern": _INT64_PATTERN},
    "google.protobuf.UInt64Value": {
        "type": "string",
        "format": "uint64",
        "pattern": _UINT64_PATTERN,
    },
    "google.protobuf.Int32Value": {"type": "integer", "format": "int32"},
    "google.protobuf.UInt32Value": {"type": "integer", "format": "uint32", "minimum": 0},
    "google.protobuf.BoolValue": {"type": "boolean"},
    "google.protobuf.StringValue": {"type": "string"},
    "google.protobuf.BytesValue": {"type": "string", "contentEncoding": "base64"},
}


def split_constraints(comment: str, where: str) -> tuple[str, dict[str, Any]]:
    """A proto comment's text (whitespace collapsed) and the JSON Schema keywords of its
    ``@constraints`` lines (merged, in order); ``where`` names the element in errors."""
    text: list[str] = []
    keywords: dict[str, Any] = {}
    for line in comment.splitlines():
        stripped = line.strip()
        if not stripped.startswith(ANNOTATION):
            text.append(stripped)
            continue
        try:
            found = json.loads(stripped[len(ANNOTATION) :])
        except ValueError as e:
            raise ValueError(f"{where}: {ANNOTATION} is not valid JSON: {e}") from None
        if not isinstance(found, dict):
            raise ValueError(f"{where}: {ANNOTATION} must be a JSON object of schema keywords")
        merge_keywords(keywords, found)
    return " ".join(" ".join(text).split()), keywords


def merge_keywords(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Merge JSON Schema keywords into ``base``: objects recursively, anything else replaced."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge_keywords(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def comments_from(fds: Any) -> dict[str, str]:
    """Leading comments by full name (messages, fields, enums, services, methods), as written
    (``split_constraints`` separates the text from the constraints)."""
    out: dict[str, str] = {}
    for file in fds.file:
        where = {
            tuple(loc.path): loc.leading_comments
            for loc in file.source_code_info.location
            if loc.leading_comments.strip()
        }
        prefix = f"{file.package}." if file.package else ""

        def message(
            msg: Any, scope: str, path: tuple[int, ...], where: dict[tuple[int, ...], str] = where
        ) -> None:
            name = f"{scope}{msg.name}"
            _note(out, name, where.get(path))
            for i, f in enumerate(msg.field):
                _note(out, f"{name}.{f.name}", where.get((*path, _FIELD, i)))
            for i, nested in enumerate(msg.nested_type):
                message(nested, f"{name}.", (*path, _NESTED, i))
            for i, e in enumerate(msg.enum_type):
                _note(out, f"{name}.{e.name}", where.get((*path, _NESTED_ENUM, i)))

        for i, msg in enumerate(file.message_type):
            message(msg, prefix, (_MESSAGE, i))
        for i, e in enumerate(file.enum_type):
            _note(out, f"{prefix}{e.name}", where.get((_ENUM, i)))
        for i, svc in enumerate(file.service):
            _note(out, f"{prefix}{svc.name}", where.get((_SERVICE, i)))
            for j, m in enumerate(svc.method):
                _note(out, f"{prefix}{svc.name}.{m.name}", where.get((_SERVICE, i, _METHOD, j)))
    return out


def _note(out: dict[str, str], name: str, text: str | None) -> None:
    if text:
        out[name] = text


def packaged_comments() -> dict[str, str]:
    """Comments from the descriptor set shipped in ``evalsi._proto``, if there is one."""
    try:
        data = resources.files("evalsi._proto").joinpath(DESCRIPTOR_SET).read_bytes()
    except (FileNotFoundError, OSError):
        return {}
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(data)
    return comments_from(fds)


class _Schemas:
    """Builds ``components.schemas`` on demand, one entry per message reached."""

    def __init__(self, comments: dict[str, str]) -> None:
        self.notes = {name: split_constraints(raw, name) for name, raw in sorted(comments.items())}
        self.components: dict[str, Any] = {}

    def text(self, name: str) -> str:
        return self.notes.get(name, ("", {}))[0]

    def constraints(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.notes.get(name, ("", {}))[1])

    def ref(self, message: Any) -> dict[str, Any]:
        name = message.full_name
        if name in _WKT:
            return dict(_WKT[name])
        if name not in self.components:
            self.components[name] = {}  # placeholder: a message may refer to itself
            self.components[name] = self._message(message)
        return {"$ref": f"#/components/schemas/{name}"}

    def _message(self, message: Any) -> dict[str, Any]:
        props = {f.json_name: self.field(f) for f in message.fields}
        schema: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "additionalProperties": False,
        }
        # Setting two members of a oneof is refused by the JSON parser. (A proto3 `optional`
        # field is a oneof of one: nothing to exclude.)
        exclusive = [
            {
                "not": {
                    "anyOf": [
                        {"required": [a, b]} for i, a in enumerate(names) for b in names[i + 1 :]
                    ]
                }
            }
            for names in ([f.json_name for f in o.fields] for o in message.oneofs)
            if len(names) > 1
        ]
        if exclusive:
            schema["allOf"] = exclusive
        if text := self.text(message.full_name):
            schema["description"] = text
        merge_keywords(schema, self.constraints(message.full_name))
        return schema

    def field(self, field: Any) -> dict[str, Any]:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value = field.message_type.fields_by_name["value"]
            schema: dict[str, Any] = {"type": "object", "additionalProperties": self.single(value)}
        elif field.is_repeated:
            schema = {"type": "array", "items": self.single(field)}
        else:
            schema = self.single(field)
        schema = self.constrained(field, schema)
        if text := self.text(field.full_name):
            # In 3.1 a $ref may have siblings; wrap anyway so older tools keep the text.
            schema = (
                {"allOf": [schema], "description": text}
                if "$ref" in schema
                else {**schema, "description": text}
            )
        return schema

    def constrained(self, field: Any, schema: dict[str, Any]) -> dict[str, Any]:
        """``schema`` with the field's ``@constraints`` merged in."""
        extra = self.constraints(field.full_name)
        if not extra:
            return schema
        finite = extra.get("type") == "number" or any(k in extra for k in _RANGE)
        if schema.get("oneOf") == _NUMBER["oneOf"] and finite:
            schema = {"type": "number"}  # NaN and the infinities are outside every range
        merge_keywords(schema, extra)
        return schema

    def single(self, field: Any) -> dict[str, Any]:
        t = field.type
        if t == _F.TYPE_MESSAGE or t == _F.TYPE_GROUP:
            return self.ref(field.message_type)
        if t == _F.TYPE_ENUM:
            names = [v.name for v in field.enum_type.values]
            return {"type": "string", "enum": names}
        if t in (_F.TYPE_DOUBLE, _F.TYPE_FLOAT):
            return dict(_NUMBER)
        if t in _INT32:
            return {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1}
        if t in _UINT32:
            return {"type": "integer", "format": "uint32", "minimum": 0, "maximum": 2**32 - 1}
        if t in _INT64:
            return {"type": "string", "format": "int64", "pattern": _INT64_PATTERN}
        if t in _UINT64:
            return {"type": "string", "format": "uint64", "pattern": _UINT64_PATTERN}
        if t == _F.TYPE_BOOL:
            return {"type": "boolean"}
        if t == _F.TYPE_BYTES:
            return {"type": "string", "contentEncoding": "base64"}
        return {"type": "string"}


def _leaf(message: Any, dotted: str) -> Any:
    field = None
    for part in dotted.split("."):
        field = message.fields_by_name[part]
        message = field.message_type
    return field


def _path_schema(schemas: _Schemas, field: Any) -> dict[str, Any]:
    schema = schemas.constrained(field, schemas.single(field))
    if schema.get("type") == "string" and "minLength" not in schema and "pattern" not in schema:
        schema["minLength"] = 1  # an empty segment cannot match the route
    return schema


def _query_params(rm: RestMethod, schemas: _Schemas) -> list[dict[str, Any]]:
    """Top-level scalar fields of a GET request that the path does not bind."""
    bound = {v.field for v in rm.path_vars}
    out = []
    for field in rm.method.input_type.fields:
        if field.name in bound:
            continue
        if field.type == _F.TYPE_MESSAGE and field.message_type.full_name not in (
            "google.protobuf.Timestamp",
            "google.protobuf.Duration",
        ):
            continue
        param: dict[str, Any] = {
            "name": field.json_name,
            "in": "query",
            "required": False,
            "schema": schemas.field(field),
        }
        if field.is_repeated:
            param["style"], param["explode"] = "form", True
        out.append(param)
    return out


def _operation(rm: RestMethod, schemas: _Schemas) -> dict[str, Any]:
    full = f"{rm.service}.{rm.name}"
    params: list[dict[str, Any]] = [
        {
            "name": var.field,
            "in": "path",
            "required": True,
            "schema": _path_schema(schemas, _leaf(rm.method.input_type, var.field)),
        }
        for var in rm.path_vars
    ]
    if rm.body != "*":
        params.extend(_query_params(rm, schemas))
    out_schema = schemas.ref(rm.method.output_type)
    if rm.server_streaming:
        ok = {
            "description": "A stream of messages, one JSON object per line.",
            "content": {NDJSON: {"schema": out_schema}},
        }
    else:
        ok = {"description": "OK", "content": {"application/json": {"schema": out_schema}}}
    error = {"$ref": f"#/components/responses/{ERROR_SCHEMA}"}
    op: dict[str, Any] = {
        "operationId": f"{rm.service.rsplit('.', 1)[-1]}_{rm.name}",
        "tags": [rm.service.rsplit(".", 1)[-1]],
        "summary": rm.name,
        "responses": {"200": ok, "400": error, "404": error, "413": error, "default": error},
    }
    if text := schemas.text(full):
        op["description"] = text
    if params:
        op["parameters"] = params
    if rm.body:
        body_schema = (
            schemas.ref(rm.method.input_type)
            if rm.body == "*"
            else schemas.field(rm.method.input_type.fields_by_name[rm.body])
        )
        # An absent body is the empty message: required when that would be refused.
        demands = schemas.constraints(rm.method.input_type.full_name).keys()
        required = rm.body == "*" and bool(demands & {"required", "oneOf", "anyOf"})
        op["requestBody"] = {
            "required": required,
            "content": {"application/json": {"schema": body_schema}},
        }
    return op


def message_schema(message: Any, *, comments: dict[str, str] | None = None) -> dict[str, Any]:
    """A self-contained JSON Schema (2020-12) of ``message`` (a descriptor): the schema the
    OpenAPI document holds for it, inlined, with the messages it reaches under ``$defs``. MCP tools
    take their input schemas from here, so every surface describes a request alike."""
    schemas = _Schemas(comments if comments is not None else packaged_comments())
    schemas.ref(message)
    root = schemas.components[message.full_name]  # inline: MCP wants an object at the top
    prefix = "#/components/schemas/"

    def local(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: ("#/$defs/" + v[len(prefix) :])
                if k == "$ref" and isinstance(v, str) and v.startswith(prefix)
                else local(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [local(v) for v in node]
        return node

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **local(root),
        "$defs": local(dict(sorted(schemas.components.items()))),
    }


def build_openapi(
    services: Iterable[str],
    *,
    title: str = "evalsi API",
    version: str = "v1alpha1",
    source_info: Any = None,
    pool: Any = None,
) -> dict[str, Any]:
    """The OpenAPI document for the REST routes of ``services`` (full service names)."""
    comments = comments_from(source_info) if source_info is not None else packaged_comments()
    schemas = _Schemas(comments)
    paths: dict[str, dict[str, Any]] = {}
    for rm in http_rules(services, pool):
        paths.setdefault(rm.openapi_path, {})[rm.verb.lower()] = _operation(rm, schemas)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": title,
            "version": version,
            "description": "REST mapping of the evalsi gRPC/Connect API (proto3 JSON). "
            "Responses include fields at their default values.",
        },
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.components.items()))
            | {
                ERROR_SCHEMA: {
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "description": "A Connect error code."},
                        "message": {"type": "string"},
                        "details": {"type": "array", "items": {}},
                    },
                    "required": ["code", "message"],
                }
            },
            "responses": {
                ERROR_SCHEMA: {
                    "description": "An error: the code says whose fault, the message what.",
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}
                        }
                    },
                }
            },
        },
    }
