"""Property tests: no body crashes decode_export, and partial-success counts are exact."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.server.otlp._decode import BodyTooLarge, Decoded, DecodeError, decode_export
from tests.support.otlp_fixtures import genai_request, kv

PB, JS = "application/x-protobuf", "application/json"
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VALID = genai_request(4).SerializeToString()


def try_decode(body: bytes, content_type: str, encoding: str | None) -> Decoded | None:
    try:
        decoded = decode_export(
            body, content_type=content_type, content_encoding=encoding, max_bytes=1 << 20
        )
    except (DecodeError, BodyTooLarge):
        return None
    for span in decoded.spans:  # whatever is kept has usable ids
        assert len(span.trace_id) == 32
        assert int(span.trace_id, 16) != 0
        assert len(span.span_id) == 16
        assert int(span.span_id, 16) != 0
        assert len(span.parent_span_id) in (0, 16)
    assert decoded.rejected >= 0
    assert bool(decoded.error_message) == bool(decoded.rejected)
    return decoded


@SETTINGS
@given(
    body=st.binary(max_size=2048),
    content_type=st.sampled_from([PB, JS]),
    encoding=st.sampled_from([None, "gzip", "deflate"]),
)
def test_arbitrary_bytes_never_crash(body: bytes, content_type: str, encoding: str | None) -> None:
    try_decode(body, content_type, encoding)


@SETTINGS
@given(st.data())
def test_mutated_valid_payloads_never_crash(data: st.DataObject) -> None:
    body = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(len(body) // 2, len(body)))
    try_decode(bytes(body[:cut]), PB, None)
    try_decode(gzip.compress(bytes(body[:cut])), PB, "gzip")


@SETTINGS
@given(st.text(max_size=400), st.sampled_from(["traceId", "spanId", "kind", "attributes", "x"]))
def test_mutated_json_never_crashes(noise: str, key: str) -> None:
    doc: Any = json.loads(json.dumps(_as_otlp_json(genai_request(2))))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0][key] = noise
    spans[1][key] = [noise, {"value": noise}]
    try_decode(json.dumps(doc).encode(), JS, None)


ids = st.one_of(
    st.binary(min_size=0, max_size=20),
    st.sampled_from([bytes(16), bytes(8), b""]),
    st.binary(min_size=16, max_size=16),
    st.binary(min_size=8, max_size=8),
)


def usable(trace_id: bytes, span_id: bytes, parent: bytes) -> bool:
    """The acceptance rule, written independently of the decoder."""
    return (
        len(trace_id) == 16
        and any(trace_id)
        and len(span_id) == 8
        and any(span_id)
        and len(parent) in (0, 8)
    )


@SETTINGS
@given(st.lists(st.tuples(ids, ids, ids), max_size=30), st.booleans())
def test_partial_success_counts_are_exact(
    spans: list[tuple[bytes, bytes, bytes]], as_json: bool
) -> None:
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    for n, (trace_id, span_id, parent) in enumerate(spans):
        scope_spans.spans.add(
            trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=str(n)
        )
    if as_json:
        body, content_type = json.dumps(_as_otlp_json(request)).encode(), JS
    else:
        body, content_type = request.SerializeToString(), PB

    decoded = try_decode(body, content_type, None)

    assert decoded is not None
    expected = [str(n) for n, ids_ in enumerate(spans) if usable(*ids_)]
    assert [s.name for s in decoded.spans] == expected
    assert decoded.rejected + len(decoded.spans) == len(spans)


def _as_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """proto3 JSON with the ids rewritten to hex, as OTLP/JSON senders write them."""
    doc: dict[str, Any] = json_format.MessageToDict(request)
    for resource_spans in doc.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex().upper()
    return doc


# --- the JSON reader agrees with the protobuf one ---------------------------------------------

scalars = st.one_of(
    st.none(),
    st.text(max_size=8),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.binary(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
attributes = st.dictionaries(st.text(max_size=6), values, max_size=4)
span_fields = st.fixed_dictionaries(
    {
        "trace_id": st.sampled_from([bytes(range(1, 17)), bytes(16), b"\x07" * 3]),
        "span_id": st.binary(min_size=8, max_size=8),
        "parent_span_id": st.sampled_from([b"", b"\x01" * 8]),
        "name": st.text(max_size=8),
        "kind": st.integers(0, 5),
        "start_time_unix_nano": st.integers(0, 2**64 - 1),
        "end_time_unix_nano": st.integers(0, 2**64 - 1),
        "status": st.tuples(st.integers(0, 2), st.text(max_size=5)),
        "attributes": attributes,
        "events": st.lists(
            st.tuples(st.text(max_size=5), st.integers(0, 2**64 - 1), attributes), max_size=2
        ),
        "links": st.lists(
            st.tuples(
                st.sampled_from([bytes(range(1, 17)), b"\x02" * 4]),
                st.binary(min_size=8, max_size=8),
                attributes,
            ),
            max_size=2,
        ),
    }
)


def build_request(resources: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> Any:
    request = ExportTraceServiceRequest()
    for resource, spans in resources:
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(kv(k, v) for k, v in resource.items())
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.name = "scope"
        for fields in spans:
            span = scope_spans.spans.add(
                trace_id=fields["trace_id"],
                span_id=fields["span_id"],
                parent_span_id=fields["parent_span_id"],
                name=fields["name"],
                kind=fields["kind"],
                start_time_unix_nano=fields["start_time_unix_nano"],
                end_time_unix_nano=fields["end_time_unix_nano"],
            )
            span.status.code, span.status.message = fields["status"]
            span.attributes.extend(kv(k, v) for k, v in fields["attributes"].items())
            for name, at, event_attributes in fields["events"]:
                event = span.events.add(name=name, time_unix_nano=at)
                event.attributes.extend(kv(k, v) for k, v in event_attributes.items())
            for trace_id, span_id, link_attributes in fields["links"]:
                link = span.links.add(trace_id=trace_id, span_id=span_id)
                link.attributes.extend(kv(k, v) for k, v in link_attributes.items())
    return request


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(attributes, st.lists(span_fields, max_size=3)), max_size=2),
    st.booleans(),
    st.booleans(),
)
def test_json_and_protobuf_decode_the_same(
    resources: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    original_names: bool,
    enum_numbers: bool,
) -> None:
    request = build_request(resources)
    doc = json_format.MessageToDict(
        request,
        preserving_proto_field_name=original_names,
        use_integers_for_enums=enum_numbers,
    )
    _ids_to_hex(doc)

    from_json = try_decode(json.dumps(doc).encode(), JS, None)
    from_protobuf = try_decode(request.SerializeToString(), PB, None)

    assert from_json is not None
    assert from_json == from_protobuf


ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _ids_to_hex(doc: Any) -> None:
    """Every trace/span id in a proto3 JSON document, base64 → hex (either key style)."""
    if isinstance(doc, list):
        for item in doc:
            _ids_to_hex(item)
    elif isinstance(doc, dict):
        for key, value in doc.items():
            if key in (
                "traceId",
                "spanId",
                "parentSpanId",
                "trace_id",
                "span_id",
                "parent_span_id",
            ):
                doc[key] = base64.b64decode(value).hex()
            else:
                _ids_to_hex(value)
