"""``evalsi worker``: this server configuration's store, evaluators and egress policy, working
the cluster's queue of one pool until SIGTERM or SIGINT (then draining)."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from evalsi.cluster import ClusterConfig, Worker, WorkerStats
from evalsi.connectors import Resilience
from evalsi.core import UserError
from evalsi.server._egress import server_egress
from evalsi.server._state import ServerConfig, server_registry

log = logging.getLogger("evalsi.cluster")


def cluster_report(config: ServerConfig) -> dict[str, Any]:
    """``evalsi cluster status`` of this configuration: queues, workers, runs in progress."""
    from evalsi.cluster import cluster_status
    from evalsi.store import SqlStore

    cluster = _require_cluster(config)
    store = SqlStore.open(config.store)
    try:
        return asyncio.run(cluster_status(cluster, store))
    finally:
        store.close()


def _require_cluster(config: ServerConfig) -> ClusterConfig:
    if config.cluster is None:
        raise UserError(
            "no cluster: section in the configuration",
            hint="evalsi worker reads the server's evalsi.yaml: cluster: {nats: nats://HOST:4222}"
            " and storage: {postgres: {dsn: ...}}",
        )
    return config.cluster


def run_worker(
    config: ServerConfig, pool: str, *, name: str = "", drain_s: float = 30.0
) -> WorkerStats:
    """Work ``pool``'s queue until a signal; what it did."""
    cluster = _require_cluster(config)
    from evalsi.server._cluster_config import open_object_store
    from evalsi.store import SqlStore

    objects = open_object_store(config.object_store)  # shards sent by reference
    store = SqlStore.open(config.store)
    try:
        worker = Worker(
            cluster,
            pool,
            store,
            registry=server_registry(config),
            resilience=Resilience(egress=server_egress(config)),
            time_limit=float(config.limits.evaluator_seconds),
            name=name,
            drain_s=drain_s,
            objects=objects,
        )
        return asyncio.run(_until_signalled(worker))
    finally:
        store.close()
        if objects is not None:
            objects.close()


async def _until_signalled(worker: Worker) -> WorkerStats:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def asked(sig: Any) -> None:
        log.info("worker %s: %s: draining", worker.name, signal.Signals(sig).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, asked, sig)
    return await worker.run(stop)


__all__ = ["cluster_report", "run_worker"]
