"""Fuzz every operation of the generated ``/openapi.json`` against the real app (schemathesis):
whatever a client sends — valid per the schema or not — the answer is never a 5xx.
Derandomized (the same cases every run) and bounded (a few examples per operation and mode)
to fit CI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from evalsi.packs import builtin_registry
from evalsi.server._app import build_app
from evalsi.server._run_manager import RunManager
from evalsi.server._state import ServerConfig, ServerState
from evalsi.store import SqlStore
from tests.support.asgi_server import AsgiServer

EXAMPLES = 10


@pytest.fixture(scope="module")
def api_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("fuzz")
    store = str(root / "fuzz.db")
    config = ServerConfig(data_dir=root, datasets_dir=root / "datasets", store=store)
    state = ServerState(config=config, store=SqlStore.open(store), registry=builtin_registry())
    state.runs = RunManager(state)
    with AsgiServer(build_app(state)) as server:
        yield server.url
    state.store.close()


def _operations(url: str) -> list[Any]:
    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_operation_answers_5xx(api_url: str, mode: GenerationMode) -> None:
    operations = _operations(api_url)
    assert len(operations) >= 15  # every service's REST routes are in the document
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case) -> None:
            response = case.call(base_url=api_url, timeout=30)
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.formatted_path} {case.body!r:.200} -> "
                    f"{response.status_code}: {response.text[:300]}"
                )

        try:
            check()
        except Unsatisfiable:
            # An operation without inputs (ListPacks) has no invalid request to generate.
            assert mode is GenerationMode.NEGATIVE, operation.label
    assert not failures, "\n".join(failures[:20])
