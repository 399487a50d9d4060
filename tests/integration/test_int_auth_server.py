"""Identity and access on a real server: API keys and OIDC tokens on every surface, roles and
their conditions, projects (another project's resources are not found), allow rules for a CI
token, escalation refused, and every denial in the audit log with what decided it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import RSAKey

import evalsi
from evalsi.auth import key_hash
from evalsi.server import load_config
from tests.support.jwks_server import JwksServer, mint
from tests.support.server_state import server_state, serving

KEYS = {
    "viewer-a": ("alpha", "viewer"),
    "runner-a": ("alpha", "runner"),
    "admin-a": ("alpha", "admin"),
    "qwen-a": ("alpha", "qwen-runner"),
    "ingest-b": ("beta", "ingest"),
    "owner": ("*", "owner"),
}
SECRET = {name: f"evk_test{name.replace('-', '')}" + "x" * 30 for name in KEYS}


def _config(tmp: Path, issuer: str, jwks_url: str) -> Path:
    keys = [
        {"name": n, "key": key_hash(SECRET[n]), "project": p, "role": r}
        for n, (p, r) in KEYS.items()
    ]
    doc = {
        "projects": ["alpha", "beta"],
        "auth": {
            "oidc": {
                "providers": [
                    {"name": "corp", "issuer": issuer, "audience": "evalsi",
                     "jwks": jwks_url, "allowInsecureJwks": True, "algorithms": ["RS256"]}
                ]
            },
            "apiKeys": {"keys": keys},
            "allowPlaintext": True,
        },
        "rbac": {
            "roles": [
                {"name": "qwen-runner", "inherits": ["viewer"], "permissions": ["runs.create"],
                 "condition": 'resource.target.model in ["qwen3"]'}
            ],
            "bindings": [{"role": "editor", "project": "alpha", "subjects": ["user:corp/alice"]}],
        },
        "authorization": {
            "rules": [
                {"name": "ci", "allow": 'jwt.repository == "acme/agent" && request.action in '
                 '["runs.create", "runs.read"] && resource.project == "alpha"'},
                {"name": "no-bob", "deny": 'principal.subject == "bob"'},
            ]
        },
    }  # fmt: skip
    path = tmp / "evalsi.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


@pytest.fixture(scope="module")
def idp() -> Iterator[tuple[JwksServer, RSAKey]]:
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with JwksServer(key) as server:
        yield server, key


@pytest.fixture
def server(tmp_path: Path, idp: tuple[JwksServer, RSAKey]) -> Iterator[Any]:
    jwks, _ = idp
    config = load_config(_config(tmp_path, jwks.url, jwks.jwks_url))
    state = server_state(tmp_path, auth=config.auth)
    for project in ("default", "alpha", "beta"):  # each project reads its own datasets
        where = state.config.datasets_dir_of(project)
        where.mkdir(parents=True, exist_ok=True)
        (where / "d.jsonl").write_text('{"id": "1", "input": "q", "reference": "a"}\n')
    with serving(state) as served:
        served.state = state
        yield served


def _token(idp: tuple[JwksServer, RSAKey], **claims: Any) -> str:
    jwks, key = idp
    now = int(time.time())
    body = {"iss": jwks.url, "aud": "evalsi", "exp": now + 300, "iat": now, **claims}
    return mint(key, body, "RS256")


def _http(
    url: str, credential: str | None = None, *, body: Any = None, method: str = "GET", **h: str
) -> tuple[int, dict[str, Any]]:
    headers = {"content-type": "application/json", **h}
    if credential:
        headers["authorization"] = f"Bearer {credential}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw = answer.read()
            status = answer.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw) if raw else {}
    except ValueError:
        return status, {"text": raw.decode("utf-8", "replace")}


SPEC = {
    "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "r"},
    "spec": {"target": {"model": {"connector": "openai-compatible", "model": "MODEL",
                                   "baseUrl": "http://127.0.0.1:9/v1"}},
             "dataset": {"path": "d.jsonl"}, "evaluators": [{"ref": "exact-match"}]},
}  # fmt: skip


def _run_body(model: str, project: str = "alpha") -> dict[str, Any]:
    spec = json.loads(json.dumps(SPEC).replace("MODEL", model))
    return {"run": spec, "projectId": project, "dryRun": True}


def test_every_surface_refuses_a_call_without_credentials(server: Any) -> None:
    url = server.url
    for path in ("/v1alpha1/runs", "/metrics", "/openapi.json", "/v1alpha1/auth/whoami"):
        status, body = _http(url + path)
        assert status == 401, (path, body)
    status, body = _http(url + "/evalsi.v1alpha1.CatalogService/ListEvaluators", body={},
                         method="POST")  # fmt: skip
    assert (status, body["code"]) == (401, "unauthenticated")
    status, _ = _http(url + "/v1/traces", body={}, method="POST")
    assert status == 401
    assert _http(url + "/healthz")[0] == 200  # open by default: liveness only
    for protocol in ("connect", "grpc", "grpc-web"):
        with (
            evalsi.Client(url, protocol=protocol) as client,  # type: ignore[arg-type]
            pytest.raises(evalsi.UserError, match="refused access"),
        ):
            client.list_runs()
    status, body = _http(url + "/v1alpha1/runs", "evk_not-a-key")
    assert status == 401
    assert "evk_not-a-key" not in json.dumps(body)
    status, _ = _http(url + "/v1alpha1/runs", "not.a.jwt")
    assert status == 401


def test_a_viewer_reads_but_cannot_start_runs_or_see_another_project(server: Any) -> None:
    url, key = server.url, SECRET["viewer-a"]
    assert _http(url + "/v1alpha1/runs?projectId=alpha", key)[0] == 200
    status, body = _http(url + "/v1alpha1/runs", key, body=_run_body("gpt"), method="POST")
    assert status == 403, body
    assert _http(url + "/v1alpha1/runs?projectId=beta", key)[0] == 404
    other = server.state.store.create_run(kind="score", spec={}, project_id="beta").id
    mine = server.state.store.create_run(kind="score", spec={}, project_id="alpha").id
    assert _http(url + f"/v1alpha1/runs/{other}?projectId=alpha", key)[0] == 404
    assert _http(url + f"/v1alpha1/runs/{other}?projectId=beta", key)[0] == 404
    listed = _http(url + "/v1alpha1/runs", key)[1]["runs"]
    assert [r["id"] for r in listed] == [mine]  # only what the viewer may read
    with evalsi.Client(url, api_key=key) as client:
        assert [r.id for r in client.list_runs()] == [mine]
    assert _http(url + "/v1alpha1/traces?projectId=beta", key)[0] == 404


def test_a_role_condition_limits_the_models(server: Any) -> None:
    url, key = server.url, SECRET["qwen-a"]
    status, body = _http(url + "/v1alpha1/runs", key, body=_run_body("qwen3"), method="POST")
    assert status == 200, body
    status, body = _http(url + "/v1alpha1/runs", key, body=_run_body("gpt-5"), method="POST")
    assert status == 403, body


def test_an_admin_cannot_grant_what_it_does_not_hold(server: Any) -> None:
    url, key = server.url, SECRET["admin-a"]
    keys = url + "/v1alpha1/projects/alpha/apiKeys"
    status, body = _http(keys, key, body={"name": "ci", "role": "runner"}, method="POST")
    assert status == 200, body
    plaintext = body["key"]
    assert plaintext.startswith("evk_")
    assert body["apiKey"]["prefix"] == plaintext[:12]
    status, body = _http(keys, key, body={"name": "root", "role": "owner"}, method="POST")
    assert status == 403, body
    status, _ = _http(url + "/v1alpha1/projects/beta/apiKeys", key,
                      body={"name": "x", "role": "viewer"}, method="POST")  # fmt: skip
    assert status == 404
    status, body = _http(url + "/v1alpha1/projects/alpha/roleBindings", key,
                         body={"role": "owner", "subject": "user:corp/eve"},
                         method="POST")  # fmt: skip
    assert status == 403, body
    # The new key works at once and is scoped: runner in alpha
    assert _http(url + "/v1alpha1/runs?projectId=alpha", plaintext)[0] == 200
    listed = _http(keys, key)[1]["apiKeys"]
    assert plaintext not in json.dumps(listed)
    (made,) = [k for k in listed if k["name"] == "ci"]
    status, _ = _http(url + f"/v1alpha1/projects/alpha/apiKeys/{made['id']}:revoke", key,
                      body={}, method="POST")  # fmt: skip
    assert status == 200
    assert _http(url + "/v1alpha1/runs?projectId=alpha", plaintext)[0] == 401


def test_oidc_tokens_bindings_and_rules(server: Any, idp: Any) -> None:
    url = server.url
    alice = _token(idp, sub="alice")
    status, me = _http(url + "/v1alpha1/auth/whoami", alice)
    assert status == 200
    assert me["subject"] == "alice"
    assert me["provider"] == "corp"
    assert {"project": "alpha", "roles": ["editor"]} in me["roles"]
    ci = _token(idp, sub="repo:acme/agent:ref:refs/heads/main", repository="acme/agent")
    assert _http(url + "/v1alpha1/runs", ci, body=_run_body("gpt"), method="POST")[0] == 200
    assert _http(url + "/v1alpha1/runs", ci, body=_run_body("gpt", "beta"), method="POST")[0] in (
        403,
        404,
    )
    bob = _token(idp, sub="bob")
    assert _http(url + "/v1alpha1/auth/whoami", bob)[0] == 403  # the deny rule holds first
    expired = _token(idp, sub="alice", exp=int(time.time()) - 3600)
    assert _http(url + "/v1alpha1/auth/whoami", expired)[0] == 401


def test_otlp_goes_to_the_key_project_and_no_other(server: Any) -> None:
    url, key = server.url, SECRET["ingest-b"]
    body = {"resourceSpans": []}
    assert _http(url + "/v1/traces", key, body=body, method="POST")[0] == 200
    named = {"x-evalsi-project": "alpha"}
    assert _http(url + "/v1/traces", key, body=body, method="POST", **named)[0] == 404
    assert _http(url + "/v1alpha1/runs?projectId=beta", key)[0] == 403  # ingest only


def test_denials_are_audited_and_runs_record_who_started_them(server: Any) -> None:
    url = server.url
    _http(url + "/v1alpha1/runs", SECRET["viewer-a"], body=_run_body("gpt"), method="POST")
    with evalsi.Client(url, api_key=SECRET["runner-a"]) as client:
        result = client.evaluate(
            [{"id": "1", "output": "a", "reference": "a"}], ["exact-match"], project_id="alpha"
        )
    assert server.state.store.get_run(result.run_id).created_by == "apikey/runner-a"
    status, body = _http(url + "/v1alpha1/auditEvents?decision=deny", SECRET["owner"])
    assert status == 200, body
    denied = [e for e in body["events"] if e["action"] == "runs.create"]
    assert denied
    assert denied[0]["principal"] == "apikey/viewer-a"
    assert denied[0]["decidedBy"] == "default deny"
    text = json.dumps(body)
    assert not any(secret in text for secret in SECRET.values())
    status, _ = _http(url + "/v1alpha1/auditEvents", SECRET["viewer-a"])
    assert status == 200  # a list over readable projects: the viewer reads no audit
