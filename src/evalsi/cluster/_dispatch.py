"""A run's tasks onto the work queue (``runs.Dispatch``): what ``evalsi serve`` does with a run
when ``cluster:`` is configured.

The run's pending tasks are read lazily from its dataset and cut into shards (``shardSize``
tasks, or fewer when the message would pass ``max_shard_bytes``). Each shard is recorded
``queued`` in the store, then published; at most the pool's ``maxPending`` shards of the run are
out at once (back-pressure: the dataset is read only as fast as workers finish). Shards an
earlier session of the run left queued (a resumed run) are cancelled first. It returns when
every shard of this session is done, dead or cancelled; the run's figures are then computed
from the store by ``execute_run``, as for an embedded run. Cancelled (the run stopped), it marks
its queued shards cancelled, so workers skip them.

The run's budget holds across its workers: they share their spend in the store
(``_shared.RunSpend``), each shard stops itself once the sum reaches a tokens or USD budget,
and the dispatcher then queues nothing more and cancels what is still queued — as an embedded
run stops, with the tasks not started left for a resume. A wall-clock budget counts from the
session's start. The sum of every worker's spend is the run's ``spend``.

With an object store, a sample too large for a shard gets a shard of its own, and a shard
whose message passes ``payloadThreshold`` is stored there (``payloads/<run>/sha256-<hex>``)
and sent by reference; without one, such a sample is refused naming the setting that allows
it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

from evalsi.cluster._config import ClusterConfig
from evalsi.cluster._patience import call_store
from evalsi.cluster._queue import (
    MAX_PAYLOAD_BYTES,
    connect,
    encode_ref,
    encode_rows,
    ensure_queues,
    subject,
    task_row,
)
from evalsi.cluster._shared import total_spend
from evalsi.core import UserError
from evalsi.runs import Dispatched, TaskKey, over_budget
from evalsi.specs import BudgetSpec
from evalsi.store import (
    ObjectError,
    ObjectStore,
    SqlStore,
    cancel_shards,
    queue_shards,
    shard_counts,
)

log = logging.getLogger("evalsi.cluster")

POLL_S = 0.2
"""How often the store is asked how many shards are finished."""
PUBLISH_RETRY_S = 1.0
"""The wait before publishing again when the stream is full or NATS is away."""


class ClusterDispatch:
    """``runs.Dispatch`` onto the configured cluster, writing shard states to ``store``."""

    def __init__(
        self,
        config: ClusterConfig,
        store: SqlStore,
        *,
        name: str = "evalsi-serve",
        objects: ObjectStore | None = None,
    ):
        self.config = config
        self.store = store
        self.name = name
        self.objects = objects

    async def __call__(
        self,
        run_id: str,
        tasks: Iterator[TaskKey],
        progress: Callable[[int, int], None] | None,
        budget: BudgetSpec | None = None,
    ) -> Dispatched:
        pool = self.config.run_pool
        session = secrets.token_hex(4)  # a resumed run's shards never collide with earlier ones
        who = f"run {run_id}"
        # a resumed or adopted run: shards an earlier owner queued are skipped from now on
        # (this session queues every task not yet stored again)
        await call_store(self.store, cancel_shards, self.store, run_id, who=who)
        watch = _BudgetWatch(self.store, run_id, session, budget)
        nc = await connect(self.config.nats, self.name)
        try:
            js = nc.jetstream()
            await ensure_queues(js, self.config)
            published = 0
            for number, rows in enumerate(self._cut(tasks)):
                while (
                    published - await self._finished(run_id, session, progress)
                    >= (pool.max_pending)
                    and not await watch.spent()
                ):
                    await asyncio.sleep(POLL_S)
                if await watch.spent():
                    break  # the tasks not queued yet are not run, as embedded
                shard_id = f"{session}-{number}"
                await call_store(self.store, queue_shards, self.store, run_id,
                                 [(shard_id, len(rows))], who=who)  # fmt: skip
                await self._publish(js, subject(pool.name), run_id, shard_id, rows)
                published += 1
            while await self._finished(run_id, session, progress) < published:
                if await watch.spent():  # workers skip the queued ones; running ones end
                    await call_store(self.store, cancel_shards, self.store, run_id, who=who)
                await asyncio.sleep(POLL_S)
        except BaseException:
            # stopped (cancelled, or the dataset failed): workers skip what is still queued
            # and stop what they are running
            await call_store(self.store, _cancel_all, self.store, run_id, who=who)
            raise
        finally:
            await nc.close()
        spend = await call_store(self.store, total_spend, self.store, run_id, session, who=who)
        return Dispatched(spend, watch.reason or over_budget(budget, spend.tokens, spend.usd))

    def _cut(self, tasks: Iterator[TaskKey]) -> Iterator[list[bytes]]:
        size, limit = self.config.shard_size, self.config.max_shard_bytes
        rows: list[bytes] = []
        used = 0
        for seq, trial, record in tasks:
            row = task_row(seq, trial, record)
            n = len(row)
            if n > limit and self.objects is None:
                raise UserError(
                    f"sample {record.id} is {n:,} bytes as a task; a shard message holds at "
                    f"most {limit:,} without an object store",
                    hint="configure objectStore: (endpoint, bucket, credentials) in evalsi.yaml "
                    "so larger payloads travel through it by reference (docs/guides/deploy.md)",
                )
            if n > MAX_PAYLOAD_BYTES:
                raise UserError(
                    f"sample {record.id} is {n:,} bytes as a task; the most a task may be is "
                    f"{MAX_PAYLOAD_BYTES:,}"
                )
            if rows and (len(rows) >= size or used + n > limit):
                yield rows
                rows, used = [], 0
            rows.append(row)
            used += n
        if rows:
            yield rows

    async def _publish(
        self, js: Any, to: str, run_id: str, shard_id: str, rows: list[bytes]
    ) -> None:
        from nats.errors import Error as NatsError

        payload = encode_rows(run_id, shard_id, rows)
        if self.objects is not None and len(payload) > self.objects.config.payload_threshold:
            payload = await self._by_reference(run_id, shard_id, rows, payload)
        headers = {"Nats-Msg-Id": f"{run_id}.{shard_id}"}
        while True:
            try:
                await js.publish(to, payload, headers=headers, timeout=5)
                return
            except (NatsError, TimeoutError) as e:  # full, or NATS away: the same id again
                log.warning("shard %s of run %s not queued yet: %s", shard_id, run_id, e)
                await asyncio.sleep(PUBLISH_RETRY_S)

    async def _by_reference(
        self, run_id: str, shard_id: str, rows: list[bytes], payload: bytes
    ) -> bytes:
        """The message of a shard stored in the object store; an unreachable store is waited
        for like NATS (anything else it answers fails the run, naming the setting)."""
        assert self.objects is not None
        while True:
            try:
                ref, _ = await asyncio.to_thread(self.objects.put, payload, f"payloads/{run_id}")
                return encode_ref(run_id, shard_id, ref, rows)
            except ObjectError as e:
                if e.kind != "unavailable":
                    raise
                log.warning("shard %s of run %s not stored yet: %s", shard_id, run_id, e)
                await asyncio.sleep(PUBLISH_RETRY_S)

    async def _finished(
        self, run_id: str, session: str, progress: Callable[[int, int], None] | None
    ) -> int:
        counts = await call_store(
            self.store, shard_counts, self.store, run_id, f"{session}-", who=f"run {run_id}"
        )
        shards = sum(counts.get(s, (0, 0))[0] for s in ("done", "dead", "cancelled"))
        if progress is not None:
            done = sum(counts.get(s, (0, 0))[1] for s in ("done", "dead"))
            progress(done, counts.get("dead", (0, 0))[1])
        return shards


def _cancel_all(store: SqlStore, run_id: str) -> int:
    return cancel_shards(store, run_id, running=True)


class _BudgetWatch:
    """The run's budget against what every worker spent (read at most every ``POLL_S``), and
    its wall clock from the session's start."""

    def __init__(
        self, store: SqlStore, run_id: str, session: str, budget: BudgetSpec | None
    ) -> None:
        self.store, self.run_id, self.session, self.budget = store, run_id, session, budget
        self.reason: str | None = None
        self._began = time.monotonic()
        self._read_at = 0.0

    async def spent(self) -> bool:
        budget = self.budget
        if self.reason is not None or budget is None:
            return self.reason is not None
        now = time.monotonic()
        if budget.wall_clock_s is not None and now - self._began >= budget.wall_clock_s:
            self.reason = f"budget(wall_clock): {budget.wall_clock_s:g}s"
        elif (budget.tokens is not None or budget.usd is not None) and (
            now - self._read_at >= POLL_S
        ):
            self._read_at = now
            spend = await call_store(self.store, total_spend, self.store, self.run_id,
                                     self.session, who=f"run {self.run_id}")  # fmt: skip
            self.reason = over_budget(budget, spend.tokens, spend.usd)
        return self.reason is not None


__all__ = ["ClusterDispatch"]
