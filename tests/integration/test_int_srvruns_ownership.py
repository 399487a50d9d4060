"""Run ownership on the server, on SQLite and PostgreSQL: a cancelled run stays ``cancelled`` in
the store (queued or running when cancelled, and after the server stops); a waiting run is
stored ``queued``; on start a server claims and resumes the orphans of any server sharing the
store (another host's once its heartbeat is stale), exactly one server per orphan; a run held by
a live process is never resumed elsewhere."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.core import UserError
from evalsi.runs import execute_run, run_spec_from_dict
from evalsi.server._run_manager import RunManager
from evalsi.store import SqlStore
from evalsi.store._schema import runs
from tests.integration.run_support import write_qa
from tests.support.asgi_server import AsgiServer
from tests.support.registry import BUILTINS
from tests.support.run_server_main import run_app, run_doc, run_message, run_state
from tests.support.stub_llm import StubLLM

BACKENDS = ["sqlite", "postgres"]


def _store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return str(tmp_path / "srv.db")
    return str(request.getfixturevalue("pg_url"))


def _stored_status(store: str, run_id: str) -> str:
    """The status as a fresh store (another process) reads it."""
    db = SqlStore.open(store)
    try:
        return db.get_run(run_id).status
    finally:
        db.close()


def _wait_running(client: RunServiceClientSync, run_id: str) -> None:
    deadline = time.monotonic() + 30
    while client.get_run(pb.GetRunRequest(id=run_id)).run.progress.tasks_done < 2:
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.02)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancelled_runs_stay_cancelled_in_the_store(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    store = _store(backend, tmp_path, request)
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", 30)
    with StubLLM(latency_ms=80) as stub:
        state = run_state(store, datasets, max_concurrent_runs=1)
        message = run_message(run_doc(stub.openai_url, "qa.jsonl", concurrency=2))
        with AsgiServer(run_app(state)) as server:
            client = RunServiceClientSync(server.url)
            running = client.create_run(pb.CreateRunRequest(run=message)).run
            waiting = client.create_run(pb.CreateRunRequest(run=message)).run
            queued_in_store = _stored_status(store, waiting.id)
            _wait_running(client, running.id)
            answers = [
                client.cancel_run(pb.CancelRunRequest(id=r.id)).run for r in (waiting, running)
            ]
            time.sleep(0.3)  # anything that would overwrite the status has happened by now
            listed = client.list_runs(pb.ListRunsRequest(status="cancelled")).runs
            client.close()
        # The server has stopped (its lifespan ended): nothing turned them into interrupted.
        after_stop = [_stored_status(store, r.id) for r in (waiting, running)]
        state.store.close()
        restarted = run_state(store, datasets)

        async def start() -> list[str]:
            manager = restarted.runs
            assert isinstance(manager, RunManager)
            resumed = await manager.start()
            await manager.stop()
            return resumed

        resumed = asyncio.run(start())
        restarted.store.close()

    assert queued_in_store == "queued"
    assert [a.status for a in answers] == ["cancelled", "cancelled"]
    assert [a.error for a in answers] == ["cancelled on request"] * 2
    assert {r.id for r in listed} == {running.id, waiting.id}
    assert after_stop == ["cancelled", "cancelled"]
    assert resumed == []  # a cancelled run waits for ResumeRun, not for a restart


def _finished_server_run(store: str, datasets: Path, base_url: str) -> tuple[str, Any]:
    """A server run stored ``done`` with every task, in project p1; its id and spec."""
    doc = run_doc(base_url, str(datasets / "qa.jsonl"), concurrency=4)
    spec = run_spec_from_dict(doc)
    origin = {"server": True, "host": "elsewhere", "project_id": "p1"}
    result = asyncio.run(execute_run(spec, store=store, origin=origin, registry=BUILTINS))
    assert result.store is not None
    result.store.close()
    return result.run_id, spec


def _own(store: str, run_id: str, **owner: Any) -> None:
    """Give the run the owner columns of another process (and a live status)."""
    db = SqlStore.open(store)
    try:
        with db.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(**owner))
    finally:
        db.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_start_claims_another_hosts_orphan_once_its_heartbeat_is_stale(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    store = _store(backend, tmp_path, request)
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", 8)
    with StubLLM() as stub:
        run_id, _ = _finished_server_run(store, datasets, stub.openai_url)
        other = {"status": "running", "host": "other-host", "pid": 4242, "owner": "f" * 16}
        _own(store, run_id, **other, heartbeat_at=time.time())  # alive over there
        states = [run_state(store, datasets) for _ in range(2)]

        async def start_both() -> list[list[str]]:
            managers = [s.runs for s in states]
            started = await asyncio.gather(*(m.start() for m in managers))
            for m, resumed in zip(managers, started, strict=True):
                for resumed_id in resumed:
                    async for _ in m.watch(resumed_id):  # until it ends, before the stop
                        pass
                await m.stop()
            return list(started)

        alive = asyncio.run(start_both())
        _own(store, run_id, heartbeat_at=time.time() - 600)  # six minutes without a beat
        stale = asyncio.run(start_both())
        final = states[0].store.get_run(run_id)
        for s in states:
            s.store.close()

    assert alive == [[], []]
    assert sorted(stale, key=len) == [[], [run_id]]  # one server claimed it, the other did not
    assert final.status == "done"
    assert final.project_id == "p1"
    assert final.host != "other-host"
    assert final.pid == os.getpid()


def test_a_run_queued_in_a_live_process_is_not_resumed_here(tmp_path: Path) -> None:
    store = str(tmp_path / "srv.db")
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", 4)
    with StubLLM() as stub:
        run_id, spec = _finished_server_run(store, datasets, stub.openai_url)
        db = SqlStore.open(store)
        host = db.get_run(run_id).host
        parent = os.getppid()  # alive, and not this process
        with db.engine.begin() as conn:
            conn.execute(
                runs.update().where(runs.c.id == run_id).values(status="queued", pid=parent)
            )
        assert db.get_run(run_id).status == "queued"
        with pytest.raises(UserError, match=f"still queued in another process .*pid {parent}"):
            asyncio.run(execute_run(spec, store=db, resume=run_id, registry=BUILTINS))
        with db.engine.begin() as conn:  # its owner died: now it may be taken over
            conn.execute(runs.update().where(runs.c.id == run_id).values(pid=2**22 + 7))
        assert db.get_run(run_id).status == "interrupted"
        resumed = asyncio.run(execute_run(spec, store=db, resume=run_id, registry=BUILTINS))
        assert resumed.store is not None
        with db.engine.connect() as conn:
            count = conn.execute(sa.select(sa.func.count()).select_from(runs)).scalar()
        db.close()

    assert host is not None
    assert resumed.run_id == run_id
    assert resumed.status == "done"
    assert count == 1
