"""A span's ``evalsi.project`` resource attribute, on a real server: honoured where the caller
may write traces, refused (and counted in ``partial_success``) where it may not, never stored
in a project the credential does not reach; on the in-process path and through ingest
workers alike."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import RSAKey
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from evalsi.server import load_config
from evalsi.server._state import OtlpConfig, TracesConfig
from tests.support.auth_rig import SECRET, config_doc, http, token, write_config
from tests.support.jwks_server import JwksServer
from tests.support.otlp_fixtures import genai_request
from tests.support.server_state import server_state, serving

# One ResourceSpans of 8 spans (one trace) per resource, each with its own trace ids.
RESOURCES = {
    "plain": {"service.name": "agent"},  # no attribute: the request's project
    "beta": {"service.name": "agent", "evalsi.project": "beta"},
    "gamma": {"service.name": "agent", "evalsi.project": "gamma"},  # declared nowhere
    "bad": {"service.name": "agent", "evalsi.project": "../x"},
    "number": {"service.name": "agent", "evalsi.project": 7},
}


def _request(*names: str, seed: int = 100) -> tuple[bytes, dict[str, str]]:
    """The export body, and each resource's trace id (hex; new ids for each ``seed``)."""
    request = ExportTraceServiceRequest()
    traces = {}
    for i, name in enumerate(names):
        one = genai_request(8, seed=seed + i, resource=RESOURCES[name])
        request.resource_spans.extend(one.resource_spans)
        traces[name] = one.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    return request.SerializeToString(), traces


def _export(url: str, body: bytes, credential: str | None, **headers: str) -> Any:
    sent = {"content-type": "application/x-protobuf", **headers}
    if credential:
        sent["authorization"] = f"Bearer {credential}"
    request = urllib.request.Request(url + "/v1/traces", data=body, headers=sent, method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
        return ExportTraceServiceResponse.FromString(answer.read()).partial_success


def _spans(url: str, project: str, trace_id: str) -> int:
    path = f"{url}/v1alpha1/spans?projectId={project}&traceId={trace_id}"
    for _ in range(50):  # stored before the 200; read through the store's own connection
        status, body, text = http(path, SECRET["owner"])
        assert status == 200, text
        if body.get("spans"):
            return len(body["spans"])
        time.sleep(0.05)
    return 0


@pytest.fixture(params=[0, None], ids=["in-process", "workers"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with JwksServer(key) as jwks:
        doc = config_doc(jwks.url, jwks.jwks_url)
        doc["rbac"]["bindings"] += [
            {"role": "ingest", "project": p, "subjects": ["user:corp/carol"]}
            for p in ("alpha", "beta")
        ]
        config = load_config(write_config(tmp_path, doc))
        traces = TracesConfig(otlp=OtlpConfig(), ingest_workers=request.param)
        state = server_state(tmp_path, auth=config.auth, traces=traces)
        with serving(state) as server:
            yield server.url, (jwks, key)


def test_a_span_goes_where_its_resource_says_only_if_the_caller_may_write_there(
    served: tuple[str, Any],
) -> None:
    url, (jwks, key) = served
    carol = token(key, jwks.url, sub="carol")  # ingest in alpha and beta
    body, ids = _request("plain", "beta", "gamma", "bad", "number")
    partial = _export(url, body, carol, **{"x-evalsi-project": "alpha"})
    assert partial.rejected_spans == 24  # gamma, ../x and 7: 8 spans each
    assert "evalsi.project" in partial.error_message
    assert _spans(url, "alpha", ids["plain"]) == 8
    assert _spans(url, "beta", ids["beta"]) == 8
    assert _spans(url, "alpha", ids["beta"]) == 0  # not in the request's project either
    for name in ("gamma", "bad", "number"):
        assert _spans(url, "alpha", ids[name]) == 0

    # alpha's ingest key reaches alpha only: the resource naming beta is refused
    body, ids = _request("plain", "beta", seed=200)
    partial = _export(url, body, SECRET["ingest-a"])
    assert partial.rejected_spans == 8
    assert _spans(url, "alpha", ids["plain"]) == 8
    assert _spans(url, "beta", ids["beta"]) == 0


def test_without_authentication_any_well_formed_project_is_honoured(tmp_path: Path) -> None:
    state = server_state(tmp_path)
    with serving(state) as server:
        body, ids = _request("plain", "beta", "bad")
        partial = _export(server.url, body, None)
        assert partial.rejected_spans == 8  # ../x is no project id
        for project, name in (("default", "plain"), ("beta", "beta")):
            path = f"{server.url}/v1alpha1/spans?projectId={project}&traceId={ids[name]}"
            for _ in range(50):
                found = http(path)[1].get("spans", [])
                if found:
                    break
                time.sleep(0.05)
            assert len(found) == 8, (project, name)


def test_a_request_without_the_attribute_keeps_its_fast_path(served: tuple[str, Any]) -> None:
    url, _ = served
    body, ids = _request("plain", seed=300)
    assert b"evalsi.project" not in body
    partial = _export(url, body, SECRET["ingest-a"])
    assert partial.rejected_spans == 0
    assert _spans(url, "alpha", ids["plain"]) == 8
