"""The cluster's Prometheus families from a status reading, and when there is none: NATS
unreachable makes ``evalsi_cluster_up`` 0, never a failed scrape."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, generate_latest

from evalsi.cluster import ClusterConfig, PoolConfig
from evalsi.server._cluster_metrics import ClusterCollector, ClusterGauges


def render(gauges: ClusterGauges) -> str:
    registry = CollectorRegistry()
    registry.register(ClusterCollector(gauges))
    return generate_latest(registry).decode()


def config() -> ClusterConfig:
    return ClusterConfig(nats="nats://127.0.0.1:1", pools={"default": PoolConfig()})


def test_a_reading_becomes_families_per_pool_worker_and_run() -> None:
    gauges = ClusterGauges(config(), None)
    gauges.up, gauges.read_at = True, 0.0
    gauges.snapshot = {
        "pools": [
            {"name": "default", "concurrency": 4, "pending": 7, "in_flight": 2,
             "redelivered": 1, "waiting": 0},
            {"name": "judges", "concurrency": 1, "pending": 0, "in_flight": 0,
             "redelivered": 0, "waiting": 3},
        ],
        "workers": [
            {"name": "w0", "pool": "default", "tasks": 120, "shards": 3, "in_flight": 2},
            {"name": "w1", "pool": "default", "tasks": 80, "shards": 2, "in_flight": 0},
        ],
        "dead": 1,
        "runs": [{"run_id": "r1", "shards": {"done": {"shards": 5, "tasks": 200},
                                             "queued": {"shards": 7, "tasks": 280}}}],
    }  # fmt: skip
    text = render(gauges)
    assert "evalsi_cluster_up 1.0" in text
    assert 'evalsi_cluster_pool_pending{pool="default"} 7.0' in text
    assert 'evalsi_cluster_pool_waiting{pool="judges"} 3.0' in text
    assert 'evalsi_cluster_workers{pool="default"} 2.0' in text
    assert 'evalsi_cluster_workers{pool="judges"} 0.0' in text
    assert 'evalsi_cluster_worker_tasks{pool="default",worker="w0"} 120.0' in text
    assert 'evalsi_cluster_worker_dead{pool="default",worker="w1"} 0.0' in text  # unreported: 0
    assert "evalsi_cluster_dead_shards 1.0" in text
    assert 'evalsi_cluster_run_shards{run="r1",state="queued"} 7.0' in text


def test_an_unreachable_nats_is_up_0_and_an_empty_reading() -> None:
    gauges = ClusterGauges(config(), None)
    asyncio.run(gauges.refresh())  # nothing listens on port 1
    assert not gauges.up
    text = render(gauges)
    assert "evalsi_cluster_up 0.0" in text
    assert "evalsi_cluster_status_age_seconds NaN" in text
    assert "evalsi_cluster_pool_pending" in text  # the family, with no samples
