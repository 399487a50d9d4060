"""CatalogService over a real loopback server: the same evaluators as the registry (and the
CLI), packs, connectors read from the run engine's tables, and an unknown evaluator is 404."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.catalog_service_connect import (
    CatalogServiceASGIApplication,
    CatalogServiceClientSync,
)
from evalsi.connectors import MODEL_CONNECTORS
from evalsi.core import Scope
from evalsi.packs import BUILTIN_PACKS, builtin_registry
from evalsi.runs._judges import JUDGE_CONNECTORS
from evalsi.server._catalog import CatalogHandler
from evalsi.wire import connector_from_proto, manifest_from_proto, pack_from_proto
from tests.support.server_state import server_state, serving


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    state = server_state(tmp_path, store=":memory:", runs=False)
    with serving(state, only=(CatalogServiceASGIApplication, CatalogHandler)) as srv:
        yield srv.url


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_list_evaluators_is_the_registry(url: str) -> None:
    with CatalogServiceClientSync(url) as client:
        listed = client.list_evaluators(pb.ListEvaluatorsRequest()).evaluators
        core = client.list_evaluators(pb.ListEvaluatorsRequest(pack="core")).evaluators
        none = client.list_evaluators(pb.ListEvaluatorsRequest(pack="no-such-pack")).evaluators
    registry = builtin_registry()
    assert [manifest_from_proto(m) for m in listed] == [ev.manifest for ev in registry]
    assert {m.ref.name for m in core} == {
        ev.manifest.ref.name for ev in BUILTIN_PACKS["core"].evaluators
    }
    assert list(none) == []
    status, body = _get(url + "/v1alpha1/evaluators?pack=judge")
    assert status == 200
    assert {e["ref"]["name"] for e in body["evaluators"]} == {
        ev.manifest.ref.name for ev in BUILTIN_PACKS["judge"].evaluators
    }


def test_get_evaluator_by_name_or_ref(url: str) -> None:
    with CatalogServiceClientSync(url) as client:
        by_name = client.get_evaluator(pb.GetEvaluatorRequest(ref="exact-match")).evaluator
        by_ref = client.get_evaluator(pb.GetEvaluatorRequest(ref="builtin/exact-match@1.0.0"))
    manifest = manifest_from_proto(by_name)
    assert manifest == builtin_registry().resolve("exact-match").manifest
    assert manifest.scope is Scope.RECORD
    assert "ignore_case" in str(manifest.params_schema)
    assert by_ref.evaluator == by_name
    status, body = _get(url + "/v1alpha1/evaluators/builtin%2Fexact-match")
    assert status == 200
    assert body["evaluator"]["ref"]["name"] == "exact-match"


@pytest.mark.parametrize(
    ("ref", "status", "expected"),
    [
        ("no-such-evaluator", 404, "unknown evaluator"),
        ("builtin/exact-match@9.9.9", 404, "has no version 9.9.9"),
        ("Not A Ref!", 400, "invalid evaluator reference"),
    ],
)
def test_unknown_evaluator_is_404_and_a_malformed_ref_400(
    url: str, ref: str, status: int, expected: str
) -> None:
    got, body = _get(url + "/v1alpha1/evaluators/" + urllib.parse.quote(ref, safe=""))
    assert got == status, body
    assert expected in body["message"]


def test_list_packs(url: str) -> None:
    with CatalogServiceClientSync(url) as client:
        packs = [pack_from_proto(p) for p in client.list_packs(pb.ListPacksRequest()).packs]
    by_name = {p.name: p for p in packs}
    assert set(by_name) == set(BUILTIN_PACKS)
    for name, pack in BUILTIN_PACKS.items():
        got = by_name[name]
        assert sorted(got.evaluators) == sorted(e.manifest.ref.name for e in pack.evaluators)
        assert got.description == pack.description  # the pack's docstring
        assert got.extra == pack.extra
        assert got.enabled is (name == "core")  # only core is on by default
    assert "judge" in by_name["judge"].description
    assert by_name["text"].extra == "text"


def test_list_packs_reports_the_project_opt_in(tmp_path: Path) -> None:
    state = server_state(tmp_path, store=":memory:", runs=False, packs=("core", "text"))
    with (
        serving(state, only=(CatalogServiceASGIApplication, CatalogHandler)) as srv,
        CatalogServiceClientSync(srv.url) as client,
    ):
        packs = [pack_from_proto(p) for p in client.list_packs(pb.ListPacksRequest()).packs]
    assert {p.name for p in packs if p.enabled} == {"core", "text"}


def test_list_connectors_reads_the_run_engine(url: str) -> None:
    with CatalogServiceClientSync(url) as client:
        found = client.list_connectors(pb.ListConnectorsRequest()).connectors
    connectors = {c.name: connector_from_proto(c) for c in found}
    for name in MODEL_CONNECTORS:
        assert "target" in connectors[name].roles
    for name in JUDGE_CONNECTORS:
        assert "judge" in connectors[name].roles
    assert connectors["http"].roles == ("target",)
    assert "disabled on this server" in connectors["python"].description
    assert all(c.description for c in connectors.values())
    status, body = _get(url + "/v1alpha1/connectors")
    assert status == 200
    assert {c["name"] for c in body["connectors"]} == set(connectors)
