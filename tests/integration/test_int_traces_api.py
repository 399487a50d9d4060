"""TraceService over a loopback server: Connect (the evalsi client), REST and gRPC read the
same stored traces; bad input is a 400 naming the field, a missing trace a 404, and a project
never sees another's traces."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import grpc
import pytest

import evalsi
from evalsi._proto.evalsi.v1alpha1 import trace_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.trace_service_connect import TraceServiceASGIApplication
from evalsi.core import (
    STATUS_ERROR,
    Feedback,
    NotFoundError,
    Span,
    SpanEvent,
    SpanLink,
    Trace,
    UserError,
)
from evalsi.server._traces import TraceHandler
from evalsi.store import TraceStore, TraceSummary
from evalsi.traces._mappers import normalize_all
from tests.support.asgi_server import AsgiServer
from tests.support.server_state import server_state, serving

S = 1_000_000_000
T0 = 1_700_000_000 * S
RESOURCE = {"service.name": "bot", "deployment.environment": "prod"}


ASKED = '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'


def tid(n: int) -> str:
    return f"{n:032x}"


def sid(n: int) -> str:
    return f"{n:016x}"


def trace_spans(n: int, *, service: str = "bot", failed: bool = False) -> list[Span]:
    resource = {**RESOURCE, "service.name": service}
    start = T0 + n * S
    root = Span(
        tid(n),
        sid(1),
        name="agent run",
        kind=2,
        start_time_unix_nano=start,
        end_time_unix_nano=start + S,
        attributes={
            "openinference.span.kind": "AGENT",
            "agent.name": "planner",
            "session.id": f"sess{n % 2}",
            "user.id": "u1",
            "tier": "gold" if n % 2 else "free",
            "big": 2**60,
            "raw": b"\x01\x02",
        },
        resource=resource,
    )
    llm = Span(
        tid(n),
        sid(2),
        parent_span_id=sid(1),
        name="chat gpt",
        kind=3,
        start_time_unix_nano=start + 10,
        end_time_unix_nano=start + S // 2,
        status_code=STATUS_ERROR if failed else 1,
        status_message="boom" if failed else "",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt",
            "gen_ai.input.messages": ASKED,
            "gen_ai.usage.input_tokens": 3,
            "gen_ai.usage.output_tokens": 2,
        },
        events=[SpanEvent("gen_ai.choice", start + 20, {"index": 0})],
        resource=resource,
        scope_name="openai",
        scope_version="1.0",
        links=[SpanLink(tid(n + 100), sid(7), {"handoff": "planner"})],
    )
    tool = Span(
        tid(n),
        sid(3),
        parent_span_id=sid(1),
        name="execute_tool search",
        start_time_unix_nano=start + S // 2,
        end_time_unix_nano=start + S - 1,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": "x"}',
            "gen_ai.tool.call.id": "c1",
        },
        resource=resource,
    )
    spans = [root, llm, tool]
    normalize_all(spans)  # as ingest does; the store keeps the attributes, not the views
    return spans


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiServer]:
    """Project "default": traces 1..5 (5 newest; 2 failed; 4 of service "other");
    project "team-b": trace 1 of its own (service "b-svc")."""
    state = server_state(tmp_path_factory.mktemp("traces"), runs=False)
    store = TraceStore(state.store)
    for n in range(1, 6):
        spans = trace_spans(n, service="other" if n == 4 else "bot", failed=n == 2)
        store.write_spans("default", spans)
        record = {"id": tid(n), "input": "hi", "output": {"text": "hello"}}
        summary = TraceSummary.of(
            Trace(tid(n), spans=spans),
            record=record,
            user_id="u1",
            input_preview="hi",
            output_preview="hello",
            completed_at=1_700_000_100.5,
        )
        store.upsert_trace("default", summary)
    b_spans = trace_spans(1, service="b-svc")
    store.write_spans("team-b", b_spans)
    store.upsert_trace("team-b", TraceSummary.of(Trace(tid(1), spans=b_spans), completed_at=1.0))
    store.write_spans("default", trace_spans(9))  # spans only: not assembled yet
    store.close()
    with serving(state, [(TraceServiceASGIApplication, TraceHandler(state))]) as s:
        yield s


@pytest.fixture(scope="module")
def client(server: AsgiServer) -> Iterator[evalsi.Client]:
    with evalsi.Client(server.url) as c:
        yield c


def rest(server: AsgiServer, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        server.url + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# -- Connect (the evalsi client) ---------------------------------------------------------------
def test_list_traces_with_filters(client: evalsi.Client) -> None:
    def ids(**kw: Any) -> list[int]:
        return [int(t.trace_id, 16) for t in client.list_traces(**kw)]

    assert ids() == [5, 4, 3, 2, 1]
    assert ids(service="other") == [4]
    assert ids(error=True) == [2]
    assert ids(session_id="sess0") == [4, 2]
    assert ids(attributes={"tier": "gold"}) == [5, 3, 1]
    assert ids(attributes={"deployment.environment": "prod", "gen_ai.request.model": "gpt"}) == [
        5,
        4,
        3,
        2,
        1,
    ]
    assert ids(since=T0 / S + 2, until=T0 / S + 4) == [3, 2]
    assert ids(name="agent run", limit=2) == [5, 4]  # two pages of one would give the same
    top = client.list_traces(limit=1)[0]
    assert (top.span_count, top.duration_ms, top.user_id) == (3, 1000.0, "u1")
    assert (top.input_preview, top.output_preview, top.completed_at) == (
        "hi",
        "hello",
        1_700_000_100.5,
    )
    assert top.scores == []  # filled by online policies later
    assert top.record is None  # listings leave the record out


def test_get_trace_returns_spans_views_summary_and_record(client: evalsi.Client) -> None:
    got = client.get_trace(tid(3))
    expected = trace_spans(3)
    # attributes travel as JSON: bytes as base64, integers past 2**53 as strings
    expected[0].attributes.update(big=str(2**60), raw="AQI=")
    assert got.trace.spans == expected
    assert got.summary is not None
    assert got.summary.record == {"id": tid(3), "input": "hi", "output": {"text": "hello"}}
    assert got.summary.span_count == 3
    pending = client.get_trace(tid(9).upper())  # ids are case-insensitive
    assert len(pending.trace.spans) == 3
    assert pending.summary is None


def test_feedback_round_trip(client: evalsi.Client) -> None:
    stored = client.post_feedback(Feedback(trace_id=tid(1), name="thumbs", value=-1, comment="no"))
    assert (stored.source, stored.value) == ("api", -1.0)
    assert stored.time_unix_nano > 0
    client.post_feedback(stored)  # a retry of the same signal is stored once
    client.post_feedback(Feedback(session_id="sess1", name="csat", label="happy"))
    got = client.get_trace(tid(1))
    assert [(f.name, f.value, f.comment) for f in got.trace.feedback] == [("thumbs", -1.0, "no")]
    other = client.get_trace(tid(1), project_id="team-b")
    assert other.trace.feedback == []


@pytest.mark.parametrize("when", [2**63, -S])
def test_feedback_time_out_of_range_is_a_user_error(client: evalsi.Client, when: int) -> None:
    # Unix nanoseconds past 2262 (or before 1970) do not fit the signed 64-bit columns.
    with pytest.raises(UserError, match=r"feedback\.time: expected a time between 1970"):
        client.post_feedback(Feedback(trace_id=tid(1), name="thumbs", time_unix_nano=when))


def test_sessions_and_spans(client: evalsi.Client) -> None:
    sessions = client.list_sessions()
    # sess1: traces 1, 3, 5 (latest 5); sess0: 2, 4 (2 failed)
    assert [(s.session_id, s.trace_count, s.error_count) for s in sessions] == [
        ("sess1", 3, 0),
        ("sess0", 2, 1),
    ]
    assert sessions[0].first_start_unix_nano == T0 + 1 * S
    assert sessions[0].last_end_unix_nano == T0 + 6 * S
    tools = client.list_spans(type="tool", limit=3)
    assert [(s.trace_id, s.view.name if s.view else "") for s in tools] == [
        (tid(9), "search"),
        (tid(5), "search"),
        (tid(4), "search"),
    ]
    failed = client.list_spans(error=True)
    assert [(s.trace_id, s.status_message) for s in failed] == [(tid(2), "boom")]
    assert len(client.list_spans(trace_id=tid(4), limit=1000)) == 3
    assert [s.span_id for s in client.list_spans(name="gpt", limit=2)] == [sid(2), sid(2)]


def test_projects_are_kept_apart(client: evalsi.Client) -> None:
    b = client.list_traces(project_id="team-b")
    assert [(t.trace_id, t.service) for t in b] == [(tid(1), "b-svc")]
    assert {s.service for s in client.list_spans(project_id="team-b", limit=100)} == {"b-svc"}
    assert client.list_traces(project_id="nobody") == []
    with pytest.raises(NotFoundError, match=r"trace_id: no trace"):
        client.get_trace(tid(5), project_id="team-b")


# -- REST ---------------------------------------------------------------------------------------
def test_rest_routes(server: AsgiServer) -> None:
    status, body = rest(server, "/v1alpha1/traces?service=bot&pageSize=2")
    assert status == 200
    assert [t["traceId"] for t in body["traces"]] == [tid(5), tid(3)]
    status, page2 = rest(
        server, f"/v1alpha1/traces?service=bot&pageSize=2&pageToken={body['nextPageToken']}"
    )
    assert [t["traceId"] for t in page2["traces"]] == [tid(2), tid(1)]
    assert page2["nextPageToken"] == ""
    query = "attributes=" + quote("tier=gold") + "&attributes=" + quote("service.name=bot")
    status, body = rest(server, f"/v1alpha1/traces?{query}")
    assert [t["traceId"] for t in body["traces"]] == [tid(5), tid(3), tid(1)]
    status, body = rest(
        server, "/v1alpha1/traces?error=true&since=" + quote("2023-11-14T22:13:21Z")
    )
    assert [t["traceId"] for t in body["traces"]] == [tid(2)]
    status, body = rest(server, f"/v1alpha1/traces/{tid(5)}")
    assert status == 200
    spans = body["trace"]["spans"]
    assert [s["type"] for s in spans] == ["agent", "llm", "tool"]
    assert spans[1]["view"]["usage"] == {"inputTokens": "3", "outputTokens": "2"}
    assert spans[0]["startTime"] == "2023-11-14T22:13:25Z"
    assert body["trace"]["record"]["output"] == {"text": "hello"}
    status, body = rest(server, "/v1alpha1/sessions?pageSize=1")
    assert [s["sessionId"] for s in body["sessions"]] == ["sess1"]
    status, body = rest(server, f"/v1alpha1/spans?traceId={tid(5)}&type=llm")
    assert [s["spanId"] for s in body["spans"]] == [sid(2)]
    status, body = rest(
        server,
        "/v1alpha1/feedback",
        {"projectId": "team-b", "feedback": {"traceId": tid(1), "name": "thumbs", "value": 1}},
    )
    assert status == 200
    assert body["feedback"]["source"] == "api"
    _, got = rest(server, f"/v1alpha1/traces/{tid(1)}?projectId=team-b")
    assert [f["name"] for f in got["trace"]["feedback"]] == ["thumbs"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1alpha1/traces/xyz", None, "trace_id"),
        ("/v1alpha1/traces?pageSize=-1", None, "page_size"),
        ("/v1alpha1/traces?pageToken=garbage", None, "page_token"),
        ("/v1alpha1/traces?attributes=noequals", None, "attributes"),
        ("/v1alpha1/traces?projectId=no%20spaces", None, "project_id"),
        ("/v1alpha1/sessions?since=2024-01-02T00:00:00Z&until=2024-01-01T00:00:00Z", None, "until"),
        ("/v1alpha1/spans?type=bogus", None, "type"),
        ("/v1alpha1/spans?since=9999-01-01T00:00:00Z", None, "since"),
        ("/v1alpha1/traces?until=1900-01-01T00:00:00Z", None, "until"),
        ("/v1alpha1/spans?traceId=123", None, "trace_id"),
        ("/v1alpha1/feedback", {}, "feedback"),
        ("/v1alpha1/feedback", {"feedback": {"name": "x"}}, "trace_id or a session_id"),
        ("/v1alpha1/feedback", {"feedback": {"traceId": tid(1)}}, "feedback.name"),
        ("/v1alpha1/feedback", {"feedback": {"traceId": "zz", "name": "x"}}, "feedback.trace_id"),
        # Past 2262 or before 1970 the unix nanoseconds overflow a signed 64-bit integer.
        (
            "/v1alpha1/feedback",
            {"feedback": {"traceId": tid(1), "name": "x", "time": "9999-12-31T00:00:00Z"}},
            "feedback.time: expected a time between 1970-01-01 and 2262-04-11",
        ),
        (
            "/v1alpha1/feedback",
            {"feedback": {"traceId": tid(1), "name": "x", "time": "1900-01-01T00:00:00Z"}},
            "feedback.time: expected a time between 1970-01-01 and 2262-04-11",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    server: AsgiServer, path: str, body: dict[str, Any] | None, field: str
) -> None:
    status, answer = rest(server, path, body)
    assert status == 400, answer
    assert answer["code"] == "invalid_argument"
    assert field in answer["message"]


def test_unknown_trace_is_a_404(server: AsgiServer) -> None:
    status, answer = rest(server, f"/v1alpha1/traces/{tid(77)}")
    assert status == 404
    assert answer["code"] == "not_found"
    assert tid(77) in answer["message"]


def test_openapi_lists_the_trace_routes(server: AsgiServer) -> None:
    _, doc = rest(server, "/openapi.json")
    for path in ("/v1alpha1/traces", "/v1alpha1/traces/{trace_id}", "/v1alpha1/sessions"):
        assert path in doc["paths"], sorted(doc["paths"])


# -- gRPC ---------------------------------------------------------------------------------------
def test_grpc(server: AsgiServer) -> None:
    with grpc.insecure_channel(
        f"{server.host}:{server.port}", options=[("grpc.enable_http_proxy", 0)]
    ) as channel:
        list_traces = channel.unary_unary(
            "/evalsi.v1alpha1.TraceService/ListTraces",
            request_serializer=pb.ListTracesRequest.SerializeToString,
            response_deserializer=pb.ListTracesResponse.FromString,
        )
        reply = list_traces(pb.ListTracesRequest(service="other"), timeout=10)
        assert [t.trace_id for t in reply.traces] == [tid(4)]
        get = channel.unary_unary(
            "/evalsi.v1alpha1.TraceService/GetTrace",
            request_serializer=pb.GetTraceRequest.SerializeToString,
            response_deserializer=pb.GetTraceResponse.FromString,
        )
        assert len(get(pb.GetTraceRequest(trace_id=tid(4)), timeout=10).trace.spans) == 3
        with pytest.raises(grpc.RpcError) as err:
            get(pb.GetTraceRequest(trace_id=tid(4), project_id="team-b"), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as err:
            get(pb.GetTraceRequest(trace_id="nope"), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
