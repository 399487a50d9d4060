"""WebGuard as ASGI middleware, without a network: what a browser trick gets (421, 403, 415, with
a JSON body naming the rule and the evalsi.yaml key that changes it) and what passes untouched."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from evalsi.server._web_guard import PREFLIGHT_MAX_AGE_S, WebGuard

SERVER = ("127.0.0.1", 8080)
ORIGIN = "http://localhost:3000"


class _App:
    """The app behind the guard: answers 200 and records that it ran."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})


def _call(
    guard: WebGuard,
    method: str = "GET",
    path: str = "/v1alpha1/runs",
    *,
    kind: str = "http",
    **headers: str,
) -> tuple[int | None, dict[str, str], dict[str, Any] | None, list[dict[str, Any]]]:
    """(status, headers, JSON body or None, every message sent) for one request."""
    scope = {
        "type": kind,
        "method": method,
        "path": path,
        "scheme": "http",
        "server": SERVER,
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    out_headers = {k.decode(): v.decode() for k, v in (start or {}).get("headers", [])}
    parsed = json.loads(body) if out_headers.get("content-type") == "application/json" else None
    return (start or {}).get("status"), out_headers, parsed, sent


def test_a_host_the_server_does_not_answer_to_is_421_naming_the_setting() -> None:
    app = _App()
    status, _, body, _ = _call(WebGuard(app), host="evil.example:8080")
    assert status == 421
    assert body is not None
    assert body["code"] == "permission_denied"
    assert "'evil.example:8080'" in body["message"]
    assert "server.allowedHosts" in body["message"]
    assert app.calls == 0


def test_a_foreign_origin_is_403_even_for_a_get() -> None:
    app = _App()
    status, _, body, _ = _call(WebGuard(app), host="localhost:8080", origin="https://evil.example")
    assert status == 403
    assert body is not None
    assert "server.cors.allowOrigins" in body["message"]
    assert app.calls == 0


def test_a_listed_origin_gets_its_preflight_and_cors_headers() -> None:
    app = _App()
    guard = WebGuard(app, allow_origins=[ORIGIN])
    status, headers, _, _ = _call(
        guard,
        "OPTIONS",
        host="localhost:8080",
        origin=ORIGIN,
        access_control_request_method="POST",
        access_control_request_headers="connect-protocol-version, content-type",
    )
    assert status == 204
    assert headers["access-control-allow-origin"] == ORIGIN
    assert headers["access-control-allow-headers"] == "connect-protocol-version, content-type"
    assert headers["access-control-max-age"] == str(PREFLIGHT_MAX_AGE_S)
    assert app.calls == 0  # answered by the guard
    status, headers, _, _ = _call(guard, host="localhost:8080", origin=ORIGIN)
    assert status == 200
    assert headers["access-control-allow-origin"] == ORIGIN
    assert "grpc-status" in headers["access-control-expose-headers"]
    assert "mcp-session-id" in headers["access-control-expose-headers"]  # an MCP browser client
    assert app.calls == 1


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_a_body_a_form_can_send_is_415(content_type: str) -> None:
    app = _App()
    status, _, body, _ = _call(
        WebGuard(app), "POST", host="127.0.0.1:8080", content_type=content_type
    )
    assert status == 415
    assert body is not None
    assert body["code"] == "invalid_argument"
    assert content_type in body["message"]
    assert "application/json" in body["message"]
    assert app.calls == 0


@pytest.mark.parametrize(
    ("headers", "passes"),
    [
        ({"content_type": "application/json; charset=utf-8"}, True),
        ({"content_type": "application/grpc-web+proto"}, True),
        ({}, True),  # no body at all: curl -X POST .../runs/ID:cancel
        ({"content_length": "12"}, False),  # a body without a type
        ({"transfer_encoding": "chunked"}, False),
    ],
)
def test_api_bodies_must_say_what_they_are(headers: dict[str, str], passes: bool) -> None:
    app = _App()
    status, _, _, _ = _call(WebGuard(app), "POST", host="127.0.0.1:8080", **headers)
    assert (status == 200) is passes
    assert app.calls == int(passes)


def test_routes_with_their_own_body_rules_are_left_to_them() -> None:
    app = _App()
    guard = WebGuard(app, own_body_rules=lambda path: path == "/v1/traces")
    status, _, _, _ = _call(guard, "POST", "/v1/traces", host="127.0.0.1:8080", content_type="x/y")
    assert (status, app.calls) == (200, 1)


def test_requests_without_a_browser_s_headers_pass() -> None:
    app = _App()
    assert _call(WebGuard(app), host="localhost:8080")[0] == 200  # curl, the SDKs
    assert _call(WebGuard(app))[0] == 200  # no Host (HTTP/1.0)
    assert app.calls == 2


def test_a_refused_websocket_is_closed_with_a_policy_code() -> None:
    app = _App()
    _, _, _, sent = _call(WebGuard(app), kind="websocket", host="evil.example")
    assert sent[0]["type"] == "websocket.close"
    assert sent[0]["code"] == 1008
    assert app.calls == 0


def test_lifespan_goes_straight_to_the_app() -> None:
    app = _App()
    _call(WebGuard(app), kind="lifespan")
    assert app.calls == 1
