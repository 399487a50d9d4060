"""Gates, run names and big requests on Evaluate over a real loopback server: the verdicts equal
the embedded ``evalsi.evaluate(..., gates=...)`` on the same records, on every protocol and on
EvaluateStream; they are stored in the run summary as the embedded Score path stores them; bad
gates are INVALID_ARGUMENT naming ``gates[i]``; requests big enough to be graded in a worker
thread give the embedded answer too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

import evalsi
from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.evaluation_service_connect import (
    EvaluationServiceASGIApplication,
)
from evalsi.server._evaluation import INLINE_RECORDS, EvaluationHandler
from evalsi.server._state import ServerState
from evalsi.wire import record_from_proto
from tests.integration.test_int_srveval_api import (
    EVALUATE,
    EVALUATORS,
    RECORDS,
    STREAM,
    _grpc_evaluate,
    _metrics,
    _post,
    _results,
    _zero,
)
from tests.support.asgi_server import AsgiServer
from tests.support.server_state import server_state, serving

GATES = [
    "metric('json-valid').mean < 0.5",  # 1 of 6 outputs is JSON: passes
    "metric('json-valid').mean > 0.9",  # fails
    "metric('has-answer').mean >= 0.1",  # q4 is skipped: 5/6 < 0.9 completion, undecided
]
BODY: dict[str, Any] = {
    "records": RECORDS,
    "evaluators": EVALUATORS,
    "name": "nightly",
    "gates": GATES,
    "minCompletionRate": 0.9,
    "maxEvaluatorErrorRate": 0.2,
}
WIRE_VERDICT = {"passed": "pass", "failed": "fail", "inconclusive": "undecided"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[AsgiServer, ServerState]]:
    state = server_state(tmp_path, runs=False)
    with serving(state, only=(EvaluationServiceASGIApplication, EvaluationHandler)) as srv:
        yield srv, state


def _embedded(tmp_path: Path, body: dict[str, Any]) -> evalsi.ScoreResult:
    request = json_format.ParseDict({"records": body["records"]}, pb.EvaluateRequest())
    return evalsi.evaluate(
        [record_from_proto(r) for r in request.records],
        body["evaluators"],
        gates=body.get("gates", ()),
        min_completion_rate=body.get("minCompletionRate", 0.8),
        max_evaluator_error_rate=body.get("maxEvaluatorErrorRate", 0.1),
        name=body.get("name", ""),
        store=str(tmp_path / "embedded.db"),
    )


def _wire_gates(gates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Embedded verdicts as the wire spells them (a boolean value travels as 1/0)."""
    out = []
    for g in gates:
        value = g["value"]
        out.append(
            {
                "expr": g["expr"],
                "passed": bool(g["passed"]),
                "verdict": WIRE_VERDICT[g["verdict"]],
                "value": None if value is None else float(value),
                "reason": g["reason"],
            }
        )
    return out


def _gates_of(message: Any) -> list[dict[str, Any]]:
    return [
        {
            "expr": g.expr,
            "passed": g.passed,
            "verdict": g.verdict,
            "value": g.value if g.HasField("value") else None,
            "reason": g.reason,
        }
        for g in message.gates
    ]


def test_gates_and_name_equal_embedded_on_every_protocol(
    server: tuple[AsgiServer, ServerState], tmp_path: Path
) -> None:
    srv, state = server
    embedded = _embedded(tmp_path, BODY)
    assert [g["verdict"] for g in embedded.gates] == ["passed", "failed", "inconclusive"]
    answers = []
    for path in (EVALUATE, "/v1alpha1/evaluate"):
        status, doc = _post(srv.url, path, BODY)
        assert status == 200, doc
        answers.append(json_format.ParseDict(doc, pb.EvaluateResponse()))
    answers.append(_grpc_evaluate(srv.url, json_format.ParseDict(BODY, pb.EvaluateRequest())))
    for answer in answers:
        assert _gates_of(answer) == _wire_gates(embedded.gates)
        assert _metrics(answer) == embedded.metrics
        run = state.store.get_run(answer.run_id)
        assert run.name == "nightly"
        assert run.summary is not None
        assert run.summary["gates"] == embedded.gates
        assert run.spec["gates"] == GATES
        assert run.spec["min_completion_rate"] == 0.9
        assert run.spec["max_evaluator_error_rate"] == 0.2
    stored = evalsi.store.SqlStore.open(str(tmp_path / "embedded.db"))
    try:
        want = stored.get_run(embedded.run_id).summary
    finally:
        stored.close()
    assert want is not None
    assert want["gates"] == run.summary["gates"]


def test_no_gates_means_an_empty_list_and_no_gate_keys_in_the_spec(
    server: tuple[AsgiServer, ServerState],
) -> None:
    srv, state = server
    status, doc = _post(srv.url, EVALUATE, {"records": RECORDS, "evaluators": EVALUATORS})
    assert status == 200, doc
    assert "gates" not in doc  # proto3 JSON omits an empty list
    run = state.store.get_run(doc["runId"])
    assert run.name == ""
    assert run.summary is not None
    assert run.summary["gates"] == []
    assert "gates" not in run.spec
    assert "min_completion_rate" not in run.spec


def test_stream_gates_come_in_the_last_message(
    server: tuple[AsgiServer, ServerState], tmp_path: Path
) -> None:
    srv, state = server
    request = json_format.ParseDict(BODY, pb.EvaluateRequest())
    first = pb.EvaluateStreamRequest(records=request.records[:3])
    config = first.config
    config.evaluators.extend(request.evaluators)
    config.name, config.min_completion_rate = "streamed", 0.9
    config.max_evaluator_error_rate = 0.2
    config.gates.extend(GATES)
    messages = [first, pb.EvaluateStreamRequest(records=request.records[3:])]
    with grpc.insecure_channel(srv.url.removeprefix("http://")) as channel:
        call = channel.stream_stream(
            STREAM,
            request_serializer=pb.EvaluateStreamRequest.SerializeToString,
            response_deserializer=pb.EvaluateStreamResponse.FromString,
        )
        replies = list(call(iter(messages), timeout=30))
    assert all(not r.gates for r in replies[:-1])
    embedded = _embedded(tmp_path, BODY)
    assert _gates_of(replies[-1]) == _wire_gates(embedded.gates)
    run = state.store.get_run(replies[-1].run_id)
    assert run.name == "streamed"
    assert run.summary is not None
    assert run.summary["gates"] == embedded.gates


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"gates": ["metric('json-valid').mean > 0.5", "metric('nope').mean > 1"]}, "gates[1]: "),
        ({"gates": ["metric('json-valid').mean +"]}, "gates[0]: `metric('json-valid').mean +`"),
        ({"gates": ["metric('json-valid').mean"]}, "gates[0]: "),
        ({"gates": ["x"] * 101}, "gates: 101 given; the limit is 100"),
        ({"minCompletionRate": 1.5}, "min_completion_rate: must be a fraction between 0 and 1"),
        ({"maxEvaluatorErrorRate": -0.1}, "max_evaluator_error_rate: must be a fraction"),
    ],
)
def test_bad_gates_are_invalid_argument_naming_the_gate(
    server: tuple[AsgiServer, ServerState], change: dict[str, Any], expected: str
) -> None:
    srv, state = server
    before = len(state.store.list_runs(limit=100))
    for path in (EVALUATE, "/v1alpha1/evaluate"):
        status, answer = _post(srv.url, path, {**BODY, **change})
        assert status == 400, answer
        assert answer["code"] == "invalid_argument"
        assert expected in answer["message"], answer["message"]
    assert len(state.store.list_runs(limit=100)) == before  # refused before any run is made


def test_a_bad_gate_in_a_stream_config_names_config_gates(
    server: tuple[AsgiServer, ServerState],
) -> None:
    srv, _ = server
    first = pb.EvaluateStreamRequest(
        records=json_format.ParseDict(BODY, pb.EvaluateRequest()).records
    )
    first.config.evaluators.add(ref="exact-match")
    first.config.gates.extend(["metric('exact-match').mean > 0.5", "metric('x').mean > 0.5"])
    with grpc.insecure_channel(srv.url.removeprefix("http://")) as channel:
        call = channel.stream_stream(
            STREAM,
            request_serializer=pb.EvaluateStreamRequest.SerializeToString,
            response_deserializer=pb.EvaluateStreamResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as caught:
            list(call(iter([first]), timeout=30))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "config.gates[1]: " in str(caught.value.details())


def test_a_request_graded_in_a_worker_thread_equals_embedded(
    server: tuple[AsgiServer, ServerState], tmp_path: Path
) -> None:
    srv, state = server
    records = [
        {**r, "id": f"{r['id']}-{i}"}
        for i in range(INLINE_RECORDS // len(RECORDS) + 2)
        for r in RECORDS
    ]
    assert len(records) > INLINE_RECORDS
    body = {**BODY, "records": records}
    answer = _grpc_evaluate(srv.url, json_format.ParseDict(body, pb.EvaluateRequest()))
    embedded = _embedded(tmp_path, body)
    assert _metrics(answer) == embedded.metrics
    assert _gates_of(answer) == _wire_gates(embedded.gates)
    assert _results(answer) == sorted(
        (_zero(r) for r in embedded.results), key=lambda r: (r.record_id, r.evaluator)
    )
    assert answer.dataset_version == embedded.dataset_version
    assert state.store.count_results(answer.run_id) == len(records) * len(EVALUATORS)
    assert state.store.get_run(answer.run_id).status == "done"


def test_a_big_stream_message_is_graded_in_a_worker_thread_like_the_unary_call(
    server: tuple[AsgiServer, ServerState],
) -> None:
    srv, state = server
    records = [{**r, "id": f"{r['id']}-{i}"} for i in range(60) for r in RECORDS]
    request = json_format.ParseDict({**BODY, "records": records}, pb.EvaluateRequest())
    assert len(request.records) > INLINE_RECORDS
    first = pb.EvaluateStreamRequest(records=request.records[:10])
    first.config.evaluators.extend(request.evaluators)
    first.config.gates.extend(GATES)
    first.config.min_completion_rate = 0.9
    first.config.max_evaluator_error_rate = 0.2
    messages = [first, pb.EvaluateStreamRequest(records=request.records[10:])]
    with grpc.insecure_channel(srv.url.removeprefix("http://")) as channel:
        call = channel.stream_stream(
            STREAM,
            request_serializer=pb.EvaluateStreamRequest.SerializeToString,
            response_deserializer=pb.EvaluateStreamResponse.FromString,
        )
        replies = list(call(iter(messages), timeout=60))
    unary = _grpc_evaluate(srv.url, request)
    assert [len(r.results) for r in replies[:-1]] == [30, (len(records) - 10) * 3]
    assert _gates_of(replies[-1]) == _gates_of(unary)
    assert replies[-1].dataset_version == unary.dataset_version
    streamed = pb.EvaluateResponse()
    for reply in replies:
        streamed.results.extend(reply.results)
    assert _results(streamed) == _results(unary)
    assert state.store.count_results(replies[-1].run_id) == len(records) * 3
