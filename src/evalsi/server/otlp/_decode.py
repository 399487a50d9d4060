"""OTLP trace export requests (protobuf or OTLP/JSON, optionally compressed) into ``Span``s.

This is the ingest hot path, so the walk over the message is hand-written: no
``MessageToDict``, one ``WhichOneof`` per attribute value, resource attributes decoded once per
``ResourceSpans`` and shared by reference by all its spans. OTLP/JSON is read straight from
the parsed document (its ids are hex, not the base64 of the proto3 JSON mapping; unknown fields
are ignored, as the OTLP spec requires of JSON receivers).

A span whose ids are unusable (trace id not 16 bytes or all zero, span id not 8 bytes or all
zero, parent span id neither empty nor 8 bytes) is rejected alone and counted, so the sender
gets an OTLP partial success; a body that cannot be read at all is a ``DecodeError`` (400).
"""

from __future__ import annotations

import base64
import binascii
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from evalsi.core import Span, SpanEvent, SpanLink, UserError

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CONTENT_TYPES = (PROTOBUF, JSON)

_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_WHICH_ONEOF = AnyValue.WhichOneof
T = TypeVar("T")
M = TypeVar("M", bound=Message)
_SCALAR = frozenset(("string_value", "int_value", "double_value", "bool_value", "bytes_value"))


class DecodeError(UserError):
    """The body is not an ``ExportTraceServiceRequest`` in the declared encoding (400)."""


class UnsupportedMediaType(UserError):
    """A content type or content encoding this receiver does not read (415)."""


class BodyTooLarge(UserError):
    """The body, after decompression, is larger than the limit (413, never retried)."""

    def __init__(self, limit: int, when: str = "once decompressed") -> None:
        super().__init__(
            f"the export request is larger than {limit} bytes {when}".strip(),
            hint="send smaller batches (the SDK's max_export_batch_size), or raise "
            "server.maxBodyBytes in evalsi.yaml",
        )
        self.limit = limit


@dataclass(slots=True)
class Decoded:
    """The spans kept from one export request, and how many were rejected and why."""

    spans: list[Span] = field(default_factory=list)
    rejected: int = 0
    error_message: str = ""


def media_type(content_type: str | None) -> str:
    """``application/json; charset=utf-8`` → ``application/json``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def inflate(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """The body without its ``Content-Encoding`` (gzip or deflate), never past ``max_bytes``.

    The output is capped while decompressing, so a gzip bomb costs at most ``max_bytes`` of
    memory before it is refused with ``BodyTooLarge`` (413, as the OTLP spec asks for a body
    over the limit "including after decompression").
    """
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("", "identity"):
        if len(body) > max_bytes:
            raise BodyTooLarge(max_bytes, "")
        return body
    if encoding in ("gzip", "x-gzip"):
        return _decompress(body, 16 + zlib.MAX_WBITS, max_bytes, "gzip")
    if encoding == "deflate":
        try:
            return _decompress(body, zlib.MAX_WBITS, max_bytes, "deflate")
        except DecodeError:  # some senders use raw deflate without the zlib header
            return _decompress(body, -zlib.MAX_WBITS, max_bytes, "deflate")
    raise UnsupportedMediaType(
        f"content-encoding {content_encoding!r} is not supported",
        hint="send the body uncompressed or with gzip",
    )


def _decompress(body: bytes, wbits: int, max_bytes: int, name: str) -> bytes:
    out: list[bytes] = []
    total = 0
    data = body
    inflater = zlib.decompressobj(wbits)
    try:
        while True:
            # max_length is at least 1 here (0 would mean "no limit").
            chunk = inflater.decompress(data, max_bytes + 1 - total)
            total += len(chunk)
            if total > max_bytes:
                raise BodyTooLarge(max_bytes)
            out.append(chunk)
            if inflater.eof:
                data = inflater.unused_data
                if wbits > zlib.MAX_WBITS and data:  # concatenated gzip members: one stream
                    inflater = zlib.decompressobj(wbits)
                    continue
                break
            data = inflater.unconsumed_tail
            if not data and not chunk:
                raise DecodeError(f"the {name} body is truncated")
    except zlib.error as e:
        raise DecodeError(f"the body is not valid {name}: {e}") from e
    return b"".join(out)


def decode_export(
    body: bytes, *, content_type: str, content_encoding: str | None, max_bytes: int
) -> Decoded:
    """The spans of one OTLP/HTTP trace export body.

    Args:
        body: the request body as received.
        content_type: ``application/x-protobuf`` or ``application/json`` (parameters ignored).
        content_encoding: ``gzip``, ``deflate``, ``identity`` or None.
        max_bytes: the limit on the body once decompressed.

    Raises:
        UnsupportedMediaType: another content type or encoding (415).
        BodyTooLarge: over ``max_bytes`` once decompressed (413).
        DecodeError: not a readable export request (400).
    """
    kind = media_type(content_type)
    if kind not in CONTENT_TYPES:
        raise UnsupportedMediaType(
            f"content-type {content_type!r} is not supported",
            hint=f"send {PROTOBUF} or {JSON}",
        )
    return decode_body(inflate(body, content_encoding, max_bytes), kind)


def parse_protobuf(raw: bytes, kind: type[M], signal: str) -> M:
    """``raw`` as a ``kind`` export request (``signal``: trace or log), or a ``DecodeError``."""
    request: M = kind()
    try:
        request.ParseFromString(raw)
    except ProtobufDecodeError as e:
        raise DecodeError(
            f"the body is not a protobuf {kind.DESCRIPTOR.name}",
            hint=f"an OTLP/HTTP {signal} exporter sends one; check the endpoint is /v1/{signal}s",
        ) from e
    return request


def decode_body(raw: bytes, kind: str) -> Decoded:
    """The spans of an uncompressed body of media type ``kind`` (PROTOBUF or JSON)."""
    if kind == PROTOBUF:
        return decode_request(parse_protobuf(raw, ExportTraceServiceRequest, "trace"))
    return decode_json(raw)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def _decoded(spans: list[Span], reasons: dict[str, int]) -> Decoded:
    message = "; ".join(f"{n} span(s) {why}" for why, n in reasons.items())
    return Decoded(spans, sum(reasons.values()), message)


# --- OTLP/JSON -------------------------------------------------------------------------------
# Read straight from the parsed JSON (json_format.ParseDict is ~10x slower), following the
# proto3 JSON mapping as ParseDict does: lowerCamelCase or original field names, int64 as
# numbers or strings, enums as numbers or names (an unknown name reads as 0), bytes as base64,
# null as the default, unknown fields ignored; ids are hex (an id that is not hex rejects its
# span). A value of the wrong type is a DecodeError for the whole body, as with ParseDict.

_KINDS: dict[str, int] = dict(PbSpan.SpanKind.items())
_STATUS_CODES: dict[str, int] = dict(Status.StatusCode.items())
_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_INT32 = (-(2**31), 2**31 - 1)
_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class _Shape(ValueError):
    """A JSON value of the wrong type or out of range."""


def decode_json(raw: bytes) -> Decoded:
    """The spans of an OTLP/JSON ``ExportTraceServiceRequest``."""
    return read_json(raw, "ExportTraceServiceRequest", _json_request)


def read_json(raw: bytes, what: str, read: Callable[[dict[str, Any]], T]) -> T:
    """``read`` over an OTLP/JSON body; a body that is not JSON or not a ``what`` (a value of
    the wrong type anywhere) is a ``DecodeError``."""
    try:
        # orjson, not json: it refuses lone surrogates (json.loads lets "\ud800" through, and
        # such a string cannot be stored), and is faster.
        doc = orjson.loads(raw)
    except (ValueError, RecursionError) as e:
        raise DecodeError(f"the body is not JSON: {_first_line(e)}") from e
    try:
        return read(_obj(doc, "the body"))
    except (_Shape, ValueError, TypeError, RecursionError, binascii.Error) as e:
        raise DecodeError(f"the body is not an OTLP/JSON {what}: {_first_line(e)}") from e


def _json_request(doc: dict[str, Any]) -> Decoded:
    spans: list[Span] = []
    reasons: dict[str, int] = {}
    attrs = _json_attrs
    for resource_spans in _list(_field(doc, "resourceSpans", "resource_spans")):
        resource_spans = _obj(resource_spans, "resourceSpans[]")
        resource = _obj(resource_spans.get("resource"), "resource")
        resource_attrs = attrs(resource.get("attributes"))
        for scope_spans in _list(_field(resource_spans, "scopeSpans", "scope_spans")):
            scope_spans = _obj(scope_spans, "scopeSpans[]")
            scope = _obj(scope_spans.get("scope"), "scope")
            scope_name = _str(scope.get("name"))
            scope_version = _str(scope.get("version"))
            for span in _list(scope_spans.get("spans")):
                span = _obj(span, "spans[]")
                trace_id = _hex(_field(span, "traceId", "trace_id"))
                span_id = _hex(_field(span, "spanId", "span_id"))
                parent = _hex(_field(span, "parentSpanId", "parent_span_id"))
                status = _obj(span.get("status"), "status")
                decoded = Span(
                    trace_id=trace_id.hex(),
                    span_id=span_id.hex(),
                    parent_span_id=parent.hex(),
                    name=_str(span.get("name")),
                    kind=_enum(span.get("kind"), _KINDS),
                    start_time_unix_nano=_int(
                        _field(span, "startTimeUnixNano", "start_time_unix_nano"), _UINT64
                    ),
                    end_time_unix_nano=_int(
                        _field(span, "endTimeUnixNano", "end_time_unix_nano"), _UINT64
                    ),
                    status_code=_enum(status.get("code"), _STATUS_CODES),
                    status_message=_str(status.get("message")),
                    attributes=attrs(span.get("attributes")),
                    events=[_json_event(e) for e in _list(span.get("events"))],
                    resource=resource_attrs,
                    scope_name=scope_name,
                    scope_version=scope_version,
                )
                links = [_json_link(k) for k in _list(span.get("links"))]
                if links:
                    decoded.links = [SpanLink(t.hex(), i.hex(), a) for t, i, a in links]
                problem = _bad_ids(trace_id, span_id, parent)
                if not problem and links and _bad_links([(t, i) for t, i, _ in links]):
                    problem = _BAD_LINK
                if problem:
                    reasons[problem] = reasons.get(problem, 0) + 1
                else:
                    spans.append(decoded)
    return _decoded(spans, reasons)


def _json_event(event: Any) -> SpanEvent:
    event = _obj(event, "events[]")
    return SpanEvent(
        _str(event.get("name")),
        _int(_field(event, "timeUnixNano", "time_unix_nano"), _UINT64),
        _json_attrs(event.get("attributes")),
    )


def _json_link(link: Any) -> tuple[bytes, bytes, dict[str, Any]]:
    link = _obj(link, "links[]")
    return (
        _hex(_field(link, "traceId", "trace_id")),
        _hex(_field(link, "spanId", "span_id")),
        _json_attrs(link.get("attributes")),
    )


def _json_attrs(key_values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in _list(key_values):
        if type(kv) is not dict:
            raise _Shape(f"an attribute is a {type(kv).__name__}, not an object")
        out[_str(kv.get("key"))] = _json_any(kv.get("value"))
    return out


def _json_any(value: Any) -> Any:
    if value is None:
        return None
    if type(value) is not dict:
        raise _Shape(f"an AnyValue is a {type(value).__name__}, not an object")
    text = value.get("stringValue")
    if type(text) is str:  # the common case first
        return text
    for camel, snake, read in _ANY_FIELDS:
        item = value.get(camel)
        if item is None:
            item = value.get(snake)
        if item is not None:
            return read(item)
    return None


def _field(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _obj(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise _Shape(f"{what} is a {type(value).__name__}, not an object")
    return value


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise _Shape(f"a {type(value).__name__} where a list belongs")
    return value


def _str(value: Any) -> str:
    if value is None:
        return ""
    if type(value) is not str:
        raise _Shape(f"a {type(value).__name__} where a string belongs")
    return value


def _int(value: Any, bounds: tuple[int, int]) -> int:
    if value is None:
        return 0
    kind = type(value)
    number: int
    if kind is int or kind is str or (kind is float and value.is_integer()):
        number = int(value)
    else:
        raise _Shape(f"{value!r} is not an integer")
    if not bounds[0] <= number <= bounds[1]:
        raise _Shape(f"{number} is out of range")
    return number


def _enum(value: Any, names: dict[str, int]) -> int:
    if type(value) is str:
        return names.get(value, 0)
    return _int(value, _INT32)


def _hex(value: Any) -> bytes:
    if value is None:
        return b""
    if type(value) is not str:
        raise _Shape(f"an id is a {type(value).__name__}, not a hex string")
    try:
        return bytes.fromhex(value)
    except ValueError:
        return b""  # not hex: that span alone is rejected


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _Shape(f"{value!r} is not a boolean")
    return value


def _double(value: Any) -> float:
    kind = type(value)
    if kind is float or kind is int:
        return float(value)
    if kind is str:
        return _FLOAT_WORDS[value] if value in _FLOAT_WORDS else float(value)
    raise _Shape(f"{value!r} is not a number")


def _bytes(value: Any) -> bytes:
    text = _str(value).replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def _array(value: Any) -> list[Any]:
    return [_json_any(v) for v in _list(_obj(value, "arrayValue").get("values"))]


def _kvlist(value: Any) -> dict[str, Any]:
    return _json_attrs(_obj(value, "kvlistValue").get("values"))


_ANY_FIELDS = (
    ("stringValue", "string_value", _str),
    ("boolValue", "bool_value", _bool),
    ("intValue", "int_value", lambda v: _int(v, _INT64)),
    ("doubleValue", "double_value", _double),
    ("bytesValue", "bytes_value", _bytes),
    ("arrayValue", "array_value", _array),
    ("kvlistValue", "kvlist_value", _kvlist),
)


# --- protobuf --------------------------------------------------------------------------------


def decode_request(request: ExportTraceServiceRequest) -> Decoded:
    """The spans of a parsed export request (the gRPC receiver starts here)."""
    spans: list[Span] = []
    append = spans.append
    reasons: dict[str, int] = {}
    attrs = _attrs
    for resource_spans in request.resource_spans:
        resource = attrs(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            scope_name = scope.name
            scope_version = scope.version
            for span in scope_spans.spans:
                trace_id = span.trace_id
                span_id = span.span_id
                parent = span.parent_span_id
                problem = _bad_ids(trace_id, span_id, parent)
                if problem:
                    reasons[problem] = reasons.get(problem, 0) + 1
                    continue
                links = span.links
                if links and _bad_links([(k.trace_id, k.span_id) for k in links]):
                    reasons[_BAD_LINK] = reasons.get(_BAD_LINK, 0) + 1
                    continue
                status = span.status
                events = span.events
                append(
                    Span(
                        trace_id=trace_id.hex(),
                        span_id=span_id.hex(),
                        parent_span_id=parent.hex(),
                        name=span.name,
                        kind=span.kind,
                        start_time_unix_nano=span.start_time_unix_nano,
                        end_time_unix_nano=span.end_time_unix_nano,
                        status_code=status.code,
                        status_message=status.message,
                        attributes=attrs(span.attributes),
                        events=[
                            SpanEvent(e.name, e.time_unix_nano, attrs(e.attributes)) for e in events
                        ]
                        if events
                        else [],
                        resource=resource,
                        scope_name=scope_name,
                        scope_version=scope_version,
                        links=[
                            SpanLink(k.trace_id.hex(), k.span_id.hex(), attrs(k.attributes))
                            for k in links
                        ]
                        if links
                        else [],
                    )
                )
    return _decoded(spans, reasons)


def _bad_ids(trace_id: bytes, span_id: bytes, parent: bytes) -> str:
    """Why these ids are unusable, or "" when they are fine."""
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE:
        return "with a trace id that is not 16 bytes, or is all zero"
    if len(span_id) != 8 or span_id == _ZERO_SPAN:
        return "with a span id that is not 8 bytes, or is all zero"
    if parent and len(parent) != 8:
        return "with a parent span id that is not 8 bytes"
    return ""


_BAD_LINK = "with a link whose trace id is not 16 bytes or span id not 8 bytes (or all zero)"


def _bad_links(ids: list[tuple[bytes, bytes]]) -> bool:
    return any(len(t) != 16 or t == _ZERO_TRACE or len(s) != 8 or s == _ZERO_SPAN for t, s in ids)


def _attrs(key_values: Any) -> dict[str, Any]:
    """OTLP ``KeyValue``s → a dict (a repeated key: the last one wins)."""
    # Locals and the unbound WhichOneof: ~10% off the hottest loop of ingest.
    which_oneof, scalar, get = _WHICH_ONEOF, _SCALAR, getattr
    out: dict[str, Any] = {}
    for kv in key_values:
        value = kv.value
        which = which_oneof(value, "value")
        if which in scalar:  # the common case: one set lookup, one getattr
            out[kv.key] = get(value, which)
        else:
            out[kv.key] = _any_value(value, which)
    return out


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as Python: str, bool, int, float, bytes, list, dict or None."""
    return _any_value(value, value.WhichOneof("value"))


def _any_value(value: Any, which: str | None) -> Any:
    if which is None:
        return None
    if which == "array_value":
        return [_any_value(v, v.WhichOneof("value")) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attrs(value.kvlist_value.values)
    return getattr(value, which)
