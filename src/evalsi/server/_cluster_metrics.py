"""Prometheus metrics of the cluster a server dispatches to: per pool and per worker.

A scrape never waits on NATS: ``ClusterGauges.run`` reads ``cluster.cluster_status`` (each
pool's consumer, the workers' own reports in the workers bucket, the runs in progress from the
store) every ``REFRESH_S`` in the background, and ``ClusterCollector`` renders the last reading,
with its age and whether it succeeded (``evalsi_cluster_up``). Worker figures are the workers'
own counters since they started (a restarted worker starts again from zero: gauges, not
counters); a worker that stopped reporting leaves once its report expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from evalsi.cluster import ClusterConfig, cluster_status
from evalsi.store import SqlStore

log = logging.getLogger("evalsi.server")

REFRESH_S = 5.0
READ_TIMEOUT_S = 10.0

_POOL = (
    ("pending", "Shards queued in the pool, not yet delivered to a worker."),
    ("in_flight", "Shards delivered to a worker and not yet acknowledged."),
    ("redelivered", "Shards in flight that were delivered more than once."),
    ("waiting", "Pull requests of idle workers waiting for a shard."),
    ("concurrency", "Shards one worker of the pool runs at once (configured)."),
)
_WORKER = (
    ("shards", "Shards the worker finished since it started."),
    ("tasks", "Tasks the worker stored since it started."),
    ("skipped", "Shards acknowledged without running (finished already, or cancelled)."),
    ("dead", "Shards the worker dead-lettered (poison) since it started."),
    ("failed", "Shards that raised on the worker and were released for redelivery."),
    ("in_flight", "Shards the worker is running now."),
    ("paused_seconds", "Seconds the worker waited for the store to come back."),
    ("age_seconds", "Seconds since the worker's last report."),
)


class ClusterGauges:
    """The cluster's last status reading, refreshed in the background."""

    def __init__(self, config: ClusterConfig, store: SqlStore | None) -> None:
        self.config = config
        self.store = store
        self.snapshot: dict[str, Any] | None = None
        self.read_at: float | None = None
        self.up = False

    async def refresh(self) -> None:
        try:
            self.snapshot = await asyncio.wait_for(
                cluster_status(self.config, self.store), READ_TIMEOUT_S
            )
            self.read_at, self.up = time.time(), True
        except Exception as e:  # noqa: BLE001 - NATS or the store away: the metrics say so
            self.up = False
            log.debug("cluster status not read: %s", e)

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(REFRESH_S)

    @contextlib.asynccontextmanager
    async def running(self) -> Any:
        task = asyncio.create_task(self.run(), name="evalsi-cluster-metrics")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


class ClusterCollector(Collector):
    """``ClusterGauges``' last reading as Prometheus families."""

    def __init__(self, gauges: ClusterGauges) -> None:
        self._gauges = gauges

    def describe(self) -> list[Metric]:
        return list(self.collect())  # cheap: the last reading, from memory

    def collect(self) -> Iterator[Metric]:
        g = self._gauges
        yield GaugeMetricFamily(
            "evalsi_cluster_up", "1 when the last cluster status reading succeeded.", value=g.up
        )
        age = time.time() - g.read_at if g.read_at is not None else float("nan")
        yield GaugeMetricFamily(
            "evalsi_cluster_status_age_seconds", "Seconds since the last reading.", value=age
        )
        snap = g.snapshot or {}
        pools = snap.get("pools", [])
        for name, text in _POOL:
            family = GaugeMetricFamily(f"evalsi_cluster_pool_{name}", text, labels=["pool"])
            for pool in pools:
                family.add_metric([pool["name"]], float(pool.get(name, 0)))
            yield family
        workers = snap.get("workers", [])
        count = GaugeMetricFamily(
            "evalsi_cluster_workers", "Workers reporting, by pool.", labels=["pool"]
        )
        for pool in pools:
            count.add_metric([pool["name"]], sum(1 for w in workers if w["pool"] == pool["name"]))
        yield count
        for name, text in _WORKER:
            family = GaugeMetricFamily(
                f"evalsi_cluster_worker_{name}", text, labels=["pool", "worker"]
            )
            for w in workers:
                family.add_metric([w.get("pool", ""), w.get("name", "")], float(w.get(name, 0)))
            yield family
        yield GaugeMetricFamily(
            "evalsi_cluster_dead_shards",
            "Shards in the dead-letter stream (poison, given up after maxDeliver).",
            value=float(snap.get("dead", 0)),
        )
        shards = GaugeMetricFamily(
            "evalsi_cluster_run_shards",
            "Shards of the runs in progress, by state.",
            labels=["run", "state"],
        )
        for run in snap.get("runs", []):
            for state, counts in run.get("shards", {}).items():
                shards.add_metric([run["run_id"], state], float(counts["shards"]))
        yield shards


__all__ = ["ClusterCollector", "ClusterGauges"]
