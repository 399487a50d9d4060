"""A run on the cluster — its tasks on a real NATS JetStream work queue (a nats-server of the
test's own), executed by workers writing to a real PostgreSQL store — gives the figures the
same spec gives embedded. A shard delivered twice is stored once; a poison shard is
dead-lettered and the run completes; a cancelled run's queued shards are skipped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.cluster import ClusterConfig, ClusterDispatch, PoolConfig, Worker
from evalsi.runs import execute_run
from evalsi.specs import run_spec_from_dict
from evalsi.store import SqlStore, shard_counts
from tests.support.nats_server import NatsServer
from tests.support.registry import BUILTINS

N = 120
CRASHES: set[str] = set()  # record ids whose target call raises (poison)
CALLS: list[str] = []  # every target call, in order


def answer(question: str) -> str:
    CALLS.append(question)
    n = int(question.split("-")[1])
    if question in CRASHES:
        raise SystemExit("a worker dies on this one")  # not an Exception: the shard fails
    return f"answer-{n}" if n % 3 else "wrong"


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    with NatsServer(tmp_path / "js") as server:
        yield server


def spec_doc(data: Path, trials: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "clustered"},
        "spec": {
            "target": {"python": f"{__name__}:answer"},
            "dataset": {"path": str(data)},
            "evaluators": [
                {"ref": "exact-match"},
                {"ref": "contains", "params": {"values": ["a"]}},
            ],
            "trials": trials,
            "maxConcurrency": 8,
        },
    }


def write_data(path: Path, n: int = N) -> Path:
    rows = [{"id": f"q-{i}", "input": f"q-{i}", "reference": f"answer-{i}"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def config(nats: NatsServer, **pool: Any) -> ClusterConfig:
    return ClusterConfig(nats=nats.url, pools={"default": PoolConfig(**pool)}, shard_size=16)


def metrics(result: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.to_dict().items() if k != "run_id"} for m in result.metrics]


async def _clustered(
    doc: dict[str, Any], cfg: ClusterConfig, db: SqlStore, workers: int = 2
) -> Any:
    stop = asyncio.Event()
    crew = [
        asyncio.create_task(Worker(cfg, "default", db, registry=BUILTINS, name=f"w{i}").run(stop))
        for i in range(workers)
    ]
    try:
        spec = run_spec_from_dict(doc)
        return await execute_run(
            spec, store=db, registry=BUILTINS, dispatch=ClusterDispatch(cfg, db)
        )
    finally:
        stop.set()
        await asyncio.gather(*crew)


def test_a_clustered_run_gives_the_embedded_figures(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    doc = spec_doc(write_data(tmp_path / "qa.jsonl"), trials=2)
    embedded = asyncio.run(
        execute_run(run_spec_from_dict(doc), store=tmp_path / "e.db", registry=BUILTINS)
    )
    db = SqlStore.open(pg_url)
    try:
        clustered = asyncio.run(_clustered(doc, config(nats), db))
        assert clustered.status == embedded.status == "done"
        assert clustered.tasks == embedded.tasks == {"ok": 2 * N}
        assert metrics(clustered) == metrics(embedded)
        counts = shard_counts(db, clustered.run_id)
        assert counts == {"done": (15, 2 * N)}  # 240 tasks in shards of 16
    finally:
        db.close()


def test_a_resumed_run_cancels_the_earlier_sessions_queued_shards(
    tmp_path: Path, pg_url: str, nats: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner killed while its shards wait in the queue, then resumed: each task is called
    once (the earlier session's shards are skipped, not run beside the new session's)."""
    import evalsi.cluster._dispatch as dispatch_module

    doc = spec_doc(write_data(tmp_path / "qa.jsonl"))
    cfg = config(nats)
    db = SqlStore.open(pg_url)
    try:
        real_cancel = dispatch_module.cancel_shards
        monkeypatch.setattr(dispatch_module, "cancel_shards", lambda *_, **__: 0)  # killed

        async def killed_owner() -> None:
            spec = run_spec_from_dict(doc)
            await execute_run(spec, store=db, registry=BUILTINS, dispatch=ClusterDispatch(cfg, db))

        with pytest.raises(TimeoutError):  # no worker yet: every shard waits in the queue
            asyncio.run(asyncio.wait_for(killed_owner(), 3.0))
        [info] = db.list_runs(kind="run")
        assert shard_counts(db, info.id) == {"queued": (8, N)}
        monkeypatch.setattr(dispatch_module, "cancel_shards", real_cancel)
        CALLS.clear()

        async def resumed() -> Any:
            stop = asyncio.Event()
            crew = [
                asyncio.create_task(Worker(cfg, "default", db, registry=BUILTINS).run(stop))
                for _ in range(2)
            ]
            try:
                spec = run_spec_from_dict(doc)
                return await execute_run(
                    spec, store=db, registry=BUILTINS, resume=info.id,
                    dispatch=ClusterDispatch(cfg, db),
                )  # fmt: skip
            finally:
                stop.set()
                await asyncio.gather(*crew)

        result = asyncio.run(resumed())
        assert result.status == "done"
        assert sorted(CALLS) == sorted(f"q-{i}" for i in range(N))  # once each
        counts = shard_counts(db, info.id)
        assert counts["cancelled"] == (8, N)  # the earlier session's, skipped
        assert counts["done"] == (8, N)
    finally:
        db.close()


def test_an_unreachable_nats_is_a_clear_error_not_a_wait_for_ever(tmp_path: Path) -> None:
    """``evalsi cluster status`` and a worker on a wrong URL: a UserError naming the setting
    and the cause within seconds (the first connection used to be retried for ever)."""
    import socket
    import time

    from evalsi.cluster import cluster_status
    from evalsi.core import UserError

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{s.getsockname()[1]}"
    began = time.monotonic()
    with pytest.raises(UserError) as caught:
        asyncio.run(asyncio.wait_for(cluster_status(ClusterConfig(nats=url)), 60))
    assert time.monotonic() - began < 30
    assert caught.value.message.startswith(f"cluster.nats {url}: cannot connect (")
    assert "refused" in caught.value.message.lower()


def test_a_worker_never_closes_a_run_context_a_shard_is_using(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The context cache keeps at most CONTEXTS runs, but a run with a shard running keeps its
    target (an agent's tools) open whatever the count."""
    from evalsi.cluster import _worker

    closed: list[str] = []

    class Context:
        def __init__(self, run_id: str) -> None:
            self.run_id = run_id

        async def close(self) -> None:
            closed.append(self.run_id)

    async def fake_open(store: Any, run_id: str, **_: Any) -> Context:
        return Context(run_id)

    monkeypatch.setattr(_worker, "open_run_context", fake_open)
    cfg = ClusterConfig(nats="nats://127.0.0.1:1")
    worker = Worker(cfg, "default", None, registry=BUILTINS)  # type: ignore[arg-type]

    async def main() -> None:
        busy = [f"busy-{i}" for i in range(_worker.CONTEXTS)]
        for run_id in busy:
            worker._using[run_id] += 1
            await worker._context(run_id)
        worker._using["new"] += 1  # as _run_shard does before it asks for the context
        await worker._context("new")  # one over: no idle context to close yet
        assert closed == []
        del worker._using["busy-0"]  # its shard ended
        worker._using["newer"] += 1
        await worker._context("newer")
        assert closed == ["busy-0"]  # the oldest idle one, and only it

    asyncio.run(main())
