"""No credential anywhere it could be read back: ``evalsi serve`` (a process of its own,
logging at DEBUG to stderr) with an OIDC provider and API keys is called with good and bad
credentials on REST, Connect, gRPC and OTLP — wrong, truncated and extended keys, a revoked
key, expired, tampered, foreign and unsigned tokens — and then every log line, every answer
(but the one that shows a new key once), every audit event and every row of every table of
its SQLite store, and every file it wrote, are searched for each credential and its fragments:
none is found. The search is shown able to find one: the key a CreateApiKey answer shows."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import RSAKey
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

import evalsi
from evalsi.auth import new_key
from tests.support.auth_rig import SECRET, config_doc, http, token, write_config
from tests.support.jwks_server import JwksServer, mint
from tests.support.policy_traces import agent_turn
from tests.support.server_state import ServeProcess, free_port

# `evalsi serve` with the root logger at DEBUG first (serve keeps a configured root as it is).
SERVE = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,\n"
    "                    format='%(asctime)s %(levelname)s %(name)s: %(message)s')\n"
    "from evalsi.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
WINDOW = 16  # characters: any run of this many from a key's secret part counts as a leak
RECORDS = [{"id": "1", "output": {"text": "a"}, "reference": {"text": "a"}}]


@dataclass
class Seen:
    """What the calls showed: every answer, and every credential sent."""

    answers: list[str] = field(default_factory=list)
    credentials: set[str] = field(default_factory=set)
    shown_once: str = ""  # the CreateApiKey answer: it holds the new key, by design


def fragments(credential: str) -> set[str]:
    """What of ``credential`` must not be found: all of it, and for a key every run of
    ``WINDOW`` characters of its secret part (the first 8, the prefix shown to recognise a
    key, are kept on purpose); for a JWT its payload and signature segments."""
    found = {credential}
    if credential.startswith("evk_"):
        secret = credential[4:]
        found.add(secret)
        found |= {secret[i : i + WINDOW] for i in range(len(secret) - WINDOW + 1)}
    elif credential.count(".") == 2:
        _, payload, signature = credential.split(".")
        found |= {s for s in (payload, signature) if len(s) >= WINDOW}
    return found


def store_text(path: Path) -> str:
    """Every row of every table of the SQLite store at ``path``, as text."""
    lines = []
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert "audit_events" in tables
        assert "api_keys" in tables
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                lines.append(f"{table}: " + " | ".join(_text(v) for v in row))
    return "\n".join(lines)


def _line(text: str, fragment: str) -> str:
    """The line of ``text`` holding ``fragment``, the fragment masked (for the failure)."""
    at = text.index(fragment)
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start : end if end >= 0 else None][:300].replace(fragment, "<LEAK>")


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace") + " " + base64.b64encode(value).decode()
    return str(value)


@pytest.fixture(scope="module")
def idp() -> Iterator[tuple[JwksServer, RSAKey]]:
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with JwksServer(key) as server:
        yield server, key


def _serve(tmp: Path, idp: tuple[JwksServer, RSAKey]) -> tuple[ServeProcess, str]:
    """``evalsi serve`` in ``tmp`` (its store: ``tmp/.evalsi/evalsi.db``) and its URL."""
    jwks, _ = idp
    config = write_config(tmp, config_doc(jwks.url, jwks.jwks_url))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, "serve", "--port", str(port), "--config", str(config)],
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = ServeProcess(proc)
    url = f"http://127.0.0.1:{port}"
    served.wait_healthy(url)
    return served, url


def _calls(url: str, idp: tuple[JwksServer, RSAKey], seen: Seen) -> None:
    """Good and bad credentials on every surface; each answer and credential kept."""
    jwks, key = idp

    def call(credential: str | None, path: str, body: Any = None, **headers: str) -> int:
        if credential:
            seen.credentials.add(credential)
        method = "GET" if body is None else "POST"
        status, _, text = http(url + path, credential, body=body, method=method, **headers)
        seen.answers.append(text)
        return status

    evaluate = {"records": RECORDS, "evaluators": [{"ref": "exact-match"}], "projectId": "alpha"}
    skipped = {"evaluator": "judge", "outcome": "OUTCOME_SKIPPED"}
    ingest = {"clientKey": "secrets", "projectId": "alpha", "evaluators": [{"name": "judge"}],
              "records": [{"record": {"id": "1", "output": {"text": "x"}},
                           "results": [skipped]}]}  # fmt: skip
    # good keys and tokens
    assert call(SECRET["viewer-a"], "/v1alpha1/runs?projectId=alpha") == 200
    assert call(SECRET["editor-a"], "/v1alpha1/evaluate", evaluate) == 200
    assert call(SECRET["editor-a"], "/v1alpha1/ingest", ingest) == 200
    alice = token(key, jwks.url, sub="alice")
    assert call(alice, "/v1alpha1/auth/whoami") == 200
    assert call(alice, "/v1alpha1/evaluate", evaluate) == 200
    for protocol in ("connect", "grpc"):
        with evalsi.Client(url, api_key=SECRET["viewer-a"], protocol=protocol) as client:
            assert client.list_runs(project_id="alpha")
        with evalsi.Client(url, token=alice, protocol=protocol) as client:
            assert client.list_runs(project_id="alpha")
    _, _, spans = agent_turn("thanks")
    exporter = OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"authorization": f"Bearer {SECRET['ingest-a']}"}
    )
    assert exporter.export(spans).name == "SUCCESS"
    exporter.shutdown()  # type: ignore[no-untyped-call]
    seen.credentials.add(SECRET["ingest-a"])
    # a key made, shown once, used, revoked, refused
    status, made, text = http(
        url + "/v1alpha1/projects/alpha/apiKeys",
        SECRET["admin-a"],
        body={"name": "made", "role": "viewer"},
        method="POST",
    )
    assert status == 200, text
    seen.credentials.add(SECRET["admin-a"])
    seen.shown_once = text
    fresh = made["key"]
    assert call(fresh, "/v1alpha1/runs?projectId=alpha") == 200
    revoke = f"/v1alpha1/projects/alpha/apiKeys/{made['apiKey']['id']}:revoke"
    assert call(SECRET["admin-a"], revoke, {}) == 200
    assert call(fresh, "/v1alpha1/runs?projectId=alpha") == 401
    # refused: a denied role, wrong / truncated / extended keys, a key without "Bearer"
    assert call(SECRET["viewer-a"], "/v1alpha1/evaluate", evaluate) == 403
    assert call(SECRET["ingest-a"], "/v1alpha1/runs?projectId=alpha") == 403
    for bad in (new_key(), SECRET["viewer-a"][:-1], SECRET["viewer-a"] + "Q"):
        assert call(bad, "/v1alpha1/runs?projectId=alpha") == 401
    basic = base64.b64encode(SECRET["viewer-a"].encode()).decode()
    for header in (SECRET["viewer-a"], "Basic " + basic):
        assert call(None, "/v1alpha1/runs?projectId=alpha", authorization=header) == 401
    seen.credentials |= {SECRET["viewer-a"], basic}
    # refused tokens: expired, tampered, another audience, an unknown key, unsigned
    other = RSAKey.generate_key(2048, parameters={"kid": "k2"})
    now = int(time.time())
    claims = mint(key, {"iss": jwks.url, "aud": "evalsi", "sub": "alice", "exp": now + 60}, "RS256")
    none = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    for bad in (
        token(key, jwks.url, sub="alice", exp=now - 3600),
        alice[:-6] + ("AAAAAA" if not alice.endswith("AAAAAA") else "BBBBBB"),
        token(key, jwks.url, sub="alice", aud="someone-else"),
        token(other, jwks.url, sub="alice"),
        none + "." + claims.split(".")[1] + ".",
    ):
        assert call(bad, "/v1alpha1/auth/whoami") == 401
    wrong = new_key()
    seen.credentials.add(wrong)
    with (
        evalsi.Client(url, api_key=wrong, protocol="grpc") as client,
        pytest.raises(evalsi.UserError),
    ):
        client.list_runs()
    assert call(wrong, "/v1/traces", {"resourceSpans": []}) == 401


def test_no_credential_in_any_log_answer_audit_event_row_or_file(
    tmp_path: Path, idp: tuple[JwksServer, RSAKey]
) -> None:
    seen = Seen()
    served, url = _serve(tmp_path, idp)
    try:
        _calls(url, idp, seen)
    finally:
        served.stop()  # SIGTERM: the audit events still queued are written
    assert served.returncode == 0, served.stderr
    logs = served.stderr
    assert " DEBUG " in logs  # every logger at its most talkative
    store = tmp_path / ".evalsi" / "evalsi.db"
    rows = store_text(store)
    audit = [line for line in rows.splitlines() if line.startswith("audit_events:")]
    assert any("deny" in line and "apikey/viewer-a" in line for line in audit)
    assert any("authenticate" in line and "deny" in line for line in audit)
    files = {
        str(path): path.read_bytes().decode("utf-8", "replace")
        for path in (tmp_path / ".evalsi").rglob("*")
        if path.is_file()
    }
    places = {"log": logs, "answers": "\n".join(seen.answers), "store": rows, **files}
    leaks = {
        (place, _line(text, fragment))
        for credential in seen.credentials
        for fragment in fragments(credential)
        for place, text in places.items()
        if fragment in text
    }
    assert not leaks, sorted(leaks)
    made = json.loads(seen.shown_once)["key"]
    assert any(f in seen.shown_once for f in fragments(made))  # the search finds what is there
