"""A cluster run's budget and rate limits hold across its workers (real NATS JetStream, real
PostgreSQL, a stub model on loopback that counts calls): two workers together stop at the
run's token budget, not at twice it, and together keep to its requests per minute, not to
twice it. The spend the run reports is every worker's, summed."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
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
from tests.support.stub_llm import StubLLM

CHAT = "/v1/chat/completions"


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    with NatsServer(tmp_path / "js") as server:
        yield server


def write_data(path: Path, n: int) -> Path:
    # eight words a question: each call costs the same tokens
    rows = [{"id": f"q{i}", "input": f"q{i} one two three four five six seven"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def doc(url: str, data: Path, **target: Any) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "limits"},
        "spec": {
            "target": {
                "model": {"connector": "openai-compatible", "baseUrl": url, "model": "stub"},
                **target,
            },
            "dataset": {"path": str(data)},
            "evaluators": [{"ref": "exact-match"}],
            "maxConcurrency": 4,
        },
    }


async def clustered(
    spec_doc: dict[str, Any], nats: NatsServer, db: SqlStore, shard_size: int = 16
) -> Any:
    pools = {"default": PoolConfig(concurrency=2)}
    cfg = ClusterConfig(nats=nats.url, pools=pools, shard_size=shard_size)
    stop = asyncio.Event()
    crew = [
        asyncio.create_task(Worker(cfg, "default", db, registry=BUILTINS, name=f"w{i}").run(stop))
        for i in range(2)
    ]
    try:
        spec = run_spec_from_dict(spec_doc)
        return await execute_run(
            spec, store=db, registry=BUILTINS, dispatch=ClusterDispatch(cfg, db)
        )
    finally:
        stop.set()
        await asyncio.gather(*crew)


def test_two_workers_stop_together_at_the_runs_token_budget(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    n = 400
    data = write_data(tmp_path / "qa.jsonl", n)
    db = SqlStore.open(pg_url)
    try:
        with StubLLM(latency_ms=100) as stub:
            # what one call costs, from a one-sample embedded run on the same stub
            one = asyncio.run(
                execute_run(
                    run_spec_from_dict(doc(stub.openai_url, write_data(tmp_path / "1.jsonl", 1))),
                    store=tmp_path / "one.db",
                    registry=BUILTINS,
                )
            )
            per_call = one.spend["tokens"]
            assert per_call > 0
            budget = 150 * per_call  # 150 of the 400 calls
            stub.reset()
            spec_doc = doc(stub.openai_url, data)
            spec_doc["spec"]["budget"] = {"tokens": budget}
            result = asyncio.run(clustered(spec_doc, nats, db))
            calls = stub.calls(CHAT)
        assert result.status == "stopped"
        assert result.stopped_reason.startswith("budget(tokens): ")
        spent = result.spend["tokens"]
        # every worker's calls are counted in the run's spend, less those in flight when it
        # stopped (cancelled: their usage never came back), at most 2 x 2 shards x 2 calls
        assert budget <= spent <= calls * per_call
        assert calls * per_call - spent <= 8 * per_call
        assert result.spend["calls"] == result.tasks["ok"]  # every stored task's call, once
        # the workers stopped together: each alone would have spent the whole budget
        assert calls < 1.45 * 150, calls
        stored = sum(1 for _ in db.iter_outputs(result.run_id))
        assert stored < n
        counts = shard_counts(db, result.run_id)
        assert "queued" not in counts  # none left behind for a worker to pick up later
    finally:
        db.close()


def test_two_workers_keep_together_to_the_runs_requests_per_minute(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    n = 60
    data = write_data(tmp_path / "qa.jsonl", n)
    db = SqlStore.open(pg_url)
    try:
        with StubLLM() as stub:
            spec_doc = doc(stub.openai_url, data, requestsPerMinute=600)  # 10 a second
            result = asyncio.run(clustered(spec_doc, nats, db))
            arrivals = stub.arrival_times(CHAT)
        assert result.status == "done"
        assert result.tasks == {"ok": n}
        assert len(arrivals) == n
        # 1 s windows of 10: alone, each worker would send 10 a second (the run in ~3 s)
        took = max(arrivals) - min(arrivals)
        assert took >= 4.0, took
        # any second holds at most two windows' worth (fixed windows: a boundary inside it)
        busiest = max(sum(1 for u in arrivals if t <= u < t + 1.0) for t in arrivals)
        assert busiest <= 20, busiest
    finally:
        db.close()


def test_a_cancelled_run_stops_the_shards_its_workers_are_running(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    """The owner cancelled 2 s into a run whose shards take 10 s each: the workers stop the
    shards they run within about a second (so draining them takes no 10 s), the tasks in
    flight are stored cancelled, and nothing is left queued or running."""
    data = write_data(tmp_path / "qa.jsonl", 400)
    db = SqlStore.open(pg_url)
    try:
        with StubLLM(latency_ms=200) as stub:
            spec_doc = doc(stub.openai_url, data)

            async def cancelled_mid_run() -> float:
                began = time.monotonic()
                with pytest.raises(TimeoutError):  # the workers stop with it (see clustered)
                    await asyncio.wait_for(clustered(spec_doc, nats, db, shard_size=100), 2.0)
                return time.monotonic() - began

            took = asyncio.run(cancelled_mid_run())
            calls = stub.calls(CHAT)
        assert took < 6.0, took  # not the 10 s a shard would have taken to finish
        [info] = db.list_runs(kind="run")
        counts = shard_counts(db, info.id)
        assert set(counts) == {"cancelled"}, counts  # the running ones too, not only queued
        statuses = Counter(o.status for o in db.iter_outputs(info.id))
        assert statuses["cancelled"] > 0  # the tasks in flight
        assert statuses["ok"] < 100
        assert calls < 100
    finally:
        db.close()
