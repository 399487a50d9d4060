#!/usr/bin/env python3
"""Generate the JSON Schemas of the YAML specs from the proto descriptors.

Usage::

    python scripts/gen_schema.py            # regenerate in place
    python scripts/gen_schema.py --check    # exit 1, naming each stale file, if out of date
    python scripts/gen_schema.py --out DIR  # generate into (or check) another directory

``proto/`` is the single source of truth (docs/ARCHITECTURE.md, "Where the schema lives"), so the
schema a spec file is validated against is derived from the messages, never written by hand. protoc
compiles the spec's .proto file into a ``FileDescriptorSet`` (with comments, which become
``description``s), and each message reachable from the root becomes a ``$defs`` entry following the
proto3 JSON mapping:

- a message is an object with its fields' JSON (camelCase) names and
  ``additionalProperties: false``, so an unknown field is an error;
- ``repeated`` is an array, ``map<K, V>`` an object whose values are V;
- 32-bit integers are bounded integers; 64-bit integers accept an integer or a decimal string
  (proto3 JSON writes them as strings); floats and doubles are numbers; bytes are base64 strings;
- an enum is a string naming one of its values;
- a ``oneof`` allows at most one of its members (proto3 ``optional`` fields are not oneofs);
- ``Struct`` is any object, ``Value`` any value, ``ListValue`` any array; ``Duration`` and
  ``Timestamp`` are their JSON strings.

What proto cannot say (a constant ``apiVersion`` and ``kind``, required fields, ranges) is written
in the proto itself, as an ``@constraints {...}`` line in the comment of the field or message: JSON
Schema keywords merged into its generated schema (``required`` lists JSON names; every name must be
a field of the message, so a renamed field cannot silently lose its constraint). The server's
OpenAPI document (``evalsi.server.protocol._openapi``) reads the same lines, so a message both
documents hold is constrained alike.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen_proto import googleapis_include
from google.protobuf import descriptor_pb2

from evalsi.server.protocol._openapi import merge_keywords, split_constraints

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
DEFAULT_OUT = ROOT / "src" / "evalsi" / "specs" / "schemas"

API_VERSION = "evals.si/v1alpha1"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class SpecSchema:
    """One generated schema: the file that declares the root message, and the root's name."""

    filename: str
    proto: str
    root: str
    kind: str


SCHEMAS = (
    SpecSchema(
        filename="evalrun.schema.json",
        proto="evalsi/v1alpha1/run.proto",
        root="evalsi.v1alpha1.EvalRun",
        kind="EvalRun",
    ),
    SpecSchema(
        filename="onlineevalpolicy.schema.json",
        proto="evalsi/v1alpha1/policy.proto",
        root="evalsi.v1alpha1.OnlineEvalPolicy",
        kind="OnlineEvalPolicy",
    ),
    SpecSchema(
        filename="systemdeclaration.schema.json",
        proto="evalsi/v1alpha1/evidence.proto",
        root="evalsi.v1alpha1.SystemDeclarationFile",
        kind="SystemDeclaration",
    ),
)

_INT32 = 2**31
_UINT32 = 2**32

_T = descriptor_pb2.FieldDescriptorProto
_SCALARS: dict[int, dict[str, Any]] = {
    _T.TYPE_DOUBLE: {"type": "number"},
    _T.TYPE_FLOAT: {"type": "number"},
    _T.TYPE_INT32: {"type": "integer", "minimum": -_INT32, "maximum": _INT32 - 1},
    _T.TYPE_SINT32: {"type": "integer", "minimum": -_INT32, "maximum": _INT32 - 1},
    _T.TYPE_SFIXED32: {"type": "integer", "minimum": -_INT32, "maximum": _INT32 - 1},
    _T.TYPE_UINT32: {"type": "integer", "minimum": 0, "maximum": _UINT32 - 1},
    _T.TYPE_FIXED32: {"type": "integer", "minimum": 0, "maximum": _UINT32 - 1},
    _T.TYPE_INT64: {"type": ["integer", "string"], "pattern": "^-?[0-9]+$"},
    _T.TYPE_SINT64: {"type": ["integer", "string"], "pattern": "^-?[0-9]+$"},
    _T.TYPE_SFIXED64: {"type": ["integer", "string"], "pattern": "^-?[0-9]+$"},
    _T.TYPE_UINT64: {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 0},
    _T.TYPE_FIXED64: {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 0},
    _T.TYPE_BOOL: {"type": "boolean"},
    _T.TYPE_STRING: {"type": "string"},
    _T.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
}

_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Duration": {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]{1,9})?s$"},
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Empty": {"type": "object", "additionalProperties": False},
    "google.protobuf.DoubleValue": {"type": ["number", "null"]},
    "google.protobuf.FloatValue": {"type": ["number", "null"]},
    "google.protobuf.Int32Value": {"type": ["integer", "null"]},
    "google.protobuf.UInt32Value": {"type": ["integer", "null"], "minimum": 0},
    "google.protobuf.Int64Value": {"type": ["integer", "string", "null"]},
    "google.protobuf.UInt64Value": {"type": ["integer", "string", "null"]},
    "google.protobuf.BoolValue": {"type": ["boolean", "null"]},
    "google.protobuf.StringValue": {"type": ["string", "null"]},
    "google.protobuf.BytesValue": {"type": ["string", "null"], "contentEncoding": "base64"},
}

# FileDescriptorProto field numbers used in SourceCodeInfo paths.
_MESSAGE_TYPE = 4
_NESTED_TYPE = 3
_FIELD = 2


@dataclass(frozen=True)
class _Message:
    proto: Any  # descriptor_pb2.DescriptorProto
    comment: str
    field_comments: tuple[str, ...]
    constraints: dict[str, Any]
    field_constraints: tuple[dict[str, Any], ...]


def descriptor_set(proto: str) -> Any:
    """Compile one .proto file (and its imports) into a FileDescriptorSet with comments."""
    with tempfile.TemporaryDirectory(prefix="evalsi-schema-") as tmp:
        out = Path(tmp) / "set.pb"
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"-I{googleapis_include()}",
            f"--descriptor_set_out={out}",
            "--include_imports",
            "--include_source_info",
            proto,
        ]
        proc = subprocess.run(cmd, cwd=PROTO_DIR, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"protoc failed ({proc.returncode}):\n{proc.stderr}")
        fds = descriptor_pb2.FileDescriptorSet()
        fds.ParseFromString(out.read_bytes())
        return fds


def _index(fds: Any) -> tuple[dict[str, _Message], dict[str, Any]]:
    """Every message and enum by full name, with the comments protoc kept for them."""
    messages: dict[str, _Message] = {}
    enums: dict[str, Any] = {}
    for file in fds.file:
        comments = {tuple(loc.path): loc.leading_comments for loc in file.source_code_info.location}
        prefix = f"{file.package}." if file.package else ""

        def walk(
            msg: Any, scope: str, path: tuple[int, ...], comments: dict[tuple[int, ...], str]
        ) -> Iterator[tuple[str, _Message]]:
            full = f"{scope}{msg.name}"
            text, constraints = _notes(comments.get(path, ""), full)
            fields = [
                _notes(comments.get((*path, _FIELD, i), ""), f"{full}.{f.name}")
                for i, f in enumerate(msg.field)
            ]
            yield (
                full,
                _Message(
                    msg,
                    text,
                    tuple(t for t, _ in fields),
                    constraints,
                    tuple(c for _, c in fields),
                ),
            )
            for enum in msg.enum_type:
                enums[f"{full}.{enum.name}"] = enum
            for j, nested in enumerate(msg.nested_type):
                yield from walk(nested, f"{full}.", (*path, _NESTED_TYPE, j), comments)

        for enum in file.enum_type:
            enums[f"{prefix}{enum.name}"] = enum
        for i, msg in enumerate(file.message_type):
            messages.update(walk(msg, prefix, (_MESSAGE_TYPE, i), comments))
    return messages, enums


def _notes(comment: str, where: str) -> tuple[str, dict[str, Any]]:
    try:
        return split_constraints(comment, where)
    except ValueError as e:
        sys.exit(str(e))


class _Builder:
    def __init__(self, messages: dict[str, _Message], enums: dict[str, Any]) -> None:
        self.messages = messages
        self.enums = enums
        self.defs: dict[str, dict[str, Any]] = {}

    def ref(self, full: str) -> dict[str, Any]:
        if full in _WELL_KNOWN:
            return copy.deepcopy(_WELL_KNOWN[full])
        if full.startswith("google.protobuf."):
            sys.exit(f"no JSON mapping for well-known type {full}; add one to _WELL_KNOWN")
        if full not in self.defs:
            self.defs[full] = {}  # reserve first: messages may be recursive
            self.defs[full] = self.message(full)
        return {"$ref": f"#/$defs/{full}"}

    def message(self, full: str) -> dict[str, Any]:
        entry = self.messages[full]
        properties: dict[str, Any] = {}
        oneofs: dict[int, list[str]] = {}
        fields = zip(entry.proto.field, entry.field_comments, entry.field_constraints, strict=True)
        for field, comment, constraints in fields:
            schema = self.field(field)
            if comment:
                schema = {"description": comment, **schema}
            merge_keywords(schema, constraints)
            properties[field.json_name] = schema
            if field.HasField("oneof_index") and not field.proto3_optional:
                oneofs.setdefault(field.oneof_index, []).append(field.json_name)
        out: dict[str, Any] = {"type": "object"}
        if entry.comment:
            out = {"description": entry.comment, **out}
        out["properties"] = properties
        out["additionalProperties"] = False
        exclusive = [
            {
                "not": {
                    "anyOf": [
                        {"required": [a, b]}
                        for i, a in enumerate(members)
                        for b in members[i + 1 :]
                    ]
                }
            }
            for members in oneofs.values()
            if len(members) > 1
        ]
        if exclusive:
            out["allOf"] = exclusive
        unknown = [n for n in entry.constraints.get("required", []) if n not in properties]
        if unknown:
            sys.exit(f"{full}: @constraints requires fields it does not have: {unknown}")
        merge_keywords(out, entry.constraints)
        return out

    def field(self, field: Any) -> dict[str, Any]:
        if field.type == _T.TYPE_MESSAGE:
            target = field.type_name.lstrip(".")
            entry = self.messages.get(target)
            if entry is not None and entry.proto.options.map_entry:
                value = entry.proto.field[1]
                return {"type": "object", "additionalProperties": self.single(value)}
        single = self.single(field)
        if field.label == _T.LABEL_REPEATED:
            return {"type": "array", "items": single}
        return single

    def single(self, field: Any) -> dict[str, Any]:
        if field.type == _T.TYPE_MESSAGE:
            return self.ref(field.type_name.lstrip("."))
        if field.type == _T.TYPE_ENUM:
            enum = self.enums[field.type_name.lstrip(".")]
            return {"type": "string", "enum": [v.name for v in enum.value]}
        if field.type not in _SCALARS:
            sys.exit(f"field {field.name}: no JSON mapping for proto type {field.type}")
        return copy.deepcopy(_SCALARS[field.type])


def build(spec: SpecSchema) -> dict[str, Any]:
    """The complete JSON Schema document for one spec kind."""
    messages, enums = _index(descriptor_set(spec.proto))
    builder = _Builder(messages, enums)
    builder.ref(spec.root)
    root = messages[spec.root]
    return {
        "$schema": DIALECT,
        "$id": f"https://evals.si/schemas/v1alpha1/{spec.filename}",
        "$comment": f"Generated by scripts/gen_schema.py from proto/{spec.proto}. Do not edit.",
        "title": spec.kind,
        "description": root.comment,
        "$ref": f"#/$defs/{spec.root}",
        "$defs": dict(sorted(builder.defs.items())),
    }


def render(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if a generated schema is out of date",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"schema directory (default: {DEFAULT_OUT.relative_to(ROOT)})",
    )
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()

    stale = []
    for spec in SCHEMAS:
        schema = build(spec)
        text = render(schema)
        path = out / spec.filename
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            out.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"regenerated {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if args.check and stale:
        print(f"{out} is out of date with proto/:", file=sys.stderr)
        for path in stale:
            print(f"  stale: {path.name}", file=sys.stderr)
        print("regenerate with: python scripts/gen_schema.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
