"""Evaluator parameters: declared by the signature, published as JSON Schema, validated on bind.

An evaluator's parameters are the keyword-only arguments of its function (or of its class's
``__init__``). Their annotations give the types; their defaults make them optional. From that we
build the manifest's ``params_schema`` and validate what users pass, coercing the strings the CLI
receives (``--param exact-match.ignore_case=true``).
"""

from __future__ import annotations

import difflib
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union

import orjson

from evalsi.core import ParamError

ParamType = Literal["boolean", "integer", "number", "string", "array", "object", "any"]

_REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One declared parameter."""

    name: str
    type: ParamType
    default: Any = _REQUIRED
    choices: tuple[Any, ...] = ()
    nullable: bool = False
    items: ParamType | None = None

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {} if self.type == "any" else {"type": self.type}
        if self.nullable and "type" in schema:
            schema["type"] = [self.type, "null"]
        if self.choices:
            schema["enum"] = list(self.choices)
        if self.items and self.items != "any":
            schema["items"] = {"type": self.items}
        if not self.required:
            schema["default"] = self.default
        return schema


def params_from_signature(fn: Callable[..., Any], *, skip_first: bool) -> tuple[ParamSpec, ...]:
    """Read the keyword parameters of ``fn``; positional ones (the record) are not params."""
    hints = typing.get_type_hints(fn)
    specs = []
    for position, param in enumerate(inspect.signature(fn).parameters.values()):
        if skip_first and position == 0:
            continue
        if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        if param.kind is not param.KEYWORD_ONLY:
            raise TypeError(
                f"{fn.__qualname__}: parameter {param.name!r} must be keyword-only "
                "(put it after `*`) so that it can be a declared evaluator param"
            )
        specs.append(_spec(param.name, hints.get(param.name, Any), param.default))
    return tuple(specs)


def _spec(name: str, annotation: Any, default: Any) -> ParamSpec:
    nullable = False
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(members) < len(typing.get_args(annotation))
        annotation = members[0] if len(members) == 1 else Any
        origin = typing.get_origin(annotation)
    if origin is Literal:
        choices = typing.get_args(annotation)
        return ParamSpec(name, _scalar(type(choices[0])), default, choices, nullable)
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple):
        args = typing.get_args(annotation)
        items = _scalar(args[0]) if args else "any"
        return ParamSpec(name, "array", default, (), nullable, items)
    if origin is dict or annotation is dict:
        return ParamSpec(name, "object", default, (), nullable)
    return ParamSpec(name, _scalar(annotation), default, (), nullable)


_SCALARS: dict[type, ParamType] = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _scalar(tp: Any) -> ParamType:
    return next((kind for t, kind in _SCALARS.items() if tp is t), "any")


def params_schema(specs: tuple[ParamSpec, ...]) -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) published in the manifest."""
    return {
        "type": "object",
        "properties": {s.name: s.json_schema() for s in specs},
        "required": [s.name for s in specs if s.required],
        "additionalProperties": False,
    }


def validate_params(
    evaluator: str, specs: tuple[ParamSpec, ...], given: Mapping[str, Any]
) -> dict[str, Any]:
    """Check and coerce ``given`` against ``specs``; every error names the evaluator and param."""
    by_name = {s.name: s for s in specs}
    out: dict[str, Any] = {}
    for key, raw in given.items():
        spec = by_name.get(key)
        if spec is None:
            known = ", ".join(sorted(by_name)) or "none"
            close = difflib.get_close_matches(key, list(by_name), n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            raise ParamError(f"{evaluator}: unknown param {key!r} (known: {known})", hint=hint)
        out[key] = _coerce(evaluator, spec, raw)
    missing = [s.name for s in specs if s.required and s.name not in out]
    if missing:
        raise ParamError(f"{evaluator}: missing required param(s): {', '.join(missing)}")
    return out


def _coerce(evaluator: str, spec: ParamSpec, raw: Any) -> Any:
    where = f"{evaluator}: param {spec.name!r}"
    if raw is None:
        if spec.nullable or spec.type == "any":
            return None
        raise ParamError(f"{where} must be {_article(spec.type)}, got null")
    value = _from_string(spec, raw) if isinstance(raw, str) and spec.type != "string" else raw
    ok = _CHECKS[spec.type](value)
    if not ok:
        raise ParamError(f"{where} must be {_article(spec.type)}, got {_show(raw)}")
    if spec.type == "number":
        value = float(value)
    if spec.type == "array" and spec.items and spec.items != "any":
        value = [_coerce(evaluator, ParamSpec(f"{spec.name}[]", spec.items), v) for v in value]
    if spec.choices and value not in spec.choices:
        options = ", ".join(repr(c) for c in spec.choices)
        raise ParamError(f"{where} must be one of {options}, got {_show(raw)}")
    return value


_BOOLEANS = dict.fromkeys(("true", "yes", "1", "on"), True)
_BOOLEANS |= dict.fromkeys(("false", "no", "0", "off"), False)


def _from_string(spec: ParamSpec, raw: str) -> Any:
    text = raw.strip()
    if spec.type == "boolean":
        return _BOOLEANS.get(text.lower(), raw)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        if spec.type == "array":  # a comma list is the natural CLI spelling: a,b,c
            return [part.strip() for part in text.split(",") if part.strip()]
        return raw


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_CHECKS: dict[ParamType, Callable[[Any], bool]] = {
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, (list, tuple)),
    "object": lambda v: isinstance(v, dict),
    "any": lambda v: True,
}


def params_from_schema(schema: Mapping[str, Any]) -> tuple[ParamSpec, ...]:
    """The params a ``params_schema`` (as ``params_schema`` writes it) declares: how an
    evaluator described elsewhere (a plugin's manifest) gets the same checks and coercions as
    one declared here. A property of a shape this cannot read is ``any``."""
    required = set(schema.get("required") or ())
    specs = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, Mapping) else {}
        kinds = prop.get("type", "any")
        kinds = list(kinds) if isinstance(kinds, list) else [kinds]
        nullable = "null" in kinds
        kinds = [k for k in kinds if k != "null"]
        kind: ParamType = kinds[0] if len(kinds) == 1 and kinds[0] in _CHECKS else "any"
        items = (prop.get("items") or {}).get("type") if kind == "array" else None
        # optional without a default (a schema written by hand): the plugin's own default
        default = _REQUIRED if name in required else prop.get("default")
        if kind == "integer" and isinstance(default, float) and default.is_integer():
            default = int(default)  # a protobuf Struct carries every number as a double
        specs.append(
            ParamSpec(
                name,
                kind,
                default,
                tuple(prop.get("enum") or ()),
                nullable,
                items if items in _CHECKS else None,
            )
        )
    return tuple(specs)
