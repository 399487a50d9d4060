"""A plugin on the server: installed in the server's data dir (here one served at a unix
address), its evaluators are in ListEvaluators with their params schemas and grade through
Evaluate, as the CLI's do."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as cat
from evalsi._proto.evalsi.v1alpha1.catalog_service_connect import (
    CatalogServiceASGIApplication,
    CatalogServiceClientSync,
)
from evalsi._proto.evalsi.v1alpha1.evaluation_service_connect import (
    EvaluationServiceASGIApplication,
)
from evalsi.plugins import install_plugin, serve_plugin
from evalsi.server._catalog import CatalogHandler
from evalsi.server._evaluation import EvaluationHandler
from evalsi.server._state import ServerConfig, server_registry
from evalsi.wire import manifest_from_proto
from tests.support.server_state import server_state, serving

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "plugins" / "acme-plugin"


@pytest.fixture
def acme_at_address(tmp_path: Path) -> Iterator[str]:
    """The acme evaluators served on a unix socket by ``serve_plugin``, in a loop thread."""
    site, build = tmp_path / "site", tmp_path / "build"
    shutil.copytree(FIXTURE, build, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "-t", str(site), str(build)], check=True, capture_output=True)
    sys.path.insert(0, str(site))
    try:
        import acme_plugin
    finally:
        sys.path.remove(str(site))
    address = f"unix:{tmp_path / 'acme.sock'}"
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    serving_plugin = serve_plugin(acme_plugin.EVALUATORS, address, name="acme", version="1.2.0")
    server = asyncio.run_coroutine_threadsafe(serving_plugin, loop).result(10)
    yield address
    asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_the_servers_catalog_lists_and_grades_an_installed_plugin(
    acme_at_address: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    install_plugin(acme_at_address, base=data)
    registry = server_registry(ServerConfig(data_dir=data))
    state = server_state(data, runs=False, registry=registry)
    services: Any = [
        (CatalogServiceASGIApplication, CatalogHandler(state)),
        (EvaluationServiceASGIApplication, EvaluationHandler(state)),
    ]
    with serving(state, services) as srv:
        with CatalogServiceClientSync(srv.url) as client:
            listed = client.list_evaluators(cat.ListEvaluatorsRequest()).evaluators
        manifests = {str(m.ref): m for m in map(manifest_from_proto, listed)}
        shouty = manifests["acme/shouty@1.0.0"]
        assert shouty.params_schema["properties"]["min_ratio"]["default"] == 0.5
        assert "builtin/exact-match@1.0.0" in manifests
        body = {
            "records": [
                {"id": "a", "output": {"text": "HELLO world"}},
                {"id": "b", "output": {"text": "quiet"}},
            ],
            "evaluators": [{"ref": "acme/shouty", "params": {"min_ratio": 0.4}}],
        }
        request = subprocess.run(  # plain HTTP, as a Connect JSON client would
            [
                sys.executable,
                "-c",
                _POST,
                srv.url + "/evalsi.v1alpha1.EvaluationService/Evaluate",
                json.dumps(body),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    assert request.returncode == 0, request.stderr
    answer = json.loads(request.stdout)
    verdicts = {r["recordId"]: r["scores"][0]["passed"] for r in answer["results"]}
    assert verdicts == {"a": True, "b": False}


_POST = """
import sys, urllib.error, urllib.request
req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(),
                             headers={"Content-Type": "application/json"})
try:
    print(urllib.request.urlopen(req, timeout=30).read().decode())
except urllib.error.HTTPError as e:
    sys.exit(f"{e.code}: {e.read().decode()}")
"""
