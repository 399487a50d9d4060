"""``evalsi worker``: pull shards of one pool, execute their tasks, store them, acknowledge.

Each shard is checked against the store first: one finished already (a redelivery after the
worker that did it died before acknowledging) or cancelled (its run was stopped) is only
acknowledged. Otherwise its tasks run through the run's own pipeline (``runs.execute_shard``:
target calls, grading, writes keyed by task, so a task stored twice counts once), the shard is
marked done, then acknowledged. While it runs, the worker tells JetStream it is in progress
every third of ``ackWait``, so a long shard is not delivered to another worker meanwhile.

- The last allowed delivery of a shard (``maxDeliver``) is not run: the shard crashed or timed
  out every time before, so its tasks are stored as ``infra_error(poison)``, the shard marked
  dead and copied to ``dead.<pool>``. The run completes without them.
- The store unreachable (PostgreSQL restarting): the worker keeps the shard, pauses, and runs it
  again once the store answers; the message stays in progress meanwhile.
- A shard sent by reference (its payload in the object store): fetched and checked against its
  sha256 before it runs, removed from the store once done. Missing or altered, its tasks are
  stored as ``infra_error(payload)`` and the shard marked dead at once (no delivery can fix
  it); the object store unreachable, the shard is released for a later delivery.
- NATS unreachable: the client reconnects; fetching waits.
- SIGTERM (``stop``): no new shard is fetched; those in flight finish within ``drain_s``, the
  rest are released (``nak``) for another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson

from evalsi.cluster._config import ClusterConfig, PoolConfig
from evalsi.cluster._patience import TRIES, call_store, wait_for_store
from evalsi.cluster._queue import (
    MAX_PAYLOAD_BYTES,
    STREAM,
    WORKER_TTL_S,
    Shard,
    connect,
    consumer,
    decode,
    ensure_queues,
    workers_bucket,
)
from evalsi.connectors import Resilience, close_shared_session
from evalsi.core import NotFoundError, UserError
from evalsi.evaluators import Registry
from evalsi.runs import RunContext, execute_shard, open_run_context
from evalsi.store import (
    ObjectError,
    ObjectRef,
    ObjectStore,
    OutputRow,
    SqlStore,
    finish_shard,
    shard_state,
    unavailable,
)

log = logging.getLogger("evalsi.cluster")

CONTEXTS = 8
"""Runs whose target, evaluators and judges a worker keeps built."""
STORE_TRIES = TRIES  # a shard run again after the store failed under it and came back


@dataclass(slots=True)
class WorkerStats:
    """What a worker has done since it started."""

    shards: int = 0
    tasks: int = 0
    skipped: int = 0  # finished already or cancelled: acknowledged only
    dead: int = 0
    failed: int = 0  # raised: released for redelivery
    paused_s: float = 0.0  # waiting for the store
    in_flight: set[str] = field(default_factory=set)
    started_at: float = field(default_factory=time.time)

    def report(self, name: str, pool: str) -> dict[str, Any]:
        """What ``evalsi cluster status`` shows of this worker."""
        return {
            "name": name,
            "pool": pool,
            "shards": self.shards,
            "tasks": self.tasks,
            "skipped": self.skipped,
            "dead": self.dead,
            "failed": self.failed,
            "in_flight": len(self.in_flight),
            "paused_seconds": round(self.paused_s, 3),
            "started_at": self.started_at,
            "reported_at": time.time(),
        }


class Worker:
    """One worker process of ``pool``."""

    def __init__(
        self,
        config: ClusterConfig,
        pool: str,
        store: SqlStore,
        *,
        registry: Registry,
        resilience: Resilience | None = None,
        time_limit: float | None = None,
        name: str = "",
        drain_s: float = 30.0,
        objects: ObjectStore | None = None,
    ) -> None:
        if pool not in config.pools:
            raise UserError(
                f"--pool {pool!r}: no such pool; cluster.pools has {', '.join(config.pools)}"
            )
        self.config = config
        self.pool: PoolConfig = config.pools[pool]
        self.store = store
        self.registry = registry
        self.resilience = resilience
        self.time_limit = time_limit
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.drain_s = drain_s
        self.objects = objects
        self.stats = WorkerStats()
        self._contexts: OrderedDict[str, RunContext] = OrderedDict()
        self._using: Counter[str] = Counter()  # shards running per run: their context stays

    async def run(self, stop: asyncio.Event) -> WorkerStats:
        """Work until ``stop`` is set, then drain."""
        from nats.errors import TimeoutError as FetchTimeout

        nc = await connect(self.config.nats, f"evalsi-worker {self.name}")
        js = nc.jetstream()
        await ensure_queues(js, self.config)
        sub = await js.pull_subscribe_bind(consumer(self.pool.name), stream=STREAM)
        reporter = asyncio.create_task(self._report(js))
        slots = asyncio.Semaphore(self.pool.concurrency)
        running: set[asyncio.Task[None]] = set()
        log.info("worker %s: pool %s, %d at once", self.name, self.pool.name, self.pool.concurrency)
        try:
            while not stop.is_set():
                await slots.acquire()
                if stop.is_set():
                    slots.release()
                    break
                try:
                    msgs = await sub.fetch(1, timeout=1.0)
                except (FetchTimeout, TimeoutError):
                    slots.release()
                    continue
                except Exception as e:  # noqa: BLE001 - NATS away: the client reconnects
                    slots.release()
                    log.warning("worker %s: fetching: %s", self.name, e)
                    await asyncio.sleep(0.5)
                    continue
                for msg in msgs:
                    task = asyncio.create_task(self._handle(msg, js))
                    running.add(task)
                    task.add_done_callback(running.discard)
                    task.add_done_callback(lambda _: slots.release())
            if running:  # drain: in-flight shards finish, or are released for another worker
                _, left = await asyncio.wait(set(running), timeout=self.drain_s)
                for task in left:
                    task.cancel()
                await asyncio.gather(*left, return_exceptions=True)
        finally:
            reporter.cancel()
            with contextlib.suppress(BaseException):
                await reporter
            for context in self._contexts.values():
                with contextlib.suppress(Exception):
                    await context.close()
            self._contexts.clear()
            await close_shared_session()  # the targets' and judges' HTTP connections
            with contextlib.suppress(Exception):
                await nc.close()  # in-flight shards are settled: nothing left to drain
        return self.stats

    async def _handle(self, msg: Any, js: Any) -> None:
        try:
            shard = decode(msg.data)
        except UserError as e:
            log.error("worker %s: dropped a message that is not a shard: %s", self.name, e)
            await msg.term()
            return
        self.stats.in_flight.add(shard.msg_id)
        beat = asyncio.create_task(self._heartbeat(msg))
        try:
            await self._run_shard(shard, msg, js)
        except asyncio.CancelledError:  # drained: another worker takes it now
            with contextlib.suppress(Exception):
                await msg.nak()
            raise
        except Exception:
            self.stats.failed += 1
            log.exception("worker %s: shard %s failed; released", self.name, shard.msg_id)
            with contextlib.suppress(Exception):
                await msg.nak(delay=1.0)
        finally:
            beat.cancel()
            self.stats.in_flight.discard(shard.msg_id)

    async def _run_shard(self, shard: Shard, msg: Any, js: Any) -> None:
        try:
            state = await self._store(shard_state, self.store, shard.run_id, shard.shard_id)
        except NotFoundError:
            state = None  # a run this store does not have
        if state != "queued":  # done already, dead, cancelled, or of a store we do not share
            self.stats.skipped += 1
            await msg.ack()
            return
        if msg.metadata.num_delivered >= self.pool.max_deliver:
            why = (
                f"poison: shard {shard.shard_id} failed on each of {self.pool.max_deliver - 1} "
                "deliveries (a worker crashed, timed out or raised on it)"
            )
            await self._dead_letter(shard, msg, js, why, "poison")
            return
        ref = shard.ref
        if ref is not None:
            try:
                shard = await self._fetch(shard, ref)
            except ObjectError as e:
                if e.kind == "unavailable":
                    raise  # released: a later delivery tries again
                why = f"payload: shard {shard.shard_id}: {e.message}"
                await self._dead_letter(shard, msg, js, why, "payload")
                return
        for attempt in range(1, STORE_TRIES + 1):
            try:
                self._using[shard.run_id] += 1
                try:
                    context = await self._context(shard.run_id)
                    outcome = await execute_shard(
                        context,
                        self.store,
                        shard.tasks,
                        time_limit=self.time_limit,
                        share=self.pool.concurrency,
                    )
                finally:
                    self._using[shard.run_id] -= 1
                    if not self._using[shard.run_id]:
                        del self._using[shard.run_id]
                await self._store(finish_shard, self.store, shard.run_id, shard.shard_id,
                                  "done", self.name)  # fmt: skip
                break
            except Exception as e:
                if not unavailable(e) or attempt == STORE_TRIES:
                    raise
                # the store went away under the shard: wait for it, then run the shard again
                log.warning("worker %s: store unavailable (%s); pausing", self.name, e)
                await self._wait_for_store()
        self.stats.shards += 1
        self.stats.tasks += outcome.tasks
        await msg.ack()
        if ref is not None and self.objects is not None:  # done: no delivery reads it again
            try:
                await asyncio.to_thread(self.objects.delete, ref.key)
            except ObjectError as e:
                log.warning("worker %s: payload %s left in the store: %s", self.name, ref.key, e)

    async def _fetch(self, shard: Shard, ref: ObjectRef) -> Shard:
        """The shard whose payload ``ref`` names, read from the object store and checked."""
        if self.objects is None:
            raise UserError(
                f"shard {shard.msg_id} was sent through the object store, and this worker has "
                "no objectStore: section",
                hint="give the workers the server's evalsi.yaml (--config)",
            )
        limit = MAX_PAYLOAD_BYTES + self.config.max_shard_bytes
        data = await asyncio.to_thread(self.objects.get, ref, max_bytes=limit)
        try:
            full = decode(data)
        except UserError as e:
            raise ObjectError(f"object {ref.key}: {e.message}", kind="corrupt") from None
        if (full.run_id, full.shard_id) != (shard.run_id, shard.shard_id) or full.ref:
            raise ObjectError(f"object {ref.key}: holds another shard", kind="corrupt")
        return full

    async def _dead_letter(self, shard: Shard, msg: Any, js: Any, why: str, kind: str) -> None:
        """Settle a shard no delivery can run: its tasks stored as ``infra_error(kind)``."""
        rows = [OutputRow(seq, trial, record_id, "infra_error", kind, error=why)
                for seq, trial, record_id in shard.keys]  # fmt: skip
        db = self.store
        await self._store(db.write_outputs, shard.run_id, rows)
        await self._store(finish_shard, db, shard.run_id, shard.shard_id, "dead", self.name)
        with contextlib.suppress(Exception):
            await js.publish(f"dead.{self.pool.name}", msg.data, headers={"Evalsi-Reason": why})
        self.stats.dead += 1
        log.error("worker %s: %s of run %s", self.name, why, shard.run_id)
        await msg.term()

    async def _context(self, run_id: str) -> RunContext:
        context = self._contexts.get(run_id)
        if context is not None:
            self._contexts.move_to_end(run_id)
            return context
        context = await open_run_context(
            self.store, run_id, registry=self.registry, resilience=self.resilience
        )
        self._contexts[run_id] = context
        idle = [r for r in self._contexts if r not in self._using]  # oldest first
        for old_id in idle[: max(0, len(self._contexts) - CONTEXTS)]:
            # a context a running shard uses is never closed under it (its agent's tools)
            await self._contexts.pop(old_id).close()
        return context

    async def _report(self, js: Any) -> None:
        """This worker's stats in the workers bucket, every third of its TTL; removed at the
        end (a killed worker's entry expires)."""
        key = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.name)
        bucket = None
        try:
            while True:
                try:
                    bucket = bucket or await workers_bucket(js)
                    report = self.stats.report(self.name, self.pool.name)
                    await bucket.put(key, orjson.dumps(report))
                except Exception as e:  # noqa: BLE001 - NATS away: the next round tries again
                    log.debug("worker %s: report not sent: %s", self.name, e)
                await asyncio.sleep(WORKER_TTL_S / 3)
        finally:
            if bucket is not None:
                with contextlib.suppress(Exception):
                    await bucket.delete(key)

    async def _heartbeat(self, msg: Any) -> None:
        every = max(0.5, self.pool.ack_wait_s / 3)
        while True:
            await asyncio.sleep(every)
            with contextlib.suppress(Exception):  # NATS away: the next beat tries again
                await msg.in_progress()

    async def _store(self, call: Any, *args: Any) -> Any:
        """A store call off the loop; while the store is away, wait for it."""
        return await call_store(self.store, call, *args, who=f"worker {self.name}")

    async def _wait_for_store(self) -> None:
        self.stats.paused_s += await wait_for_store(self.store, f"worker {self.name}")


__all__ = ["Worker", "WorkerStats"]
