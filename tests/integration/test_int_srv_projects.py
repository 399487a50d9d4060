"""ListRuns filters by project over the API, as the store does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import evalsi
from evalsi.store import SqlStore
from tests.support.server_state import server_state, serving


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, SqlStore]]:
    state = server_state(tmp_path, runs=False)
    with serving(state) as server:
        yield server.url, state.store


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


def test_evaluate_stores_its_run_under_the_project_asked_for(served: tuple[str, SqlStore]) -> None:
    url, store = served
    rows = [{"id": "1", "output": "a", "reference": "a"}]
    with evalsi.Client(url) as client:
        scoped = client.evaluate(rows, ["exact-match"], project_id="team-a")
        default = client.evaluate(rows, ["exact-match"])
        streamed = list(client.evaluate_stream(rows, ["exact-match"], project_id="team-b"))
        with pytest.raises(evalsi.UserError, match=r"^project_id: "):
            client.evaluate(rows, ["exact-match"], project_id="no spaces allowed")
        listed = client.list_runs(project_id="team-a")
    assert store.get_run(scoped.run_id).project_id == "team-a"
    assert store.get_run(default.run_id).project_id == "default"
    assert store.get_run(streamed[-1].run_id).project_id == "team-b"
    assert [r.id for r in listed] == [scoped.run_id]
