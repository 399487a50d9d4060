"""One handler, every protocol: Connect JSON and protobuf, gRPC (a real grpcio client over
h2c), gRPC-Web, connectrpc's own client and the REST route all reach the same handler method
on one loopback port and get the same answer. Plus gRPC health and reflection, /metrics,
/openapi.json."""

from __future__ import annotations

import json
import re
import struct
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, json_format
from openapi_spec_validator import validate

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as rs
from evalsi._proto.evalsi.v1alpha1.evaluation_service_connect import (
    EvaluationServiceClientSync,
)
from evalsi._proto.grpc.health.v1 import health_pb2
from evalsi._proto.grpc.reflection.v1 import reflection_pb2
from evalsi.server._run_manager import RunManager
from tests.integration.test_int_srvfw_fakes import FakeEvaluation, fake_services, fake_state
from tests.support.asgi_server import AsgiServer
from tests.support.server_state import serving

EVALUATE = "/evalsi.v1alpha1.EvaluationService/Evaluate"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiServer]:
    with serving(fake_state(tmp_path_factory.mktemp("srvfw")), fake_services()) as s:
        yield s


@pytest.fixture
def channel(server: AsgiServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(
        f"{server.host}:{server.port}", options=[("grpc.enable_http_proxy", 0)]
    ) as ch:
        yield ch


def _request() -> Any:
    req = ev.EvaluateRequest()
    for rid, out, ref in (("a", "Paris", "Paris"), ("b", "Lyon", "Paris")):
        rec = req.records.add(id=rid)
        rec.output.text = out
        rec.reference.text = ref
    req.evaluators.add(ref="exact-match")
    return req


def _post(url: str, body: bytes, content_type: str) -> tuple[int, Any, bytes]:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers, e.read()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()


def _grpc_web_frames(body: bytes) -> tuple[list[bytes], dict[str, str]]:
    messages, trailers, i = [], {}, 0
    while i < len(body):
        flag, length = struct.unpack(">BI", body[i : i + 5])
        payload = body[i + 5 : i + 5 + length]
        i += 5 + length
        if flag & 0x80:
            for line in payload.decode().split("\r\n"):
                if line:
                    key, _, value = line.partition(":")
                    trailers[key.strip().lower()] = value.strip()
        else:
            messages.append(payload)
    return messages, trailers


def test_one_handler_answers_every_protocol(server: AsgiServer, channel: grpc.Channel) -> None:
    request = _request()
    before = FakeEvaluation.calls
    answers: dict[str, Any] = {}

    status, headers, body = _post(
        server.url + EVALUATE, json_format.MessageToJson(request).encode(), "application/json"
    )
    assert status == 200, body
    answers["connect-json"] = json_format.Parse(body, ev.EvaluateResponse())

    status, headers, body = _post(
        server.url + EVALUATE, request.SerializeToString(), "application/proto"
    )
    assert status == 200
    assert headers["Content-Type"] == "application/proto"
    answers["connect-proto"] = ev.EvaluateResponse.FromString(body)

    call = channel.unary_unary(
        EVALUATE,
        request_serializer=ev.EvaluateRequest.SerializeToString,
        response_deserializer=ev.EvaluateResponse.FromString,
    )
    answers["grpc"] = call(request, timeout=10)

    framed = struct.pack(">BI", 0, request.ByteSize()) + request.SerializeToString()
    status, headers, body = _post(server.url + EVALUATE, framed, "application/grpc-web+proto")
    assert status == 200
    messages, trailers = _grpc_web_frames(body)
    assert trailers.get("grpc-status") == "0", trailers
    answers["grpc-web"] = ev.EvaluateResponse.FromString(messages[0])

    with EvaluationServiceClientSync(server.url) as client:
        answers["connect-client"] = client.evaluate(request)

    status, headers, body = _post(
        server.url + "/v1alpha1/evaluate",
        json_format.MessageToJson(request).encode(),
        "application/json",
    )
    assert status == 200, body
    answers["rest"] = json_format.Parse(body, ev.EvaluateResponse())

    assert FakeEvaluation.calls - before == len(answers)
    expected = answers["grpc"]
    assert [r.scores[0].passed for r in expected.results] == [True, False]
    for name, answer in answers.items():
        assert answer == expected, name


def test_rest_emits_defaults_in_camel_case(server: AsgiServer) -> None:
    status, body = _get(server.url + "/v1alpha1/runs/r-1")
    assert status == 200
    run = json.loads(body)["run"]
    assert run["id"] == "r-1"
    # Defaults are present (friendlier to curl/jq than Connect's omission), names camelCase.
    assert run["exitCode"] == 0
    assert run["records"] == "0"
    assert run["datasetVersion"] == ""


def test_rest_query_parameters_and_custom_verbs(server: AsgiServer) -> None:
    status, body = _get(server.url + "/v1alpha1/runs?pageSize=2&page_token=t&status=done")
    assert status == 200, body
    doc = json.loads(body)
    assert [r["id"] for r in doc["runs"]] == ["r0", "r1"]
    assert doc["nextPageToken"] == "t"

    status, _, body = _post(server.url + "/v1alpha1/runs/r-9:cancel", b"", "application/json")
    assert status == 200
    assert json.loads(body)["run"]["status"] == "cancelled"
    status, _, body = _post(server.url + "/v1alpha1/runs/r-9:resume", b"{}", "application/json")
    assert status == 200
    assert json.loads(body)["run"]["status"] == "running"

    # A path variable is one segment; an encoded slash stays inside it.
    status, body = _get(server.url + "/v1alpha1/evaluators/builtin%2Fexact-match@1.0.0")
    assert status == 200
    assert json.loads(body)["evaluator"]["description"].startswith("builtin/")


def test_server_stream_over_grpc_and_ndjson(server: AsgiServer, channel: grpc.Channel) -> None:
    watch = channel.unary_stream(
        "/evalsi.v1alpha1.RunService/WatchRun",
        request_serializer=rs.WatchRunRequest.SerializeToString,
        response_deserializer=rs.WatchRunResponse.FromString,
    )
    got = [m.run.progress.tasks_done for m in watch(rs.WatchRunRequest(id="w"), timeout=10)]
    assert got == [1, 2, 3]

    request = urllib.request.Request(server.url + "/v1alpha1/runs/w:watch")
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in r.read().splitlines()]
    assert [line["run"]["progress"]["tasksDone"] for line in lines] == ["1", "2", "3"]
    assert lines[-1]["run"]["status"] == "done"


def test_grpc_health_serving(channel: grpc.Channel) -> None:
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    for service in ("", "evalsi.v1alpha1.EvaluationService"):
        reply = check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as err:
        check(health_pb2.HealthCheckRequest(service="no.Such"), timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    listing = channel.unary_unary(
        "/grpc.health.v1.Health/List",
        request_serializer=health_pb2.HealthListRequest.SerializeToString,
        response_deserializer=health_pb2.HealthListResponse.FromString,
    )(health_pb2.HealthListRequest(), timeout=10)
    assert "evalsi.v1alpha1.RunService" in listing.statuses


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_grpc_reflection(channel: grpc.Channel, version: str) -> None:
    info = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    R = reflection_pb2.ServerReflectionRequest
    replies = list(
        info(
            iter(
                [
                    R(list_services=""),
                    R(file_containing_symbol="evalsi.v1alpha1.RunService"),
                    R(file_containing_symbol="evalsi.v1alpha1.RunService.GetRun"),
                    R(file_by_filename="evalsi/v1alpha1/record.proto"),
                    R(file_containing_symbol="no.such.Symbol"),
                ]
            ),
            timeout=10,
        )
    )
    names = {s.name for s in replies[0].list_services_response.service}
    assert {
        "evalsi.v1alpha1.EvaluationService",
        "evalsi.v1alpha1.RunService",
        "evalsi.v1alpha1.CatalogService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    } <= names
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(b)
        for b in replies[1].file_descriptor_response.file_descriptor_proto
    ]
    assert files[0].name == "evalsi/v1alpha1/run_service.proto"
    # Dependencies come along, so a tool can build every message type.
    assert {"evalsi/v1alpha1/run.proto", "google/protobuf/struct.proto"} <= {f.name for f in files}
    assert (
        replies[2].file_descriptor_response.file_descriptor_proto[0]
        == (replies[1].file_descriptor_response.file_descriptor_proto[0])
    )
    record = descriptor_pb2.FileDescriptorProto.FromString(
        replies[3].file_descriptor_response.file_descriptor_proto[0]
    )
    assert record.name == "evalsi/v1alpha1/record.proto"
    assert replies[4].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert "no.such.Symbol" in replies[4].error_response.error_message


def _counter(text: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"evalsi_requests_total\{(.*)\} (\S+)$", line)
        if m and ",".join(sorted(m.group(1).split(","))) == want:
            return float(m.group(2))
    return 0.0


def test_metrics_count_requests(server: AsgiServer, channel: grpc.Channel) -> None:
    def scrape() -> str:
        status, body = _get(server.url + "/metrics")
        assert status == 200
        return body.decode()

    grpc_ok = {"service": "evalsi.v1alpha1.RunService", "method": "GetRun", "code": "ok"}
    rest_nf = {"service": "evalsi.v1alpha1.RunService", "method": "GetRun", "code": "not_found"}
    before = scrape()
    get_run = channel.unary_unary(
        "/evalsi.v1alpha1.RunService/GetRun",
        request_serializer=rs.GetRunRequest.SerializeToString,
        response_deserializer=rs.GetRunResponse.FromString,
    )
    get_run(rs.GetRunRequest(id="m1"), timeout=10)
    get_run(rs.GetRunRequest(id="m2"), timeout=10)
    assert _get(server.url + "/v1alpha1/runs/missing")[0] == 404
    after = scrape()
    assert (
        _counter(after, protocol="grpc", **grpc_ok)
        == _counter(before, protocol="grpc", **grpc_ok) + 2
    )
    assert (
        _counter(after, protocol="rest", **rest_nf)
        == _counter(before, protocol="rest", **rest_nf) + 1
    )
    assert "evalsi_request_duration_seconds_bucket" in after
    assert 'evalsi_runs{state="' not in before or "evalsi_runs" in after


def test_openapi_document_validates(server: AsgiServer) -> None:
    status, body = _get(server.url + "/openapi.json")
    assert status == 200
    doc = json.loads(body)
    validate(doc)
    assert {"/v1alpha1/evaluate", "/v1alpha1/runs/{id}:cancel", "/v1alpha1/runs/{id}"} <= set(
        doc["paths"]
    )
    get_run = doc["paths"]["/v1alpha1/runs/{id}"]["get"]
    assert get_run["parameters"][0] == {
        "name": "id",
        "in": "path",
        "required": True,
        # Not blank, no NUL: what the server checks of a run id (@constraints in the proto).
        "schema": {"type": "string", "pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"},
    }
    body_schema = doc["paths"]["/v1alpha1/evaluate"]["post"]["requestBody"]["content"]
    assert body_schema["application/json"]["schema"] == {
        "$ref": "#/components/schemas/evalsi.v1alpha1.EvaluateRequest"
    }


def test_run_stats_come_from_the_store_without_a_scheduler(tmp_path: Path) -> None:
    state = fake_state(tmp_path)
    state.store.create_run(kind="score", spec={"evaluators": []})
    with serving(state, fake_services()) as s:
        text = _get(s.url + "/metrics")[1].decode()
    assert 'evalsi_runs{state="running"} 1.0' in text


def test_run_stats_come_from_the_store_with_a_scheduler_too(tmp_path: Path) -> None:
    state = fake_state(tmp_path)
    state.runs = RunManager(state)  # no run executed here: the counts are the store's
    for status in ("done", "done", "failed", "cancelled"):
        run_id = state.store.create_run(kind="score", spec={"evaluators": []}).id
        state.store.mark_status(run_id, status)
    state.store.create_run(kind="run", spec={}, status="queued")
    with serving(state, fake_services()) as s:
        text = _get(s.url + "/metrics")[1].decode()
    assert 'evalsi_runs{state="done"} 2.0' in text
    assert 'evalsi_runs{state="failed"} 1.0' in text
    assert 'evalsi_runs{state="cancelled"} 1.0' in text
    assert 'evalsi_runs{state="queued"} 1.0' in text
    assert 'evalsi_tasks{state="pending"} 0.0' in text
    assert "evalsi_judge_cache_hits_total 0.0" in text
