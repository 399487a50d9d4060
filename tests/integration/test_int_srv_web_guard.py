"""What a page in the developer's browser could do to ``evalsi serve``, each as it was found,
sent over loopback to a real server: a cross-site ``text/plain`` or form POST that started a
run, a rebound DNS name (``Host: evil.example``) that read the run list, and what still passes
(curl without Origin, the server's own origin, an allow-listed origin with CORS answers, the
official clients)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.store import SqlStore
from tests.integration.run_support import write_qa
from tests.support.asgi_server import AsgiServer
from tests.support.server_state import server_state, serving

ALLOWED = "https://dash.example:8443"
RUN = {
    "run": {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "csrf"},
        "spec": {
            "target": {
                "model": {
                    "connector": "openai-compatible",
                    "baseUrl": "http://127.0.0.1:9/v1",
                    "model": "m",
                }
            },
            "dataset": {"path": "qa.jsonl"},
            "evaluators": [{"ref": "exact-match"}],
        },
    },
}
EVALUATE = {"records": [{"id": "1", "output": {"text": "a"}}], "evaluators": [{"ref": "length"}]}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Served:
    server: AsgiServer
    store: SqlStore

    def send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """One raw HTTP/1.1 request: every header exactly as given (Host too)."""
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=30)
        try:
            given = dict(headers or {})
            conn.putrequest(method, path, skip_host="Host" in given, skip_accept_encoding=True)
            for name, value in given.items():
                conn.putheader(name, value)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            response = conn.getresponse()
            return Answer(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    def runs(self) -> int:
        return len(self.store.list_runs(100))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("guard")
    (tmp / "datasets").mkdir()
    write_qa(tmp / "datasets" / "qa.jsonl", 3)
    state = server_state(tmp, allowed_hosts=("evalsi.internal",), cors_allow_origins=(ALLOWED,))
    with serving(state) as server:
        yield Served(server, state.store)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


@pytest.mark.parametrize(
    ("path", "body", "content_type"),
    [
        ("/v1alpha1/evaluate", _json(EVALUATE), "text/plain"),
        ("/v1alpha1/evaluate", b"records=1", "application/x-www-form-urlencoded"),
        ("/v1alpha1/evaluate", b"--x\r\n\r\n--x--", "multipart/form-data; boundary=x"),
        ("/v1alpha1/runs", _json(RUN), "text/plain;charset=UTF-8"),
        ("/v1alpha1/policies", _json({"policy": {}}), "text/plain"),
    ],
)
def test_cross_site_simple_posts_are_refused_and_create_nothing(
    served: Served, path: str, body: bytes, content_type: str
) -> None:
    before = served.runs()
    answer = served.send(
        "POST",
        path,
        body,
        {"Content-Type": content_type, "Origin": "https://evil.example"},
    )
    assert answer.status == 403
    assert answer.json()["code"] == "permission_denied"
    assert "server.cors.allowOrigins" in answer.json()["message"]
    assert "access-control-allow-origin" not in answer.headers
    assert served.runs() == before


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_form_content_types_are_refused_even_without_origin(
    served: Served, content_type: str
) -> None:
    before = served.runs()
    answer = served.send(
        "POST", "/v1alpha1/evaluate", _json(EVALUATE), {"Content-Type": content_type}
    )
    assert answer.status == 415
    assert "application/json" in answer.json()["message"]
    assert served.runs() == before
    # The same body as JSON is graded: it was the content type, nothing else.
    ok = served.send(
        "POST", "/v1alpha1/evaluate", _json(EVALUATE), {"Content-Type": "application/json"}
    )
    assert ok.status == 200, ok.body
    assert served.runs() == before + 1


def test_a_body_without_content_type_is_refused_an_empty_post_is_not(served: Served) -> None:
    assert served.send("POST", "/v1alpha1/evaluate", _json(EVALUATE)).status == 415
    # curl -X POST .../runs/ID:cancel sends no body and no type: it reaches the handler (404).
    answer = served.send("POST", "/v1alpha1/runs/nosuchrun:cancel", b"")
    assert answer.status == 404, answer.body


def test_cross_origin_gets_are_refused_too(served: Served) -> None:
    for origin in ("https://evil.example", "null", "http://127.0.0.1:1"):
        answer = served.send("GET", "/v1alpha1/runs", headers={"Origin": origin})
        assert answer.status == 403, origin
        assert "runs" not in answer.json()


def test_dns_rebinding_host_is_refused(served: Served) -> None:
    for host in (
        "evil.example",
        f"evil.example:{served.server.port}",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        f"127.0.0.1:{served.server.port + 1}",  # a loopback name on another port
        "bad host",
    ):
        answer = served.send("GET", "/v1alpha1/runs", headers={"Host": host})
        assert answer.status == 421, host
        assert "server.allowedHosts" in answer.json()["message"]
        assert b"runs" not in answer.body
    post = served.send(
        "POST",
        "/v1alpha1/evaluate",
        _json(EVALUATE),
        {"Host": "evil.example", "Content-Type": "application/json"},
    )
    assert post.status == 421


def test_own_names_and_configured_hosts_pass(served: Served) -> None:
    port = served.server.port
    for host in (
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        f"LOCALHOST:{port}",
        f"[::1]:{port}",
        "evalsi.internal",
        f"evalsi.internal:{port}",
        "evalsi.internal:443",
    ):
        answer = served.send("GET", "/v1alpha1/runs", headers={"Host": host})
        assert answer.status == 200, (host, answer.body)


def test_same_origin_browser_requests_pass(served: Served) -> None:
    own = f"http://localhost:{served.server.port}"
    answer = served.send(
        "GET", "/v1alpha1/runs", headers={"Host": f"localhost:{served.server.port}", "Origin": own}
    )
    assert answer.status == 200
    assert "access-control-allow-origin" not in answer.headers  # nothing to allow


def test_allowed_origin_gets_cors_answers(served: Served) -> None:
    preflight = served.send(
        "OPTIONS",
        "/v1alpha1/evaluate",
        headers={
            "Origin": ALLOWED,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status == 204
    assert preflight.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert preflight.headers["access-control-allow-headers"] == "content-type"
    answer = served.send(
        "POST",
        "/v1alpha1/evaluate",
        _json(EVALUATE),
        {"Origin": ALLOWED, "Content-Type": "application/json"},
    )
    assert answer.status == 200
    assert answer.headers["access-control-allow-origin"] == ALLOWED
    assert answer.headers["vary"] == "Origin"
    # Even an allowed origin cannot send a form body.
    form = served.send(
        "POST", "/v1alpha1/evaluate", b"a=1", {"Origin": ALLOWED, "Content-Type": "text/plain"}
    )
    assert form.status == 415


def test_preflight_from_a_foreign_origin_is_refused(served: Served) -> None:
    answer = served.send(
        "OPTIONS",
        "/v1alpha1/runs",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert answer.status == 403
    assert "access-control-allow-origin" not in answer.headers
    # The allowed origin on another scheme or port is another origin.
    for near in ("http://dash.example:8443", "https://dash.example", "https://dash.example:8444"):
        assert served.send("GET", "/v1alpha1/runs", headers={"Origin": near}).status == 403


def test_otlp_routes_refuse_cross_site_posts_and_keep_their_415(served: Served) -> None:
    cross = served.send(
        "POST",
        "/v1/traces",
        b"{}",
        {"Content-Type": "text/plain", "Origin": "https://evil.example"},
    )
    assert cross.status == 403
    plain = served.send("POST", "/v1/traces", b"{}", {"Content-Type": "text/plain"})
    assert plain.status == 415  # the route's own check, unchanged
    assert served.send("POST", "/v1/traces", b"{}", {"Host": "evil.example"}).status == 421


def test_official_clients_pass(served: Served) -> None:
    rows = [{"id": "1", "output": "a", "reference": "a"}]
    for protocol in ("connect", "grpc"):
        with evalsi.Client(served.server.url, protocol=protocol) as client:
            assert client.evaluate(rows, ["exact-match"]).metrics
            assert client.list_runs(limit=1)


def test_a_server_without_configuration_allows_no_origin(tmp_path: Path) -> None:
    with serving(server_state(tmp_path, runs=False)) as server:
        served = Served(server, SqlStore.open(str(tmp_path / "s.db")))
        try:
            answer = served.send("GET", "/v1alpha1/runs", headers={"Origin": ALLOWED})
            assert answer.status == 403
            assert (
                served.send("GET", "/v1alpha1/runs", headers={"Host": "evalsi.internal"}).status
                == 421
            )
        finally:
            served.store.close()


def test_a_browser_request_to_the_native_grpc_port_reaches_nothing(tmp_path: Path) -> None:
    from tests.integration.test_int_srvgrpc_ports import BothPorts
    from tests.support.server_state import build_app

    state = server_state(tmp_path)
    with BothPorts(build_app(state), state) as servers:
        conn = http.client.HTTPConnection("127.0.0.1", servers.grpc_port, timeout=10)
        body = _json(EVALUATE)
        headers = {"Content-Type": "text/plain", "Origin": "https://evil.example"}
        conn.request("POST", "/evalsi.v1alpha1.EvaluationService/Evaluate", body, headers)
        # grpcio answers an HTTP/1.1 request with HTTP/2 frames or a close: no HTTP response.
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            conn.getresponse()
        conn.close()
        assert state.store.list_runs(10) == []
    state.store.close()
