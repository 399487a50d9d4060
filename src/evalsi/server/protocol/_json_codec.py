"""A proto3 JSON codec for connectrpc that is compact and fast, and answers like ``json_format``.

connectrpc's own JSON codec calls ``json_format.MessageToJson`` (indented, then ``json.dumps``)
and ``json_format.Parse`` (pure-Python tree walks): on a one-record Evaluate that is ~0.2 ms of
~1 ms, and on 1,000 records ~90 ms, more than the grading. This codec produces and accepts the
same proto3 JSON:

* **encode** walks ``ListFields()`` (exactly the fields proto3 JSON prints: set ones, defaults
  omitted) with a per-descriptor table and writes compact UTF-8 with orjson. Well-known types
  (``Value``, ``Struct``, ``Timestamp``...) go through ``json_format`` itself.
* **decode** reads the body with orjson and turns the common shapes (strings, bools, whole
  numbers, doubles, enum names, nested messages, lists, string-keyed maps) into constructor
  arguments, so upb builds the message in C. Anything else (a null, a number as a string that is
  not plain digits, bytes, 32-bit floats, two spellings of one field, ...) and any error fall
  back to ``json_format.ParseDict``/``Parse`` on the same input, so what is accepted and the
  error a client reads are json_format's. A unit test pins both directions against it.

One difference: a JSON object with a duplicate key keeps the last value (as the REST routes
always did) where ``json_format.Parse`` refused it.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from functools import cache, partial
from typing import Any

import orjson
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_MAX_DEPTH = 100  # json_format's default max_recursion_depth
_WKT_PREFIX = "google.protobuf."
_JSON_STRING_WKT = frozenset(
    ("google.protobuf.Duration", "google.protobuf.Timestamp", "google.protobuf.FieldMask")
)

_INT64 = frozenset(
    (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
        FieldDescriptor.TYPE_SINT64,
    )
)
_INT32 = frozenset(
    (
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_UINT32,
        FieldDescriptor.TYPE_FIXED32,
        FieldDescriptor.TYPE_SFIXED32,
        FieldDescriptor.TYPE_SINT32,
    )
)


class _Slow(Exception):  # a signal, never seen by a client
    """The fast decoder does not take this input; ``json_format`` decides."""


def _is_map(field: FieldDescriptor) -> bool:
    mt = field.message_type
    return mt is not None and mt.GetOptions().map_entry


def _is_wkt(desc: Descriptor | None) -> bool:
    return desc is not None and desc.full_name.startswith(_WKT_PREFIX)


# -- encode ------------------------------------------------------------------------------------

_Out = Callable[[Any], Any]


def _double(value: float) -> Any:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _scalar_out(field: FieldDescriptor, defaults: bool) -> _Out:
    t = field.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        mt = field.message_type
        if mt.full_name in _JSON_STRING_WKT:
            return _json_string
        if _is_wkt(mt):
            return partial(json_format.MessageToDict, always_print_fields_with_no_presence=defaults)
        return partial(message_to_dict, defaults=True) if defaults else message_to_dict
    if t in _INT64:
        return str
    if t == FieldDescriptor.TYPE_DOUBLE:
        return _double
    if t == FieldDescriptor.TYPE_FLOAT:
        return _float32
    if t == FieldDescriptor.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda v: names.get(v, v)
    if t == FieldDescriptor.TYPE_BYTES:
        return lambda v: base64.b64encode(v).decode("utf-8")
    return _same


def _json_string(message: Any) -> str:
    return str(message.ToJsonString())  # what json_format calls for these types


def _same(value: Any) -> Any:
    return value


def _float32(value: float) -> Any:
    # 32-bit floats print at their shortest round-trip form; json_format knows how.
    from google.protobuf.internal import type_checkers

    return _double(value) if not math.isfinite(value) else type_checkers.ToShortestFloat(value)


def _field_out(field: FieldDescriptor, defaults: bool) -> tuple[str, _Out]:
    if _is_map(field):
        entry = field.message_type
        key_field, value_field = entry.fields_by_name["key"], entry.fields_by_name["value"]
        convert = _scalar_out(value_field, defaults)
        if key_field.type == FieldDescriptor.TYPE_BOOL:
            return field.json_name, lambda m: {
                ("true" if k else "false"): convert(v) for k, v in m.items()
            }
        return field.json_name, lambda m: {str(k): convert(v) for k, v in m.items()}
    convert = _scalar_out(field, defaults)
    if field.is_repeated:
        if convert is _same:
            return field.json_name, list
        return field.json_name, lambda items: [convert(v) for v in items]
    return field.json_name, convert


class _Table:
    """How to print one message type: a converter per field and, when defaults are printed,
    the default of every field without presence (json_format's
    ``always_print_fields_with_no_presence``)."""

    __slots__ = ("defaults", "fields")

    def __init__(self, desc: Descriptor, defaults: bool) -> None:
        self.fields = {f: _field_out(f, defaults) for f in desc.fields}
        # (name, value, factory): a fresh [] or {} per message for repeated fields and maps
        self.defaults: list[tuple[str, Any, Callable[[], Any] | None]] = []
        if defaults:
            for f in desc.fields:
                if f.has_presence:
                    continue
                if _is_map(f):
                    self.defaults.append((f.json_name, None, dict))
                elif f.is_repeated:
                    self.defaults.append((f.json_name, None, list))
                else:
                    self.defaults.append((f.json_name, self.fields[f][1](f.default_value), None))


@cache
def _encoder(desc: Descriptor, defaults: bool) -> _Table | None:
    return None if _is_wkt(desc) else _Table(desc, defaults)


def message_to_dict(message: Message, *, defaults: bool = False) -> Any:
    """``json_format.MessageToDict(message)`` (camelCase names, defaults omitted), faster;
    ``defaults=True`` is ``always_print_fields_with_no_presence=True``."""
    table = _encoder(message.DESCRIPTOR, defaults)
    if table is None:
        return json_format.MessageToDict(message, always_print_fields_with_no_presence=defaults)
    fields = table.fields
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        entry = fields.get(field)
        if entry is None:  # an extension
            return json_format.MessageToDict(message, always_print_fields_with_no_presence=defaults)
        name, convert = entry
        out[name] = value if convert is _same else convert(value)
    for name, value, factory in table.defaults:
        if name not in out:
            out[name] = factory() if factory is not None else value
    return out


# -- decode ------------------------------------------------------------------------------------

_In = Callable[[Any, int], Any]


class _Fields:
    """A message's fields by both JSON spellings, with a converter each."""

    __slots__ = ("by_key", "oneofs")

    def __init__(self, desc: Descriptor) -> None:
        self.by_key: dict[str, tuple[str, _In]] = {}
        self.oneofs: dict[str, str] = {}
        for field in desc.fields:
            entry = (field.name, _field_in(field))
            self.by_key[field.json_name] = entry
            self.by_key[field.name] = entry
            oneof = field.containing_oneof
            if oneof is not None:
                self.oneofs[field.name] = oneof.name


_fields = cache(_Fields)


def _string(value: Any, depth: int) -> str:
    if type(value) is not str:
        raise _Slow
    return value


def _bool(value: Any, depth: int) -> bool:
    if type(value) is not bool:
        raise _Slow
    return value


def _integer(value: Any, depth: int) -> int:
    if type(value) is int:
        return value
    if type(value) is str and value.isascii() and value.lstrip("-").isdigit():
        return int(value)  # int64 travels as a string in proto3 JSON
    raise _Slow


def _float64(value: Any, depth: int) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _Slow


def _unsupported(value: Any, depth: int) -> Any:
    raise _Slow


def _scalar_in(field: FieldDescriptor) -> _In:
    t = field.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        mt = field.message_type
        if _is_wkt(mt):
            cls = message_factory.GetMessageClass(mt)

            def wkt(value: Any, depth: int) -> Message:
                message = cls()
                # The same conversion the whole-message parse would apply at this depth.
                json_format.ParseDict(
                    value,
                    message,
                    ignore_unknown_fields=False,
                    max_recursion_depth=_MAX_DEPTH - depth,
                )
                return message

            return wkt
        return lambda value, depth: _message_kwargs(value, mt, depth + 1)
    if t == FieldDescriptor.TYPE_STRING:
        return _string
    if t == FieldDescriptor.TYPE_BOOL:
        return _bool
    if t in _INT64 or t in _INT32:
        return _integer
    if t == FieldDescriptor.TYPE_DOUBLE:
        return _float64
    if t == FieldDescriptor.TYPE_ENUM:
        numbers: dict[str, int] = {v.name: v.number for v in field.enum_type.values}

        def enum(value: Any, depth: int) -> int:
            if type(value) is not str or value not in numbers:
                raise _Slow
            return numbers[value]

        return enum
    return _unsupported  # bytes and 32-bit floats: rare here, and json_format's rules are subtle


def _field_in(field: FieldDescriptor) -> _In:
    if _is_map(field):
        entry = field.message_type
        if entry.fields_by_name["key"].type != FieldDescriptor.TYPE_STRING:
            return _unsupported
        convert = _scalar_in(entry.fields_by_name["value"])

        def mapping(value: Any, depth: int) -> dict[str, Any]:
            if type(value) is not dict:
                raise _Slow
            return {k: convert(v, depth) for k, v in value.items()}

        return mapping
    convert = _scalar_in(field)
    if field.is_repeated:

        def repeated(value: Any, depth: int) -> list[Any]:
            if type(value) is not list:
                raise _Slow
            return [convert(v, depth) for v in value]

        return repeated
    return convert


def _message_kwargs(doc: Any, desc: Descriptor, depth: int) -> dict[str, Any]:
    if type(doc) is not dict or depth > _MAX_DEPTH:
        raise _Slow
    fields = _fields(desc)
    out: dict[str, Any] = {}
    oneofs: set[str] | None = None
    for key, value in doc.items():
        entry = fields.by_key.get(key)
        if entry is None or value is None:
            raise _Slow
        name, convert = entry
        if name in out:  # both spellings of one field
            raise _Slow
        oneof = fields.oneofs.get(name)
        if oneof is not None:
            oneofs = oneofs if oneofs is not None else set()
            if oneof in oneofs:
                raise _Slow
            oneofs.add(oneof)
        out[name] = convert(value, depth)
    return out


def parse(data: bytes | bytearray, message_class: type[Message]) -> Message:
    """``json_format.Parse(data, message_class(), ignore_unknown_fields=False)``, faster."""
    desc = message_class.DESCRIPTOR
    try:
        if _is_wkt(desc):  # a top-level well-known type has a JSON form of its own
            raise orjson.JSONDecodeError("", "", 0)
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        message = message_class()
        json_format.Parse(bytes(data), message, ignore_unknown_fields=False)
        return message  # only when json_format accepts what orjson does not (NaN, ...)
    try:  # as json_format.Parse words what ParseDict raises
        return parse_dict(doc, message_class)
    except json_format.ParseError:
        raise
    except Exception as e:
        raise json_format.ParseError(f"Failed to parse JSON: {type(e).__name__}: {e}.") from e


def parse_dict(doc: Any, message_class: type[Message]) -> Message:
    """``json_format.ParseDict(doc, message_class(), ignore_unknown_fields=False)``, faster,
    raising what it raises."""
    desc = message_class.DESCRIPTOR
    if not _is_wkt(desc):
        try:
            return message_class(**_message_kwargs(doc, desc, 1))
        except Exception:  # noqa: BLE001 - json_format decides and words the error
            pass
    message = message_class()
    json_format.ParseDict(doc, message, ignore_unknown_fields=False)
    return message


class FastJSONCodec:
    """connectrpc's ``Codec`` protocol for ``application/json`` (and ``connect+json``)."""

    def name(self) -> str:
        return "json"

    def encode(self, message: Message) -> bytes:
        return orjson.dumps(message_to_dict(message))

    def decode(self, data: bytes | bytearray, message_class: type[Message]) -> Message:
        return parse(data, message_class)


__all__ = ["FastJSONCodec", "message_to_dict", "parse", "parse_dict"]
