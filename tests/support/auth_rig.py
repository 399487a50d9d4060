"""Two projects behind identity and access, as the scope, OWASP and secrets tests build them:
API keys of each built-in role in ``alpha`` and ``beta``, an OIDC provider on loopback
(``JwksServer``), and a small REST client answering ``(status, JSON body, raw text)``.

    with JwksServer(key) as idp:
        doc = config_doc(idp.url, idp.jwks_url)
        config = load_config(write_config(tmp, doc))
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from joserfc.jwk import RSAKey

from evalsi.auth import key_hash, new_key
from tests.support.jwks_server import mint

PROJECTS = ("alpha", "beta")
KEYS: dict[str, tuple[str, str]] = {
    "viewer-a": ("alpha", "viewer"),
    "editor-a": ("alpha", "editor"),
    "admin-a": ("alpha", "admin"),
    "ingest-a": ("alpha", "ingest"),
    "viewer-b": ("beta", "viewer"),
    "editor-b": ("beta", "editor"),
    "admin-b": ("beta", "admin"),
    "ingest-b": ("beta", "ingest"),
    "editor-d": ("default", "editor"),
    "author-a": ("alpha", "policy-author"),
    "owner": ("*", "owner"),
}
SECRET = {name: new_key() for name in KEYS}  # made as evalsi makes keys, fresh each run
AUDIENCE = "evalsi"


def config_doc(issuer: str, jwks_url: str, **extra: Any) -> dict[str, Any]:
    """``evalsi.yaml`` with both projects, every key of ``KEYS`` (by hash), the provider
    ``corp`` at ``issuer`` and alice an editor of alpha; ``extra`` updates ``auth:``."""
    keys = [
        {"name": n, "key": key_hash(SECRET[n]), "project": p, "role": r}
        for n, (p, r) in KEYS.items()
    ]
    auth: dict[str, Any] = {
        "oidc": {
            "providers": [
                {"name": "corp", "issuer": issuer, "audience": AUDIENCE, "jwks": jwks_url,
                 "allowInsecureJwks": True, "algorithms": ["RS256"]}
            ]
        },
        "apiKeys": {"keys": keys},
        "allowPlaintext": True,
        **extra,
    }  # fmt: skip
    return {
        "projects": list(PROJECTS),
        "auth": auth,
        "rbac": {
            # applies policies but writes no datasets (promotion needs datasets.write)
            "roles": [
                {"name": "policy-author", "inherits": ["viewer"], "permissions": ["policies.write"]}
            ],
            "bindings": [{"role": "editor", "project": "alpha", "subjects": ["user:corp/alice"]}],
        },
    }


def write_config(tmp: Path, doc: dict[str, Any]) -> Path:
    path = tmp / "evalsi.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def token(key: RSAKey, issuer: str, **claims: Any) -> str:
    """A JWT of ``issuer`` for ``AUDIENCE``, valid five minutes unless ``claims`` say."""
    now = int(time.time())
    body = {"iss": issuer, "aud": AUDIENCE, "exp": now + 300, "iat": now, **claims}
    return mint(key, body, "RS256")


def http(
    url: str,
    credential: str | None = None,
    *,
    body: Any = None,
    method: str = "GET",
    **headers: str,
) -> tuple[int, Any, str]:
    """One REST call: the status, the JSON body (``{}`` when empty, ``None`` when not JSON)
    and the body's text."""
    sent = {"content-type": "application/json", **headers}
    if credential is not None:
        sent["authorization"] = f"Bearer {credential}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            raw, status = answer.read(), answer.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(raw) if raw.strip() else {}, text
    except ValueError:
        return status, None, text
