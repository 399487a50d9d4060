"""Key rotation at a real OpenID Provider (``oidc-provider`` on Node.js), seen through a real
server: a token signed by a new key is accepted once the server fetches the key set again (an
unknown ``kid``), and a token signed by a withdrawn key stops working once the cached key set
expires, even though that token was accepted before."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.server import load_config
from tests.support.oidc_provider import OidcProvider
from tests.support.server_state import server_state, serving

TTL_S = 1.0


@pytest.fixture
def op() -> Iterator[OidcProvider]:
    with OidcProvider(audience="evalsi") as provider:
        yield provider


@pytest.fixture
def url(tmp_path: Path, op: OidcProvider) -> Iterator[str]:
    doc = {
        "auth": {
            "oidc": {"providers": [{
                "name": "corp", "issuer": op.issuer, "audience": "evalsi", "jwks": "discovery",
                "allowInsecureJwks": True, "jwksCacheTtl": f"{TTL_S}s",
                "jwksRefreshInterval": "100ms",
            }]},
            "allowPlaintext": True,
        },
        "rbac": {"bindings": [{"role": "viewer", "project": "default",
                               "subjects": ["user:corp/alice"]}]},
    }  # fmt: skip
    (tmp_path / "evalsi.yaml").write_text(json.dumps(doc))
    config = load_config(tmp_path / "evalsi.yaml")
    with serving(server_state(tmp_path, auth=config.auth)) as served:
        yield served.url


def _whoami(url: str, token: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url + "/v1alpha1/auth/whoami", headers={"authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _token(op: OidcProvider) -> str:
    return op.mint({"sub": "alice", "aud": "evalsi"})


def test_a_new_key_is_picked_up_and_a_withdrawn_one_stops_working(
    op: OidcProvider, url: str
) -> None:
    old = _token(op)
    assert _whoami(url, old)[0] == 200
    op.rotate()
    new = _token(op)
    assert new != old
    status, me = _whoami(url, new)  # an unknown kid: the key set is fetched again
    assert status == 200, me
    assert me["subject"] == "alice"
    assert _whoami(url, old)[0] == 200  # both keys are published for now
    op.withdraw_old()
    time.sleep(TTL_S + 0.3)  # the cached key set expires
    status, answer = _whoami(url, old)
    assert status == 401, answer
    assert "alice" not in json.dumps(answer)
    assert _whoami(url, new)[0] == 200
