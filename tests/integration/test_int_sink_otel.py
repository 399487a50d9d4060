"""Scores out: ``gen_ai.evaluation.result`` events through the real OTel SDK's OTLP/HTTP log
exporter, received by a loopback collector stand-in that decodes the OTLP logs request."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from evalsi.core import Score, UserError
from evalsi.sinks import EVENT_NAME, OtelScoreExporter, evaluation_attributes
from tests.support.asgi_server import AsgiServer

TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


def _value(v: object) -> object:
    kind = v.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(v, kind)


def test_events_arrive_parented_to_the_graded_span() -> None:
    received: list[logs_service_pb2.ExportLogsServiceRequest] = []
    got = threading.Event()

    async def logs(request: Request) -> Response:
        body = logs_service_pb2.ExportLogsServiceRequest()
        body.ParseFromString(await request.body())
        received.append(body)
        got.set()
        return Response(
            logs_service_pb2.ExportLogsServiceResponse().SerializeToString(),
            media_type="application/x-protobuf",
        )

    app = Starlette(routes=[Route("/v1/logs", logs, methods=["POST"])])
    with AsgiServer(app) as server:
        exporter = OtelScoreExporter(server.url + "/v1/logs", service_name="evalsi-test")
        exporter.export(TRACE, SPAN, "pii-leakage", Score(passed=False, explanation="an email"))
        exporter.export(TRACE, SPAN, "llm-judge", Score(number=0.75, label="good"))
        assert exporter.flush()
        exporter.close()
        assert got.wait(10)
    records = [
        r
        for req in received
        for rl in req.resource_logs
        for sl in rl.scope_logs
        for r in sl.log_records
    ]
    assert len(records) == 2
    resource = received[0].resource_logs[0].resource
    assert {a.key: _value(a.value) for a in resource.attributes}["service.name"] == "evalsi-test"
    by_name = {}
    for r in records:
        assert r.event_name == EVENT_NAME
        assert r.trace_id.hex() == TRACE
        assert r.span_id.hex() == SPAN
        attrs = {a.key: _value(a.value) for a in r.attributes}
        by_name[attrs["gen_ai.evaluation.name"]] = attrs
    assert by_name["pii-leakage"] == {
        "gen_ai.evaluation.name": "pii-leakage",
        "gen_ai.evaluation.score.value": 0.0,
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.explanation": "an email",
    }
    assert by_name["llm-judge"]["gen_ai.evaluation.score.value"] == 0.75
    assert by_name["llm-judge"]["gen_ai.evaluation.score.label"] == "good"


def test_attributes_follow_the_score_kind() -> None:
    assert evaluation_attributes("x", Score(label="relevant")) == {
        "gen_ai.evaluation.name": "x",
        "gen_ai.evaluation.score.label": "relevant",
    }
    assert evaluation_attributes("y", Score(passed=True))["gen_ai.evaluation.score.value"] == 1.0


def test_a_bad_endpoint_is_refused_clearly() -> None:
    with pytest.raises(UserError, match="expected an http"):
        OtelScoreExporter("collector:4318")
