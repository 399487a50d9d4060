"""decode_export: OTLP protobuf and OTLP/JSON export bodies into evalsi Spans."""

from __future__ import annotations

import base64
import gzip
import json
import zlib

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.server.otlp._decode import (
    BodyTooLarge,
    Decoded,
    DecodeError,
    UnsupportedMediaType,
    decode_export,
)
from tests.support.otlp_fixtures import genai_attributes, genai_request, kv

PB = "application/x-protobuf"
CAP = 1 << 24
TRACE = bytes(range(1, 17))
SPAN = bytes(range(1, 9))
PARENT = bytes(range(9, 17))


def decode(
    body: bytes, content_type: str = PB, encoding: str | None = None, cap: int = CAP
) -> Decoded:
    return decode_export(body, content_type=content_type, content_encoding=encoding, max_bytes=cap)


def one_span_request(**span_fields: object) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    span = scope_spans.spans.add()
    span.trace_id, span.span_id = TRACE, SPAN
    for name, value in span_fields.items():
        setattr(span, name, value)
    return request


def test_every_span_field_arrives() -> None:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend([kv("service.name", "svc"), kv("pid", 42)])
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name, scope_spans.scope.version = "my.lib", "1.2.3"
    span = scope_spans.spans.add()
    span.trace_id, span.span_id, span.parent_span_id = TRACE, SPAN, PARENT
    span.name, span.kind = "chat", 3
    span.start_time_unix_nano, span.end_time_unix_nano = 1_000, 2_500
    span.status.code, span.status.message = 2, "boom"
    span.attributes.extend(
        [
            kv("s", "text"),
            kv("b", True),
            kv("i", -(2**63)),
            kv("f", 0.5),
            kv("raw", b"\x00\xff"),
            kv("list", ["a", 1, [2.5]]),
            kv("map", {"k": {"inner": False}}),
        ]
    )
    span.attributes.add(key="unset")  # an AnyValue with nothing set
    event = span.events.add(name="exception", time_unix_nano=2_000)
    event.attributes.append(kv("exception.type", "ValueError"))

    decoded = decode(request.SerializeToString())

    assert decoded.rejected == 0
    assert decoded.error_message == ""
    [got] = decoded.spans
    assert got.trace_id == "0102030405060708090a0b0c0d0e0f10"
    assert got.span_id == "0102030405060708"
    assert got.parent_span_id == "090a0b0c0d0e0f10"
    assert (got.name, got.kind, got.start_time_unix_nano, got.end_time_unix_nano) == (
        "chat",
        3,
        1_000,
        2_500,
    )
    assert (got.status_code, got.status_message) == (2, "boom")
    assert got.attributes == {
        "s": "text",
        "b": True,
        "i": -(2**63),
        "f": 0.5,
        "raw": b"\x00\xff",
        "list": ["a", 1, [2.5]],
        "map": {"k": {"inner": False}},
        "unset": None,
    }
    assert type(got.attributes["b"]) is bool
    assert type(got.attributes["i"]) is int
    assert [(e.name, e.time_unix_nano, e.attributes) for e in got.events] == [
        ("exception", 2_000, {"exception.type": "ValueError"})
    ]
    assert got.resource == {"service.name": "svc", "pid": 42}
    assert (got.scope_name, got.scope_version) == ("my.lib", "1.2.3")


def test_resource_is_decoded_once_and_shared() -> None:
    request = genai_request(16)
    other = request.resource_spans.add()
    other.resource.attributes.append(kv("service.name", "other"))
    other.scope_spans.add().spans.extend(request.resource_spans[0].scope_spans[0].spans[:2])

    spans = decode(request.SerializeToString()).spans

    assert len(spans) == 18
    first = spans[0].resource
    assert all(s.resource is first for s in spans[:16])
    assert spans[16].resource is spans[17].resource
    assert spans[16].resource == {"service.name": "other"}


def test_genai_request_decodes_whole() -> None:
    request = genai_request(64)
    spans = decode(request.SerializeToString()).spans
    assert len(spans) == 64
    assert spans[5].attributes == genai_attributes(5)
    assert spans[0].parent_span_id == ""
    assert spans[1].parent_span_id == spans[0].span_id


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"trace_id": b""}, "trace id"),
        ({"trace_id": bytes(16)}, "trace id"),
        ({"trace_id": TRACE[:15]}, "trace id"),
        ({"trace_id": TRACE + b"\x01"}, "trace id"),
        ({"span_id": b""}, "span id"),
        ({"span_id": bytes(8)}, "span id"),
        ({"span_id": SPAN + SPAN}, "span id"),
        ({"parent_span_id": SPAN[:4]}, "parent span id"),
    ],
)
def test_a_span_with_bad_ids_is_rejected_alone(fields: dict[str, bytes], why: str) -> None:
    request = one_span_request(**fields)
    good = request.resource_spans[0].scope_spans[0].spans.add()
    good.trace_id, good.span_id, good.name = TRACE, PARENT, "kept"

    decoded = decode(request.SerializeToString())

    assert [s.name for s in decoded.spans] == ["kept"]
    assert decoded.rejected == 1
    assert f"1 span(s) with a {why}" in decoded.error_message


def test_links_arrive_with_their_attributes() -> None:
    request = one_span_request()
    span = request.resource_spans[0].scope_spans[0].spans[0]
    other_trace = bytes(range(20, 36))
    link = span.links.add(trace_id=other_trace, span_id=PARENT)
    link.attributes.append(kv("handoff", "planner"))
    span.links.add(trace_id=TRACE, span_id=PARENT)

    [got] = decode(request.SerializeToString()).spans

    assert [(k.trace_id, k.span_id, k.attributes) for k in got.links] == [
        (other_trace.hex(), PARENT.hex(), {"handoff": "planner"}),
        (TRACE.hex(), PARENT.hex(), {}),
    ]
    [plain] = decode(one_span_request().SerializeToString()).spans
    assert plain.links == []


@pytest.mark.parametrize(
    "link", [{"trace_id": TRACE[:8], "span_id": PARENT}, {"trace_id": TRACE, "span_id": bytes(8)}]
)
def test_a_span_with_a_bad_link_is_rejected_alone(link: dict[str, bytes]) -> None:
    request = one_span_request()
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].links.add(**link)
    spans.add(trace_id=TRACE, span_id=PARENT, name="kept")

    decoded = decode(request.SerializeToString())

    assert [s.name for s in decoded.spans] == ["kept"]
    assert decoded.rejected == 1
    assert "1 span(s) with a link whose trace id is not 16 bytes" in decoded.error_message


def test_rejections_are_counted_by_reason() -> None:
    request = one_span_request(trace_id=b"")
    spans = request.resource_spans[0].scope_spans[0].spans
    spans.add(trace_id=b"", span_id=SPAN)
    spans.add(trace_id=TRACE, span_id=b"")
    spans.add(trace_id=TRACE, span_id=SPAN)

    decoded = decode(request.SerializeToString())

    assert (len(decoded.spans), decoded.rejected) == (1, 3)
    assert decoded.error_message.startswith("2 span(s) with a trace id")
    assert "; 1 span(s) with a span id" in decoded.error_message


def test_an_empty_request_is_fine() -> None:
    decoded = decode(b"")
    assert (decoded.spans, decoded.rejected) == ([], 0)


@pytest.mark.parametrize("body", [b"\xff\xff\xff", b"\x0a\x05ab", b"not protobuf at all"])
def test_garbage_protobuf_is_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError, match="protobuf ExportTraceServiceRequest"):
        decode(body)


# --- OTLP/JSON -------------------------------------------------------------------------------

JSON_DOC = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
            "schemaUrl": "https://opentelemetry.io/schemas/1.27.0",
            "scopeSpans": [
                {
                    "scope": {"name": "lib", "version": "2"},
                    "spans": [
                        {
                            "traceId": "5B8EFFF798038103D269B633813FC60C",
                            "spanId": "EEE19B7EC3C1B174",
                            "parentSpanId": "eee19b7ec3c1b173",
                            "name": "root",
                            "kind": 2,
                            "startTimeUnixNano": "1544712660000000000",
                            "endTimeUnixNano": 1544712661000000000,
                            "attributes": [
                                {"key": "n", "value": {"intValue": "9007199254740993"}},
                                {"key": "d", "value": {"doubleValue": 1.5}},
                                {"key": "b", "value": {"boolValue": True}},
                                {"key": "raw", "value": {"bytesValue": "AP8="}},
                                {
                                    "key": "arr",
                                    "value": {"arrayValue": {"values": [{"stringValue": "x"}]}},
                                },
                                {
                                    "key": "map",
                                    "value": {
                                        "kvlistValue": {
                                            "values": [{"key": "k", "value": {"intValue": 3}}]
                                        }
                                    },
                                },
                            ],
                            "events": [
                                {"timeUnixNano": "1544712660500000000", "name": "ev", "x": 1}
                            ],
                            "links": [{"traceId": "ab" * 16, "spanId": "cd" * 8}],
                            "status": {"code": 2, "message": "bad"},
                            "someFutureField": {"nested": [1, 2]},
                        }
                    ],
                }
            ],
        }
    ]
}


def test_otlp_json_with_hex_ids() -> None:
    decoded = decode(json.dumps(JSON_DOC).encode(), "application/json; charset=utf-8")

    [span] = decoded.spans
    assert span.trace_id == "5b8efff798038103d269b633813fc60c"
    assert span.span_id == "eee19b7ec3c1b174"
    assert span.parent_span_id == "eee19b7ec3c1b173"
    assert (span.name, span.kind, span.status_code, span.status_message) == ("root", 2, 2, "bad")
    assert span.start_time_unix_nano == 1544712660000000000
    assert span.end_time_unix_nano == 1544712661000000000
    assert span.attributes == {
        "n": 9007199254740993,
        "d": 1.5,
        "b": True,
        "raw": b"\x00\xff",
        "arr": ["x"],
        "map": {"k": 3},
    }
    assert [(e.name, e.time_unix_nano) for e in span.events] == [("ev", 1544712660500000000)]
    assert span.resource == {"service.name": "svc"}
    assert (span.scope_name, span.scope_version) == ("lib", "2")


def test_otlp_json_links() -> None:
    doc = json.loads(json.dumps(JSON_DOC))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    link = {"traceId": TRACE.hex(), "spanId": SPAN.hex(), "attributes": [kv_json("k", "v")]}
    spans[0]["links"] = [link]
    spans.append({**spans[0], "spanId": PARENT.hex(), "links": [{**link, "spanId": "00" * 8}]})

    decoded = decode(json.dumps(doc).encode(), "application/json")

    [span] = decoded.spans
    assert [(k.trace_id, k.span_id, k.attributes) for k in span.links] == [
        (TRACE.hex(), SPAN.hex(), {"k": "v"})
    ]
    assert decoded.rejected == 1
    assert "link" in decoded.error_message


def kv_json(key: str, text: str) -> dict[str, object]:
    return {"key": key, "value": {"stringValue": text}}


def test_otlp_json_leniency_enum_names_and_snake_case() -> None:
    doc = {
        "resource_spans": [
            {
                "scope_spans": [
                    {
                        "spans": [
                            {
                                "trace_id": "0102030405060708090a0b0c0d0e0f10",
                                "span_id": "0102030405060708",
                                "kind": "SPAN_KIND_SERVER",
                                "status": {"code": "STATUS_CODE_OK"},
                            }
                        ]
                    }
                ]
            }
        ]
    }
    [span] = decode(json.dumps(doc).encode(), "application/json").spans
    assert (span.trace_id, span.kind, span.status_code) == (TRACE.hex(), 2, 1)


def test_otlp_json_bad_hex_rejects_that_span_only() -> None:
    doc = json.loads(json.dumps(JSON_DOC))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({**spans[0], "traceId": "zz" * 16})
    spans.append({**spans[0], "spanId": "0102"})

    decoded = decode(json.dumps(doc).encode(), "application/json")

    assert (len(decoded.spans), decoded.rejected) == (1, 2)


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[]",
        b'"text"',
        b'{"resourceSpans": 5}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}',
        b"[" * 100_000,
        *(
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
            for span in [
                {"attributes": ["k"]},
                {"attributes": [{"key": "k", "value": "v"}]},
                {"attributes": [{"key": 1, "value": {"stringValue": "v"}}]},
                {"attributes": [{"key": "k", "value": {"boolValue": "yes"}}]},
                {"attributes": [{"key": "k", "value": {"intValue": 1.5}}]},
                {"attributes": [{"key": "k", "value": {"intValue": str(2**63)}}]},
                {"attributes": [{"key": "k", "value": {"doubleValue": "many"}}]},
                {"attributes": [{"key": "k", "value": {"bytesValue": "!!"}}]},
                {"attributes": [{"key": "k", "value": {"arrayValue": {"values": {}}}}]},
                {"events": {"name": "e"}},
                {"events": [{"timeUnixNano": -1}]},
                {"status": {"code": True}},
                {"status": []},
                {"name": 5},
                {"kind": 2**40},
            ]
        ),
        b"\xff\xfe",
    ],
)
def test_bad_json_is_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(body, "application/json")


# --- content types and encodings -------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "", "application/grpc", "application/jsonx"]
)
def test_other_content_types_are_unsupported(content_type: str) -> None:
    with pytest.raises(UnsupportedMediaType):
        decode(b"", content_type)


def test_other_encodings_are_unsupported() -> None:
    with pytest.raises(UnsupportedMediaType, match="content-encoding 'br'"):
        decode(b"", encoding="br")


def test_gzip_and_deflate() -> None:
    body = genai_request(8).SerializeToString()
    for encoded, encoding in [
        (gzip.compress(body), "gzip"),
        (gzip.compress(body[:100]) + gzip.compress(body[100:]), "gzip"),  # two members
        (zlib.compress(body), "deflate"),
        (zlib.compress(body)[2:-4], "deflate"),  # raw deflate
        (body, "identity"),
    ]:
        assert len(decode(encoded, encoding=encoding).spans) == 8, encoding


def test_a_gzip_bomb_stops_at_the_cap() -> None:
    bomb = gzip.compress(bytes(50_000_000))
    assert len(bomb) < 60_000
    with pytest.raises(BodyTooLarge, match="1000000 bytes once decompressed"):
        decode(bomb, encoding="gzip", cap=1_000_000)


def test_the_cap_applies_without_compression_too() -> None:
    with pytest.raises(BodyTooLarge):
        decode(bytes(11), cap=10)
    assert decode(bytes(0), cap=0).spans == []


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        (gzip.compress(b"x" * 1000)[:-12], "gzip"),
        (b"not gzip", "gzip"),
        (b"not deflate", "deflate"),
        (gzip.compress(b"") + b"trailing", "gzip"),
    ],
)
def test_broken_compression_is_a_decode_error(body: bytes, encoding: str) -> None:
    with pytest.raises(DecodeError):
        decode(body, encoding=encoding)


def test_json_hex_rewrite_does_not_touch_other_base64_fields() -> None:
    doc = json.loads(json.dumps(JSON_DOC))
    [span] = decode(json.dumps(doc).encode(), "application/json").spans
    assert span.attributes["raw"] == base64.b64decode("AP8=")
