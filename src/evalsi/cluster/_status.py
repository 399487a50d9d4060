"""``evalsi cluster status``: the queues, the workers and the runs in progress, read from
JetStream (each pool's consumer, the workers' reports) and the store (the runs' shards and
owners)."""

from __future__ import annotations

import time
from typing import Any

import orjson

from evalsi.cluster._config import ClusterConfig
from evalsi.cluster._queue import DEAD_STREAM, STREAM, connect, consumer, workers_bucket
from evalsi.store import SqlStore, shard_counts


async def cluster_status(config: ClusterConfig, store: SqlStore | None = None) -> dict[str, Any]:
    """Pools (pending, in flight, redelivered, waiting pulls), workers (their last reports)
    and, with ``store``, the runs in progress with their shards and owners."""
    import asyncio

    from nats.js.errors import NotFoundError

    nc = await connect(config.nats, "evalsi cluster status")
    try:
        js = nc.jetstream()
        pools = []
        for pool in config.pools.values():
            entry: dict[str, Any] = {"name": pool.name, "concurrency": pool.concurrency}
            try:
                info = await js.consumer_info(STREAM, consumer(pool.name))
                entry.update(
                    pending=info.num_pending,
                    in_flight=info.num_ack_pending,
                    redelivered=info.num_redelivered,
                    waiting=info.num_waiting,
                )
            except NotFoundError:
                entry.update(pending=0, in_flight=0, redelivered=0, waiting=0, missing=True)
            pools.append(entry)
        try:
            dead = (await js.stream_info(DEAD_STREAM)).state.messages
        except NotFoundError:
            dead = 0
        workers = []
        bucket = await workers_bucket(js)
        try:
            keys = await bucket.keys()
        except Exception:  # noqa: BLE001 - nats-py raises NoKeysError on an empty bucket
            keys = []
        for key in keys:
            try:
                found = await bucket.get(key)
            except Exception:  # noqa: BLE001 - expired meanwhile
                continue
            if found is not None and found.value:
                report = orjson.loads(found.value)
                report["age_seconds"] = round(time.time() - report.get("reported_at", 0), 1)
                workers.append(report)
        workers.sort(key=lambda w: (w.get("pool", ""), w.get("name", "")))
    finally:
        await nc.close()
    out: dict[str, Any] = {"nats": config.nats, "pools": pools, "workers": workers, "dead": dead}
    if store is not None:
        out["runs"] = await asyncio.to_thread(_runs_in_progress, store)
    return out


def _runs_in_progress(store: SqlStore) -> list[dict[str, Any]]:
    runs = []
    for info in store.list_runs(status="running", kind="run"):
        shards = {state: {"shards": n, "tasks": t} for state, (n, t) in
                  shard_counts(store, info.id).items()}  # fmt: skip
        runs.append(
            {
                "run_id": info.id,
                "owner": info.host or "",
                "heartbeat_age_seconds": None
                if info.heartbeat_at is None
                else round(time.time() - info.heartbeat_at, 1),
                "shards": shards,
            }
        )
    return runs


__all__ = ["cluster_status"]
