"""ListRuns filters by project over the API, as the store does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import evalsi
from evalsi.packs import builtin_registry
from evalsi.server._app import build_app
from evalsi.server._state import ServerConfig, ServerState
from evalsi.store import SqlStore
from tests.support.asgi_server import AsgiServer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, SqlStore]]:
    config = ServerConfig(
        datasets_dir=tmp_path / "d", data_dir=tmp_path, store=str(tmp_path / "s.db")
    )
    store = SqlStore.open(config.store)
    state = ServerState(config=config, store=store, registry=builtin_registry())
    with AsgiServer(build_app(state)) as server:
        yield server.url, store


def test_list_runs_by_project(served: tuple[str, SqlStore]) -> None:
    url, store = served
    ids = {
        p: [store.create_run(kind="score", spec={}, project_id=p).id for _ in range(2)]
        for p in ("a", "b")
    }
    with evalsi.Client(url) as client:
        only_a = client.list_runs(project_id="a", limit=10)
        every = client.list_runs(limit=10)
        paged = client.list_runs(project_id="b", limit=1)
    assert sorted(r.id for r in only_a) == sorted(ids["a"])
    assert {r.project_id for r in only_a} == {"a"}
    assert len(every) == 4
    assert [r.id for r in paged] == [ids["b"][1]]  # newest first
