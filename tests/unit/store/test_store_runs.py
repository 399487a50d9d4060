"""The runs table: project scope inherited by child rows, paging and counts for the server,
status changes, and who owns a live run (this host by pid, other hosts by heartbeat).

Every test runs on SQLite and on PostgreSQL. Another host is played by rewriting a run's
``host`` column, as a process on another machine sharing the PostgreSQL store would have
written it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.core import NotFoundError, ResultBatch, UserError
from evalsi.store import SqlStore
from evalsi.store import _owner as owner_module
from evalsi.store._owner import STALE_AFTER
from evalsi.store._sql import OutputRow

SPEC = {"evaluators": [{"name": "em", "ref": "builtin/exact-match@1.0.0", "params": {}}]}


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    db = SqlStore.open(store_url)
    yield db
    db.close()


def batch(n: int, start: int = 0) -> ResultBatch:
    b = ResultBatch(
        "em", "builtin/exact-match@1.0.0", "exact-match", [f"r{start + i}" for i in range(n)]
    )
    for i in range(n):
        b.kind[i], b.value[i] = 2, 1.0
    return b


def sql(store: SqlStore, statement: str) -> list[tuple[object, ...]]:
    with store.engine.begin() as conn:
        result = conn.exec_driver_sql(statement)
        return [tuple(row) for row in result] if result.returns_rows else []


def test_child_rows_inherit_the_runs_project(store: SqlStore) -> None:
    run = store.create_run(kind="run", spec=SPEC, project_id="support")
    other = store.create_run(kind="score", spec=SPEC)
    assert (run.project_id, run.tenant_id, other.project_id) == ("support", "", "default")
    store.write_batches(run.id, [(0, 0, batch(3))])
    store.write_tasks(run.id, [OutputRow(5, 0, "x", "ok")], [(0, [5], batch(1, start=5))])
    store.write_tasks(other.id, [OutputRow(0, 0, "y", "ok")], [(0, [0], batch(1))])
    assert sorted(sql(store, "SELECT run, project_id, tenant_id FROM outputs")) == [
        (1, "support", ""),
        (2, "default", ""),
    ]
    # results rows are scoped through their run's key (the hot table stays narrow)
    per_project = sql(
        store,
        "SELECT runs.tenant_id, runs.project_id, count(*) FROM results "
        "JOIN runs ON runs.pk = results.run GROUP BY runs.tenant_id, runs.project_id "
        "ORDER BY runs.project_id",
    )
    assert per_project == [("", "default", 1), ("", "support", 4)]
    assert store.get_run(run.id).project_id == "support"


@pytest.mark.parametrize("bad", ["", " x", "a b", "x'; DROP TABLE runs; --", "a%s", "é", "a" * 65])
def test_a_bad_project_id_is_refused_by_name(store: SqlStore, bad: str) -> None:
    with pytest.raises(UserError, match=r"project_id .* is not valid"):
        store.create_run(kind="run", spec=SPEC, project_id=bad)
    assert store.list_runs() == []


def test_pages_follow_a_cursor_newest_first(store: SqlStore) -> None:
    ids = [store.create_run(kind="run", spec=SPEC, run_id=f"run-{i:02d}").id for i in range(25)]
    sql(store, "UPDATE runs SET created_at = 1000.0")  # ties are broken by insertion order
    pages, after = [], None
    while True:
        page = store.list_runs(10, after=after)
        pages.append([r.id for r in page])
        if len(page) < 10:
            break
        after = page[-1].id
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [run_id for page in pages for run_id in page] == ids[::-1]
    assert store.list_runs(10, after=ids[0]) == []


def test_filters_by_kind_status_and_project(store: SqlStore) -> None:
    a = store.create_run(kind="run", spec=SPEC, project_id="p1")
    b = store.create_run(kind="score", spec=SPEC, project_id="p1")
    c = store.create_run(kind="run", spec=SPEC, project_id="p2")
    store.finish_run(b.id, status="done", records=0, summary=None, manifest=None)
    assert [r.id for r in store.list_runs(kind="run")] == [c.id, a.id]
    assert [r.id for r in store.list_runs(project_id="p1")] == [b.id, a.id]
    assert [r.id for r in store.list_runs(status="done")] == [b.id]
    assert [r.id for r in store.list_runs(status="running", project_id="p2")] == [c.id]
    assert store.list_runs(kind="grade") == []


def test_bad_paging_arguments_are_user_errors(store: SqlStore) -> None:
    with pytest.raises(UserError, match="page cursor 'nope' is not a run"):
        store.list_runs(after="nope")
    with pytest.raises(UserError, match="limit must be at least 1"):
        store.list_runs(0)


def test_status_filters_use_the_effective_status(store: SqlStore) -> None:
    live = store.create_run(kind="run", spec=SPEC)
    dead = [store.create_run(kind="run", spec=SPEC) for _ in range(3)]
    stopped = store.create_run(kind="run", spec=SPEC)
    store.finish_run(stopped.id, status="interrupted", records=0, summary=None, manifest=None)
    in_list = ", ".join(f"'{r.id}'" for r in dead)
    sql(store, f"UPDATE runs SET pid = 999999999 WHERE id IN ({in_list})")
    assert [r.id for r in store.list_runs(status="running")] == [live.id]
    interrupted = store.list_runs(2, status="interrupted")  # a full page despite filtering
    assert [r.id for r in interrupted] == [stopped.id, dead[2].id]
    assert store.count_runs_by_status() == {"running": 1, "interrupted": 4}


def test_counts_by_status_per_project(store: SqlStore) -> None:
    for project, status in [("p1", "done"), ("p1", "done"), ("p1", "failed"), ("p2", "done")]:
        run = store.create_run(kind="run", spec=SPEC, project_id=project)
        store.finish_run(run.id, status=status, records=0, summary=None, manifest=None)
    store.create_run(kind="run", spec=SPEC, project_id="p1", status="queued")
    assert store.count_runs_by_status("p1") == {"done": 2, "failed": 1, "queued": 1}
    assert store.count_runs_by_status() == {"done": 3, "failed": 1, "queued": 1}
    assert store.count_runs_by_status("nobody") == {}


def test_mark_status(store: SqlStore) -> None:
    run = store.create_run(kind="run", spec=SPEC, status="queued")
    assert run.status == "queued"
    assert run.finished_at is None
    cancelled = store.mark_status(run.id, "cancelled", error="cancelled by the user")
    assert (cancelled.status, cancelled.error) == ("cancelled", "cancelled by the user")
    assert cancelled.finished_at is not None
    again = store.mark_status(run.id, "queued")
    assert (again.status, again.finished_at, again.pid) == ("queued", None, os.getpid())
    with pytest.raises(UserError, match="status 'paused' is not one of"):
        store.mark_status(run.id, "paused")
    with pytest.raises(NotFoundError, match="no run 'nope'"):
        store.mark_status("nope", "cancelled")
    with pytest.raises(UserError, match="status 'done' is not one of: queued, running"):
        store.create_run(kind="run", spec=SPEC, status="done")


def test_a_run_records_its_owner(store: SqlStore) -> None:
    run = store.create_run(kind="run", spec=SPEC)
    assert (run.host, run.pid) == (owner_module.HOST, os.getpid())
    assert run.heartbeat_at is not None


def test_a_restarted_process_with_the_same_pid_does_not_own_old_runs(store: SqlStore) -> None:
    run = store.create_run(kind="run", spec=SPEC)
    sql(store, "UPDATE runs SET owner = 'an-earlier-life'")  # same host, same pid, other token
    assert store.get_run(run.id).status == "interrupted"


def test_another_hosts_run_is_judged_by_its_heartbeat(store: SqlStore) -> None:
    run = store.create_run(kind="run", spec=SPEC)
    # another machine's pid means nothing here, even one that is not alive on this host
    sql(store, "UPDATE runs SET host = 'elsewhere', pid = 999999999")
    assert store.get_run(run.id).status == "running"
    assert store.interrupted_runs() == []
    sql(store, f"UPDATE runs SET heartbeat_at = heartbeat_at - {STALE_AFTER + 5}")
    assert store.get_run(run.id).status == "interrupted"
    assert [r.id for r in store.interrupted_runs()] == [run.id]
    sql(store, "UPDATE runs SET heartbeat_at = NULL")  # nothing to judge by: assume alive
    assert store.get_run(run.id).status == "running"


def test_heartbeat_touches_only_this_processes_live_runs(store: SqlStore) -> None:
    mine = store.create_run(kind="run", spec=SPEC)
    theirs = store.create_run(kind="run", spec=SPEC)
    done = store.create_run(kind="run", spec=SPEC)
    store.finish_run(done.id, status="done", records=0, summary=None, manifest=None)
    sql(store, f"UPDATE runs SET host = 'elsewhere' WHERE id = '{theirs.id}'")
    sql(store, "UPDATE runs SET heartbeat_at = heartbeat_at - 1000")
    assert store.heartbeat() == 1
    assert store.heartbeat(theirs.id) == 0
    beats = {r.id: r.heartbeat_at for r in store.list_runs()}
    mine_at, theirs_at = beats[mine.id], beats[theirs.id]
    assert mine_at is not None
    assert theirs_at is not None
    assert mine_at > theirs_at + 900


def test_interrupted_runs_oldest_first_with_filters(store: SqlStore) -> None:
    runs = [store.create_run(kind="run", spec=SPEC, project_id=p) for p in ("p1", "p2", "p1")]
    grade = store.create_run(kind="grade", spec=SPEC)
    done = store.create_run(kind="run", spec=SPEC)
    store.finish_run(done.id, status="done", records=0, summary=None, manifest=None)
    store.finish_run(runs[1].id, status="interrupted", records=0, summary=None, manifest=None)
    sql(store, "UPDATE runs SET pid = 999999999 WHERE status = 'running'")
    assert [r.id for r in store.interrupted_runs()] == [*(r.id for r in runs), grade.id]
    assert [r.id for r in store.interrupted_runs(kind="run", project_id="p1")] == [
        runs[0].id,
        runs[2].id,
    ]


def test_claim_takes_over_an_interrupted_run_once(store: SqlStore) -> None:
    run = store.create_run(kind="run", spec=SPEC)
    assert store.claim_run(run.id) is None  # alive: not ours to take
    sql(store, "UPDATE runs SET host = 'elsewhere', heartbeat_at = heartbeat_at - 1000")
    claimed = store.claim_run(run.id)
    assert claimed is not None
    assert (claimed.status, claimed.host, claimed.pid) == ("queued", owner_module.HOST, os.getpid())
    assert store.claim_run(run.id) is None  # now owned by a live process: this one
    assert store.reopen_run(run.id).status == "running"
    with pytest.raises(NotFoundError):
        store.claim_run("nope")


@pytest.mark.parametrize(
    "meanwhile",
    [
        "UPDATE runs SET status = 'queued', owner = 'another-claimer', host = 'h2'",
        "UPDATE runs SET heartbeat_at = heartbeat_at + 1000",  # the owner was alive after all
    ],
)
def test_a_claim_loses_to_what_happens_after_the_judgement(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch, meanwhile: str
) -> None:
    run = store.create_run(kind="run", spec=SPEC)
    sql(store, "UPDATE runs SET host = 'elsewhere', heartbeat_at = heartbeat_at - 1000")
    real = store._status

    def judged_then_changed(row: object) -> str:
        status = real(row)
        sql(store, meanwhile)  # another process, between our read and our write
        return status

    monkeypatch.setattr(store, "_status", judged_then_changed)
    assert store.claim_run(run.id) is None
    monkeypatch.undo()
    assert store.get_run(run.id).host != owner_module.HOST  # not taken by this process
