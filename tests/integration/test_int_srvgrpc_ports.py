"""The optional native gRPC port (grpcio) beside the main port, in one process and one event
loop as ``evalsi serve`` runs them (``_serve.run_servers``): the same answers, errors,
streams, health, reflection and metrics on both, from the same handler objects."""

from __future__ import annotations

import asyncio
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as rs
from evalsi._proto.grpc.health.v1 import health_pb2
from evalsi._proto.grpc.reflection.v1 import reflection_pb2
from evalsi.core import UserError
from evalsi.server._app import build_app
from evalsi.server._serve import run_servers
from evalsi.server._state import ServerState
from tests.integration.run_support import write_qa
from tests.integration.test_int_srvfw_fakes import SECRET, fake_services, fake_state
from tests.support.run_server_main import run_doc, run_message, run_state
from tests.support.server_state import free_port
from tests.support.stub_llm import StubLLM

EVALUATE = "/evalsi.v1alpha1.EvaluationService/Evaluate"
LIMIT = 64 * 1024
ONE = {
    "records": [
        {"id": "r1", "output": {"text": "Paris"}, "reference": {"text": "Paris"}},
        {"id": "r2", "output": {"text": "paris"}, "reference": {"text": "Rome"}},
    ],
    "evaluators": [{"ref": "exact-match"}],
}


class BothPorts:
    """``run_servers`` in a thread: hypercorn on ``port`` and grpcio on ``grpc_port``."""

    def __init__(self, app: Any, state: ServerState) -> None:
        from dataclasses import replace

        self.port, self.grpc_port = free_port(), free_port()
        self.config = replace(state.config, port=self.port, grpc_port=self.grpc_port)
        self.app = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)
        self.error: BaseException | None = None
        self.stopped = threading.Event()

    def __enter__(self) -> BothPorts:
        self._thread.start()
        for port in (self.port, self.grpc_port):
            grpc.channel_ready_future(grpc.insecure_channel(f"127.0.0.1:{port}")).result(15)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)

    def channel(self, native: bool) -> grpc.Channel:
        return grpc.insecure_channel(f"127.0.0.1:{self.grpc_port if native else self.port}")

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # noqa: BLE001 - the test reads it
            self.error = e
        finally:
            self.stopped.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await run_servers(self.app, self.config, self._stop)


def _unary(channel: grpc.Channel, path: str, req: Any, resp: Any) -> Any:
    return channel.unary_unary(
        path, request_serializer=req.SerializeToString, response_deserializer=resp.FromString
    )


def _evaluate(channel: grpc.Channel, *, raw: bool = False) -> Any:
    return channel.unary_unary(
        EVALUATE,
        request_serializer=None if raw else ev.EvaluateRequest.SerializeToString,
        response_deserializer=ev.EvaluateResponse.FromString,
    )


def _status(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value.code(), e.value.details()


# -- the real services ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BothPorts, str]]:
    tmp = tmp_path_factory.mktemp("srvgrpc")
    datasets = tmp / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", 6)
    with StubLLM(answers={f"q{i}": f"a{i}" for i in range(6)}) as stub:
        state = run_state(str(tmp / "srv.db"), datasets, max_body_bytes=LIMIT)
        with BothPorts(build_app(state), state) as servers:
            yield servers, stub.openai_url
        state.store.close()
    assert servers.error is None


def test_evaluate_answers_the_same_on_both_ports(real: tuple[BothPorts, str]) -> None:
    servers = real[0]
    request = json_format.ParseDict(ONE, ev.EvaluateRequest())
    answers = []
    for native in (False, True):
        with servers.channel(native) as channel:
            answers.append(_evaluate(channel)(request, timeout=10))
    main, native_answer = answers
    assert native_answer.records == 2
    assert [r.scores[0].passed for r in native_answer.results] == [True, False]
    assert native_answer.run_id != main.run_id  # each call is its own stored run
    assert _graded(native_answer) == _graded(main)
    assert list(native_answer.metrics) == list(main.metrics)


def _graded(answer: Any) -> list[Any]:
    """What the results say (timings and stored ids differ from call to call)."""
    return [
        (
            r.record_id,
            r.evaluator,
            r.outcome,
            [s.SerializeToString(deterministic=True) for s in r.scores],
        )
        for r in answer.results
    ]


def test_unknown_evaluator_is_invalid_argument_naming_the_field(
    real: tuple[BothPorts, str],
) -> None:
    request = json_format.ParseDict(ONE, ev.EvaluateRequest())
    request.evaluators[0].ref = "no-such-evaluator"
    seen = []
    for native in (False, True):
        with real[0].channel(native) as channel:
            seen.append(_status(lambda c=channel: _evaluate(c)(request, timeout=10)))
    assert seen[0] == seen[1]
    code, message = seen[1]
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message.startswith("evaluators[0].ref: unknown evaluator 'no-such-evaluator'")


def test_unknown_run_is_not_found(real: tuple[BothPorts, str]) -> None:
    with real[0].channel(True) as channel:
        get = _unary(
            channel, "/evalsi.v1alpha1.RunService/GetRun", rs.GetRunRequest, rs.GetRunResponse
        )
        code, message = _status(lambda: get(rs.GetRunRequest(id="nope"), timeout=10))
        assert code == grpc.StatusCode.NOT_FOUND
        assert "nope" in message
        watch = channel.unary_stream(
            "/evalsi.v1alpha1.RunService/WatchRun",
            request_serializer=rs.WatchRunRequest.SerializeToString,
            response_deserializer=rs.WatchRunResponse.FromString,
        )
        code, _ = _status(lambda: list(watch(rs.WatchRunRequest(id="nope"), timeout=10)))
        assert code == grpc.StatusCode.NOT_FOUND


def test_oversize_and_malformed_requests(real: tuple[BothPorts, str]) -> None:
    big = ev.EvaluateRequest()
    big.records.add(id="a").output.text = "x" * LIMIT
    with real[0].channel(True) as channel:
        code, _ = _status(lambda: _evaluate(channel)(big, timeout=10))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        code, message = _status(lambda: _evaluate(channel, raw=True)(b"\xff\xff\xff", timeout=10))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert "evalsi.v1alpha1.EvaluateRequest" in message
        # The connection still serves after both.
        assert _evaluate(channel)(json_format.ParseDict(ONE, ev.EvaluateRequest()), timeout=10)


def test_evaluate_stream_bidi(real: tuple[BothPorts, str]) -> None:
    records = json_format.ParseDict(
        {
            "records": [
                {"id": f"s{i}", "output": {"text": "a"}, "reference": {"text": "ab"[i % 2]}}
                for i in range(4)
            ]
        },
        ev.EvaluateRequest(),
    ).records
    first = ev.EvaluateStreamRequest(records=records[:1])
    first.config.evaluators.add(ref="exact-match")
    chunks = [first, *(ev.EvaluateStreamRequest(records=[r]) for r in records[1:])]
    replies = {}
    for native in (False, True):
        with real[0].channel(native) as channel:
            call = channel.stream_stream(
                "/evalsi.v1alpha1.EvaluationService/EvaluateStream",
                request_serializer=ev.EvaluateStreamRequest.SerializeToString,
                response_deserializer=ev.EvaluateStreamResponse.FromString,
            )
            replies[native] = list(call(iter(chunks), timeout=20))
    results = {
        native: sorted((r.record_id, r.scores[0].passed) for m in out for r in m.results)
        for native, out in replies.items()
    }
    assert (
        results[True]
        == results[False]
        == [("s0", True), ("s1", False), ("s2", True), ("s3", False)]
    )


def test_watch_run_streams_on_the_native_port(real: tuple[BothPorts, str]) -> None:
    servers, url = real
    with servers.channel(True) as channel:
        create = _unary(
            channel,
            "/evalsi.v1alpha1.RunService/CreateRun",
            rs.CreateRunRequest,
            rs.CreateRunResponse,
        )
        run_id = create(
            rs.CreateRunRequest(run=run_message(run_doc(url, "qa.jsonl"))), timeout=20
        ).run.id
        watch = channel.unary_stream(
            "/evalsi.v1alpha1.RunService/WatchRun",
            request_serializer=rs.WatchRunRequest.SerializeToString,
            response_deserializer=rs.WatchRunResponse.FromString,
        )
        updates = list(watch(rs.WatchRunRequest(id=run_id), timeout=60))
    assert updates
    assert all(u.run.id == run_id for u in updates)
    final = updates[-1].run
    assert final.status == "done"
    assert (final.metrics[0].n, final.metrics[0].mean) == (6, 1.0)


def test_health_and_reflection_on_the_native_port(real: tuple[BothPorts, str]) -> None:
    with real[0].channel(True) as channel:
        check = _unary(
            channel,
            "/grpc.health.v1.Health/Check",
            health_pb2.HealthCheckRequest,
            health_pb2.HealthCheckResponse,
        )
        for service in ("", "evalsi.v1alpha1.EvaluationService", "evalsi.v1alpha1.RunService"):
            reply = check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        code, _ = _status(
            lambda: check(health_pb2.HealthCheckRequest(service="no.Such"), timeout=10)
        )
        assert code == grpc.StatusCode.NOT_FOUND
        for version in ("v1", "v1alpha"):
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
                "evalsi.v1alpha1.DatasetService",
                "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection",
            } <= names
            assert replies[1].file_descriptor_response.file_descriptor_proto


def test_metrics_count_the_native_port(real: tuple[BothPorts, str]) -> None:
    servers = real[0]
    request = json_format.ParseDict(ONE, ev.EvaluateRequest())
    with servers.channel(True) as channel:
        _evaluate(channel)(request, timeout=10)
    with urllib.request.urlopen(f"http://127.0.0.1:{servers.port}/metrics", timeout=10) as r:
        text = r.read().decode()
    ok = (
        'evalsi_requests_total{code="ok",method="Evaluate",protocol="grpc_native",'
        'service="evalsi.v1alpha1.EvaluationService"}'
    )
    assert ok in text
    assert 'protocol="grpc_native",service="evalsi.v1alpha1.RunService"' in text  # NOT_FOUND
    assert 'evalsi_request_duration_seconds_count{method="Evaluate",protocol="grpc_native"' in text


def test_a_busy_grpc_port_is_a_user_error(real: tuple[BothPorts, str], tmp_path: Path) -> None:
    servers = real[0]
    state = fake_state(tmp_path)
    from dataclasses import replace

    config = replace(state.config, port=free_port(), grpc_port=servers.grpc_port)
    with pytest.raises(UserError) as e:
        asyncio.run(run_servers(build_app(state, fake_services()), config, asyncio.Event()))
    assert f"cannot listen for native gRPC on 127.0.0.1:{servers.grpc_port}" in str(e.value)
    state.store.close()


# -- a handler bug ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BothPorts]:
    state = fake_state(tmp_path_factory.mktemp("srvgrpc-fakes"))
    with BothPorts(build_app(state, fake_services()), state) as servers:
        yield servers
    state.store.close()


@pytest.mark.parametrize(
    ("rid", "code"),
    [
        ("bad", grpc.StatusCode.INVALID_ARGUMENT),
        ("missing", grpc.StatusCode.NOT_FOUND),
        ("down", grpc.StatusCode.UNAVAILABLE),
        ("boom", grpc.StatusCode.INTERNAL),
    ],
)
def test_errors_read_the_same_on_both_ports(
    fakes: BothPorts, rid: str, code: grpc.StatusCode
) -> None:
    request = ev.EvaluateRequest()
    request.records.add(id=rid)
    seen = []
    for native in (False, True):
        with fakes.channel(native) as channel:
            seen.append(_status(lambda c=channel: _evaluate(c)(request, timeout=10)))
    assert seen[0] == seen[1]
    assert seen[1][0] == code
    assert SECRET not in seen[1][1]
    assert "Traceback" not in seen[1][1]


def test_a_stream_that_crashes_midway_ends_internal(fakes: BothPorts) -> None:
    with fakes.channel(True) as channel:
        watch = channel.unary_stream(
            "/evalsi.v1alpha1.RunService/WatchRun",
            request_serializer=rs.WatchRunRequest.SerializeToString,
            response_deserializer=rs.WatchRunResponse.FromString,
        )
        got: list[Any] = []

        def read() -> None:
            for update in watch(rs.WatchRunRequest(id="late-boom"), timeout=10):
                got.append(update)

        with pytest.raises(grpc.RpcError) as e:
            read()
    assert len(got) == 3
    assert e.value.code() == grpc.StatusCode.INTERNAL
    assert SECRET not in e.value.details()


def test_stops_with_the_main_server(tmp_path: Path) -> None:
    state = fake_state(tmp_path)
    servers = BothPorts(build_app(state, fake_services()), state)
    with servers, servers.channel(True) as channel:
        assert _evaluate(channel)(ev.EvaluateRequest(), timeout=10).status == "done"
    assert servers.stopped.wait(20)
    assert servers.error is None
    for port in (servers.port, servers.grpc_port):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    state.store.close()
