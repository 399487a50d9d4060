"""The ``cluster:`` section of ``evalsi.yaml`` as the server and its workers read it.

```yaml
cluster:
  nats: nats://127.0.0.1:4222
  shardSize: 100              # tasks per work item
  leaseTtl: 90s               # a replica silent this long has its runs adopted by another
  pools:
    default: {concurrency: 4, maxPending: 64, ackWait: 60s, maxDeliver: 5}
```
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_POOL = "default"


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """One pool of workers (``evalsi worker --pool NAME``) and its work queue ``work.NAME``."""

    name: str = DEFAULT_POOL
    concurrency: int = 4  # shards a worker runs at once
    max_pending: int = 64  # shards of one run published and not yet finished (back-pressure)
    ack_wait_s: float = 60.0  # a shard not acknowledged, nor reported in progress, for this long
    # is delivered again (a worker sends in-progress every third of it while it works)
    max_deliver: int = 5  # the last delivery dead-letters the shard: its tasks become infra errors


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Where the work queues are and how work is cut and bounded."""

    nats: str
    pools: dict[str, PoolConfig] = field(default_factory=lambda: {DEFAULT_POOL: PoolConfig()})
    shard_size: int = 100  # tasks per shard
    max_shard_bytes: int = 512 * 1024  # a shard is cut before its message grows past this
    max_queued: int = 100_000  # shards the work stream holds at most, all pools together
    # a server replica silent this long is presumed gone: another adopts its runs
    lease_ttl_s: float = 90.0

    @property
    def run_pool(self) -> PoolConfig:
        """The pool a run's tasks go to: ``default``, else the first configured."""
        return self.pools.get(DEFAULT_POOL) or next(iter(self.pools.values()))


__all__ = ["DEFAULT_POOL", "ClusterConfig", "PoolConfig"]
