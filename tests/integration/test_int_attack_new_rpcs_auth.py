"""The agents-in-the-wild RPCs (RunService.ReplayRun, PromotionService.Promote) on a real
server with identity on: no credential is 401, a role without the permission is 403, a
project the caller holds no grant in is 404 (its existence not shown), as is a missing run; a
dataset name that tries to leave the datasets directory is 400."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from joserfc.jwk import RSAKey

from evalsi.server import load_config
from tests.support.auth_rig import SECRET, config_doc, http, write_config
from tests.support.jwks_server import JwksServer
from tests.support.server_state import server_state, serving


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("attack-auth")
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with JwksServer(key) as jwks:
        config = load_config(write_config(tmp, config_doc(jwks.url, jwks.jwks_url)))
        with serving(server_state(tmp, auth=config.auth)) as server:
            yield server.url


def _call(url: str, key: str | None, path: str, body: dict[str, Any]) -> tuple[int, str]:
    status, _, text = http(url + path, SECRET[key] if key else None, body=body, method="POST")
    return status, text


REPLAY = "/v1alpha1/runs/01HZZZZZZZZZZZZZZZZZZZZZZZ:replay"
PROMOTE = "/v1alpha1/datasets/regressions:promote"


@pytest.mark.parametrize(
    ("key", "path", "body", "expected"),
    [
        (None, REPLAY, {"projectId": "alpha"}, 401),
        ("viewer-a", REPLAY, {"projectId": "alpha"}, 403),
        ("editor-a", REPLAY, {"projectId": "beta"}, 404),
        ("editor-a", REPLAY, {"projectId": "alpha"}, 404),
        ("ingest-a", REPLAY, {"projectId": "alpha"}, 403),
        (None, PROMOTE, {"projectId": "alpha", "runId": "x"}, 401),
        ("viewer-a", PROMOTE, {"projectId": "alpha", "runId": "x"}, 403),
        ("editor-a", PROMOTE, {"projectId": "beta", "runId": "x"}, 404),
        ("editor-a", PROMOTE, {"projectId": "alpha", "runId": "x"}, 404),
        ("author-a", PROMOTE, {"projectId": "alpha", "traces": {}}, 403),
        ("editor-a", "/v1alpha1/datasets/..%2f..%2fetc:promote",
         {"projectId": "alpha", "runId": "x"}, 400),
    ],
)  # fmt: skip
def test_the_new_rpcs_are_guarded(
    url: str, key: str | None, path: str, body: dict[str, Any], expected: int
) -> None:
    status, text = _call(url, key, path, body)
    assert status == expected, text
