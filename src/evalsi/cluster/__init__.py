"""Scale-out: a run's tasks on NATS JetStream work queues, executed by ``evalsi worker``
processes that write to the shared PostgreSQL store (docs/guides/deploy.md).

``ClusterDispatch`` is what ``evalsi serve`` hands ``runs.execute_run`` when ``cluster:`` is
configured: the run is planned and concluded by the server, its tasks cut into shards and
published to ``work.<pool>``. ``Worker`` pulls a pool's shards and runs them through the run's
own pipeline (``runs.execute_shard``). Names are imported on first use: ``nats`` loads only
where a cluster is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.cluster._config import DEFAULT_POOL, ClusterConfig, PoolConfig
    from evalsi.cluster._dispatch import ClusterDispatch
    from evalsi.cluster._status import cluster_status
    from evalsi.cluster._worker import Worker, WorkerStats

__all__ = [
    "DEFAULT_POOL",
    "ClusterConfig",
    "ClusterDispatch",
    "PoolConfig",
    "Worker",
    "WorkerStats",
    "cluster_status",
]

__getattr__ = lazy_exports(__name__, __file__)
