"""``/mcp`` on ``evalsi serve``: the same tools over streamable HTTP, behind the server's
identity layer as the MCP authorization specification asks — 401 with the protected-resource
metadata's address, the metadata itself, tokens bound to the ``/mcp`` resource, every call
decided by the gate with the credential it came with — and the browser guard's Origin check."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from joserfc.jwk import RSAKey
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from evalsi.auth import key_hash
from evalsi.server import load_config
from tests.support.jwks_server import JwksServer, mint
from tests.support.server_state import server_state, serving

pytestmark = pytest.mark.anyio

KEYS = {"editor": ("default", "editor"), "viewer": ("default", "viewer")}
SECRET = {name: f"evk_mcp{name}" + "x" * 32 for name in KEYS}
RECORDS = {
    "records": [{"id": "1", "output": {"text": "Paris"}, "reference": {"text": "Paris"}}],
    "evaluators": [{"ref": "exact-match"}],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def connect(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=headers or {}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        client.http = http  # type: ignore[attr-defined]  # the tests change its headers
        yield client


def post(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={**sent, **headers}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


async def test_mcp_without_auth_serves_the_tools_and_refuses_a_foreign_origin(
    tmp_path: Path,
) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    rows = [{"id": f"s{i}", "input": "x", "output": "x", "reference": "x"} for i in range(3)]
    (datasets / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with serving(server_state(tmp_path)) as server:
        url = f"{server.url}/mcp"
        async with connect(url) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            assert "evaluate" in tools
            assert "start_run" in tools
            graded = await client.call_tool("evaluate", RECORDS)
            assert not graded.is_error
            assert graded.structured_content["metrics"][0]["mean"] == 1.0
            python = await client.call_tool(
                "start_run",
                {
                    "run": {
                        "apiVersion": "evals.si/v1alpha1",
                        "kind": "EvalRun",
                        "spec": {
                            "target": {"python": "os:getcwd"},
                            "dataset": {"path": "rows.jsonl"},
                            "evaluators": [{"ref": "exact-match"}],
                        },
                    }
                },
            )
            assert python.is_error
            assert "Python targets are refused" in python.content[0].text
        status, _, _ = post(url, {"origin": "http://evil.example"})
        assert status == 403  # a web page may not drive the loopback server's tools
        status, _, _ = post(url, {"host": "evil.example"})
        assert status == 421  # DNS rebinding


def _config(tmp: Path, issuer: str, jwks: str) -> Path:
    keys = [
        {"name": n, "key": key_hash(SECRET[n]), "project": p, "role": r}
        for n, (p, r) in KEYS.items()
    ]
    doc = {
        "auth": {
            "oidc": {
                "providers": [
                    {"name": "corp", "issuer": issuer, "audience": "evalsi", "jwks": jwks,
                     "allowInsecureJwks": True, "algorithms": ["RS256"]}
                ]
            },
            "apiKeys": {"keys": keys},
            "allowPlaintext": True,
        },
        "rbac": {"bindings": [{"role": "editor", "project": "default",
                               "subjects": ["user:corp/alice"]}]},
    }  # fmt: skip
    path = tmp / "evalsi.yaml"
    path.write_text(json.dumps(doc))
    return path


async def test_mcp_follows_the_authorization_spec_over_the_identity_layer(tmp_path: Path) -> None:
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with JwksServer(key) as idp:
        config = load_config(_config(tmp_path, idp.url, idp.jwks_url))
        state = server_state(tmp_path, auth=config.auth)
        with serving(state) as server:
            url = f"{server.url}/mcp"

            def jwt(aud: Any) -> str:
                now = int(time.time())
                claims = {"iss": idp.url, "sub": "alice", "aud": aud, "exp": now + 300,
                          "iat": now}  # fmt: skip
                return mint(key, claims, "RS256")

            # No credential: 401, and where to learn how to get one.
            status, headers, _ = post(url, {})
            assert status == 401
            challenge = {k.lower(): v for k, v in headers.items()}["www-authenticate"]
            metadata_url = f"{server.url}/.well-known/oauth-protected-resource/mcp"
            assert challenge == f'Bearer resource_metadata="{metadata_url}"'
            with urllib.request.urlopen(metadata_url, timeout=10) as r:
                metadata = json.loads(r.read())
            assert metadata["resource"] == url
            assert metadata["authorization_servers"] == [idp.url]
            assert metadata["bearer_methods_supported"] == ["header"]
            assert post(url, {"authorization": "Bearer evk_wrong" + "x" * 32})[0] == 401

            # A token of the provider but not for this resource is refused; one bound to it
            # (RFC 8707: aud holds the /mcp URL) comes in.
            status, _, text = post(url, {"authorization": f"Bearer {jwt('evalsi')}"})
            assert status == 401
            assert "audience" in text
            bound = jwt(["evalsi", url])
            async with connect(url, {"authorization": f"Bearer {bound}"}) as client:
                graded = await client.call_tool("evaluate", RECORDS)
                assert not graded.is_error

            # A session belongs to the credential that opened it: another one using its id
            # is answered as if it did not exist (it can neither call nor cancel nor end it).
            async with connect(url, {"authorization": f"Bearer {SECRET['editor']}"}) as client:
                assert not (await client.call_tool("evaluate", RECORDS)).is_error
                client.http.headers["authorization"] = f"Bearer {SECRET['viewer']}"  # type: ignore[attr-defined]
                # A session (legacy protocol): not found; per request (2026-07-28): denied.
                answer: Any
                try:
                    answer = (await client.call_tool("evaluate", RECORDS)).content[0].text
                except Exception as e:  # noqa: BLE001
                    answer = str(e)
                assert answer.startswith("permission_denied") or "ession not found" in answer
                client.http.headers["authorization"] = f"Bearer {SECRET['editor']}"  # type: ignore[attr-defined]
                assert not (await client.call_tool("list_runs", {})).is_error
            # In its own session a viewer's calls are decided by the gate as any RPC would be.
            async with connect(url, {"authorization": f"Bearer {SECRET['viewer']}"}) as client:
                denied = await client.call_tool("evaluate", RECORDS)
                assert denied.is_error
                assert denied.content[0].text.startswith("permission_denied")
                assert not (await client.call_tool("list_runs", {})).is_error  # it may read
                with pytest.raises(Exception, match="no resource") as caught:
                    await client.read_resource(f"evalsi://runs/{'x' * 5000}/report.md")
                assert "SELECT" not in str(caught.value)
                with pytest.raises(Exception, match="not_found"):
                    await client.read_resource("evalsi://projects/default/runs/nope/report.md")
