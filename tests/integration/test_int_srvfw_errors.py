"""Bad input and failures, on every protocol: oversize bodies (413 / RESOURCE_EXHAUSTED),
malformed JSON and protobuf, unknown fields, evalsi's own errors and bugs (500/INTERNAL with
no traceback or exception text in the answer)."""

from __future__ import annotations

import contextlib
import http.client
import json
import struct
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as rs
from tests.integration.test_int_srvfw_fakes import SECRET, fake_services, fake_state
from tests.support.asgi_server import AsgiServer
from tests.support.server_state import serving

LIMIT = 4096
EVALUATE = "/evalsi.v1alpha1.EvaluationService/Evaluate"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiServer]:
    state = fake_state(tmp_path_factory.mktemp("srvfw-err"), max_body_bytes=LIMIT)
    with serving(state, fake_services()) as s:
        yield s


@pytest.fixture
def channel(server: AsgiServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(
        f"{server.host}:{server.port}", options=[("grpc.enable_http_proxy", 0)]
    ) as ch:
        yield ch


def _post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()


def _evaluate_json(*ids: str, pad: int = 0) -> bytes:
    req = ev.EvaluateRequest()
    for rid in ids:
        rec = req.records.add(id=rid)
        rec.output.text = "x" * pad
    return json_format.MessageToJson(req).encode()


def _grpc_evaluate(channel: grpc.Channel, raw: bool = False) -> Any:
    return channel.unary_unary(
        EVALUATE,
        request_serializer=(lambda b: b) if raw else ev.EvaluateRequest.SerializeToString,
        response_deserializer=ev.EvaluateResponse.FromString,
    )


def test_oversize_rest_body_is_413(server: AsgiServer) -> None:
    status, body = _post(server.url + "/v1alpha1/evaluate", _evaluate_json("a", pad=LIMIT))
    assert status == 413
    doc = json.loads(body)
    assert doc["code"] == "resource_exhausted"
    assert str(LIMIT) in doc["message"]


def test_oversize_chunked_rest_body_without_length_is_413(server: AsgiServer) -> None:
    chunks = iter([b'{"records": [', b"{}," * LIMIT, b"{}]}"])
    with contextlib.closing(
        http.client.HTTPConnection(server.host, server.port, timeout=10)
    ) as conn:
        # the server may answer 413 and close before the whole body is sent
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.request(
                "POST",
                "/v1alpha1/evaluate",
                body=chunks,
                headers={"Content-Type": "application/json"},
                encode_chunked=True,
            )
        response = conn.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["code"] == "resource_exhausted"


def test_oversize_grpc_and_connect_are_resource_exhausted(
    server: AsgiServer, channel: grpc.Channel
) -> None:
    req = ev.EvaluateRequest()
    req.records.add(id="a").output.text = "x" * LIMIT
    with pytest.raises(grpc.RpcError) as err:
        _grpc_evaluate(channel)(req, timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    _status, body = _post(server.url + EVALUATE, req.SerializeToString(), "application/proto")
    assert json.loads(body)["code"] == "resource_exhausted"


@pytest.mark.parametrize("path", ["/v1alpha1/evaluate", EVALUATE])
def test_malformed_json_is_400(server: AsgiServer, path: str) -> None:
    status, body = _post(server.url + path, b'{"records": [')
    assert status == 400
    doc = json.loads(body)
    assert doc["code"] == "invalid_argument"
    assert "Traceback" not in doc["message"]
    assert doc["message"]


def test_malformed_json_names_the_problem_on_rest(server: AsgiServer) -> None:
    status, body = _post(server.url + "/v1alpha1/evaluate", b'{"records": [')
    assert "malformed JSON" in json.loads(body)["message"]
    status, body = _post(server.url + "/v1alpha1/evaluate", b"[1, 2]")
    assert status == 400
    assert "expected a JSON object" in json.loads(body)["message"]
    status, body = _post(server.url + "/v1alpha1/evaluate", b'{"records": "nope"}')
    assert status == 400
    assert "records" in json.loads(body)["message"]


@pytest.mark.parametrize("path", ["/v1alpha1/evaluate", EVALUATE])
def test_unknown_json_field_is_400_naming_it(server: AsgiServer, path: str) -> None:
    status, body = _post(server.url + path, b'{"records": [], "evaluatorz": []}')
    assert status == 400
    doc = json.loads(body)
    assert doc["code"] == "invalid_argument"
    assert "evaluatorz" in doc["message"]


def test_unknown_query_parameter_is_400(server: AsgiServer) -> None:
    status, body = _get(server.url + "/v1alpha1/runs?pageSise=3")
    assert status == 400
    assert "pageSise" in json.loads(body)["message"]
    status, body = _get(server.url + "/v1alpha1/runs?pageSize=many")
    assert status == 400
    assert "page_size" in json.loads(body)["message"]


def test_malformed_protobuf_is_invalid_argument(server: AsgiServer, channel: grpc.Channel) -> None:
    garbage = b"\xff\xff\xff\xff\x0f"
    status, body = _post(server.url + EVALUATE, garbage, "application/proto")
    assert status == 400
    assert json.loads(body)["code"] == "invalid_argument"
    with pytest.raises(grpc.RpcError) as err:
        _grpc_evaluate(channel, raw=True)(garbage, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    framed = struct.pack(">BI", 0, len(garbage)) + garbage
    status, body = _post(server.url + EVALUATE, framed, "application/grpc-web+proto")
    assert b"grpc-status:3" in body.replace(b" ", b"") or status == 400


@pytest.mark.parametrize(
    ("rid", "status", "code", "grpc_code"),
    [
        ("bad", 400, "invalid_argument", grpc.StatusCode.INVALID_ARGUMENT),
        ("missing", 404, "not_found", grpc.StatusCode.NOT_FOUND),
        ("down", 503, "unavailable", grpc.StatusCode.UNAVAILABLE),
        ("boom", 500, "internal", grpc.StatusCode.INTERNAL),
    ],
)
def test_handler_errors_map_to_codes(
    server: AsgiServer,
    channel: grpc.Channel,
    rid: str,
    status: int,
    code: str,
    grpc_code: grpc.StatusCode,
) -> None:
    got, body = _post(server.url + "/v1alpha1/evaluate", _evaluate_json(rid))
    assert got == status
    doc = json.loads(body)
    assert doc["code"] == code
    assert set(doc) == {"code", "message", "details"}
    got, body = _post(server.url + EVALUATE, _evaluate_json(rid))
    assert json.loads(body)["code"] == code
    req = ev.EvaluateRequest()
    req.records.add(id=rid)
    with pytest.raises(grpc.RpcError) as err:
        _grpc_evaluate(channel)(req, timeout=10)
    assert err.value.code() == grpc_code
    for text in (body.decode(), doc["message"], err.value.details() or ""):
        assert SECRET not in text
        assert "Traceback" not in text
    if rid == "bad":
        assert "record 'bad' is bad" in doc["message"]
        assert "fix it" in doc["message"]


def test_stream_error_after_first_message(server: AsgiServer, channel: grpc.Channel) -> None:
    with urllib.request.urlopen(server.url + "/v1alpha1/runs/late-boom:watch", timeout=10) as r:
        lines = [json.loads(line) for line in r.read().splitlines()]
    assert len(lines) == 4
    assert lines[-1] == {
        "error": {"code": "internal", "message": lines[-1]["error"]["message"], "details": []}
    }
    assert SECRET not in json.dumps(lines)
    watch = channel.unary_stream(
        "/evalsi.v1alpha1.RunService/WatchRun",
        request_serializer=rs.WatchRunRequest.SerializeToString,
        response_deserializer=rs.WatchRunResponse.FromString,
    )
    stream = watch(rs.WatchRunRequest(id="late-boom"), timeout=10)
    got = []

    def drain() -> None:
        got.extend(stream)

    with pytest.raises(grpc.RpcError) as err:
        drain()
    assert len(got) == 3
    assert err.value.code() == grpc.StatusCode.INTERNAL
    # An error before the first message is an ordinary error response.
    status, body = _get(server.url + "/v1alpha1/runs/missing:watch")
    assert status == 404
    assert json.loads(body)["code"] == "not_found"


def test_wrong_method_is_405(server: AsgiServer) -> None:
    request = urllib.request.Request(server.url + "/v1alpha1/evaluate", method="GET")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    with err.value:
        assert err.value.code == 405
        assert err.value.headers["Allow"] == "POST"
