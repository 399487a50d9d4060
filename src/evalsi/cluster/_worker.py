"""``evalsi worker``: pull shards of one pool, execute their tasks, store them, acknowledge.

Each shard is marked running in the store first, unless it finished already (a redelivery
after the worker that did it died before acknowledging) or was cancelled (its run stopped):
those are only acknowledged. Otherwise its tasks run through the run's own pipeline
(``runs.execute_shard``: target calls, grading, writes keyed by task, so a task stored twice
counts once), the shard is marked done, then acknowledged. While it runs, the worker tells
JetStream it is in progress every third of ``ackWait``, so a long shard is not delivered to
another worker meanwhile. The run's budget and rate limits are held with its other workers
(``_shared``): a shard stops once the run's summed spend reaches the budget, and one started
after that is marked cancelled unrun.

- A shard delivered before runs alone on its worker: if it is what crashed the worker, it
  takes no other shard down with it. The last allowed delivery (``maxDeliver``) is not run:
  the shard crashed or timed out every time before, so its tasks are stored as
  ``infra_error(poison)``, the shard marked dead and copied to ``dead.<pool>``. The run
  completes without them.
- The store unreachable (PostgreSQL restarting): the worker keeps the shard, pauses, and runs it
  again once the store answers; the message stays in progress meanwhile.
- A shard sent by reference (its payload in the object store): fetched and checked against its
  sha256 before it runs, removed from the store once done. Missing or altered, its tasks are
  stored as ``infra_error(payload)`` and the shard marked dead at once (no delivery can fix
  it); the object store unreachable, the shard is released for a later delivery.
- NATS unreachable: the client reconnects; fetching waits.
- A run cancelled (its owner marks its shards cancelled, running ones too): the worker stops
  the shards of it that it runs within ``CANCEL_POLL_S`` and acknowledges them.
- SIGTERM (``stop``): no new shard is fetched; those in flight finish within ``drain_s``, the
  rest are released (``nak``) for another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import socket
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
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
from evalsi.cluster._shared import FLUSH_S, RunSpend, StoreWindows, session_of
from evalsi.connectors import RateLimiterRegistry, Resilience, close_shared_session
from evalsi.core import NotFoundError, UserError
from evalsi.evaluators import Registry
from evalsi.runs import RunContext, execute_shard, open_run_context
from evalsi.store import (
    ObjectError,
    ObjectRef,
    ObjectStore,
    OutputRow,
    SqlStore,
    cancelled_among,
    finish_shard,
    start_shard,
    unavailable,
)

log = logging.getLogger("evalsi.cluster")

CONTEXTS = 8
"""Runs whose target, evaluators and judges a worker keeps built."""
REPORT_S = min(2.0, WORKER_TTL_S / 3)
CANCEL_POLL_S = 1.0
"""How often a worker asks the store whether the runs of the shards it runs were cancelled."""
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
        self.spender = f"{self.name}#{secrets.token_hex(3)}"  # its rows of shared spend
        self.drain_s = drain_s
        self.objects = objects
        self.stats = WorkerStats()
        self._contexts: OrderedDict[str, RunContext] = OrderedDict()
        self._using: Counter[str] = Counter()  # shards running per run: their context stays
        self._ledgers: dict[str, RunSpend] = {}  # per run: this process's spend, shared
        self._running: dict[tuple[str, str], asyncio.Task[Any] | None] = {}  # (run, shard)
        self._stopped: set[tuple[str, str]] = set()  # stopped: their run was cancelled
        self._flushers: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def run(self, stop: asyncio.Event) -> WorkerStats:
        """Work until ``stop`` is set, then drain."""
        from nats.errors import TimeoutError as FetchTimeout

        nc = await connect(self.config.nats, f"evalsi-worker {self.name}")
        js = nc.jetstream()
        await ensure_queues(js, self.config)
        sub = await js.pull_subscribe_bind(consumer(self.pool.name), stream=STREAM)
        reporter = asyncio.create_task(self._report(js))
        canceller = asyncio.create_task(self._stop_cancelled())
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
                    if _suspect(msg):
                        # delivered before: the worker that had it may have died of it. It runs
                        # alone, so a crash it causes takes no other shard down with it (and
                        # counts against no other shard's deliveries)
                        await asyncio.gather(*running, return_exceptions=True)
                        try:
                            await asyncio.create_task(self._handle(msg, js))  # its own task
                        finally:  # (cancelling a shard never cancels this loop)
                            slots.release()
                        continue
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
            for helper in (reporter, canceller):
                helper.cancel()
                with contextlib.suppress(BaseException):
                    await helper
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
        key = (shard.run_id, shard.shard_id)
        self._running[key] = asyncio.current_task()
        beat = asyncio.create_task(self._heartbeat(msg))
        try:
            await self._run_shard(shard, msg, js)
        except asyncio.CancelledError:
            if key in self._stopped:  # its run was cancelled: the shard is settled
                self.stats.skipped += 1
                with contextlib.suppress(Exception):
                    await msg.ack()
                return
            with contextlib.suppress(Exception):  # drained: another worker takes it now
                await msg.nak()
            raise
        except Exception:
            self.stats.failed += 1
            log.exception("worker %s: shard %s failed; released", self.name, shard.msg_id)
            with contextlib.suppress(Exception):
                await msg.nak(delay=1.0)
        finally:
            self._running.pop(key, None)
            self._stopped.discard(key)
            beat.cancel()
            self.stats.in_flight.discard(shard.msg_id)

    async def _run_shard(self, shard: Shard, msg: Any, js: Any) -> None:
        try:
            runnable = await self._store(
                start_shard, self.store, shard.run_id, shard.shard_id, self.name
            )
        except NotFoundError:
            runnable = False  # a run this store does not have
        if not runnable:  # done already, dead, cancelled, or of a store we do not share
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
                    ledger = await self._ledger(shard, context)
                    if ledger.spent() is not None:  # the run's budget is spent: not run
                        await self._store(finish_shard, self.store, shard.run_id,
                                          shard.shard_id, "cancelled", self.name)  # fmt: skip
                        self.stats.skipped += 1
                        await msg.ack()
                        return
                    spend = ledger.start()
                    flusher = self._flush_while_running(ledger)
                    try:
                        outcome = await execute_shard(
                            context,
                            self.store,
                            shard.tasks,
                            time_limit=self.time_limit,
                            share=self.pool.concurrency,
                            spend=spend,
                            spent_elsewhere=ledger.spent_elsewhere,
                        )
                    finally:
                        ledger.end(spend)
                        flusher()
                finally:
                    self._using[shard.run_id] -= 1
                    if not self._using[shard.run_id]:
                        del self._using[shard.run_id]
                # the spend before the shard is done: its owner reads both when it is
                await self._store(ledger.flush)
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
        # the run's rate limits are held with every other worker's, in the store
        limiters = RateLimiterRegistry(windows=StoreWindows(self.store), scope=run_id)
        resilience = dataclasses.replace(self.resilience or Resilience(), limiters=limiters)
        context = await open_run_context(
            self.store, run_id, registry=self.registry, resilience=resilience
        )
        self._contexts[run_id] = context
        idle = [r for r in self._contexts if r not in self._using]  # oldest first
        for old_id in idle[: max(0, len(self._contexts) - CONTEXTS)]:
            # a context a running shard uses is never closed under it (its agent's tools)
            await self._contexts.pop(old_id).close()
            self._ledgers.pop(old_id, None)
        return context

    async def _ledger(self, shard: Shard, context: RunContext) -> RunSpend:
        """This process's spend on the shard's run and session (one per run: a new session
        of the run, resumed, starts a new one)."""
        session = session_of(shard.shard_id)
        ledger = self._ledgers.get(shard.run_id)
        if ledger is None or ledger.session != session:
            ledger = RunSpend(
                self.store,
                shard.run_id,
                session,
                context.spec.budget,
                context.judge_spend,
                self.spender,
            )
            # kept before the first await: a shard of the run starting meanwhile shares it
            # (two ledgers of one spender would each write part of its spend)
            self._ledgers[shard.run_id] = ledger
            await self._store(ledger.flush)  # and read what the others spent so far
        return ledger

    def _flush_while_running(self, ledger: RunSpend) -> Callable[[], None]:
        """Share ``ledger`` every ``FLUSH_S`` while it has shards running, when the run has a
        tokens or USD budget to hold; returns what to call when this shard ends."""
        budget = ledger.budget
        if budget is None or (budget.tokens is None and budget.usd is None):
            return lambda: None
        key = (ledger.run_id, ledger.session)
        task = self._flushers.get(key)
        if task is None or task.done():

            async def flush_forever() -> None:
                while ledger.live:
                    await asyncio.sleep(FLUSH_S)
                    with contextlib.suppress(Exception):  # the store away: the next one tries
                        await asyncio.to_thread(ledger.flush)

            task = self._flushers[key] = asyncio.create_task(flush_forever())

        def done() -> None:
            if not ledger.live:
                task.cancel()
                self._flushers.pop(key, None)

        return done

    async def _report(self, js: Any) -> None:
        """This worker's stats in the workers bucket every ``REPORT_S`` (well within its TTL,
        and often enough for /metrics and ``cluster status`` to follow it); removed at the
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
                await asyncio.sleep(REPORT_S)
        finally:
            if bucket is not None:
                with contextlib.suppress(Exception):
                    await bucket.delete(key)

    async def _stop_cancelled(self) -> None:
        """Every ``CANCEL_POLL_S``: stop the shards this worker runs whose run was cancelled
        (their tasks in flight are stored cancelled, redone if the run is resumed)."""
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            by_run: dict[str, list[str]] = {}
            for run_id, shard_id in list(self._running):
                by_run.setdefault(run_id, []).append(shard_id)
            for run_id, shard_ids in by_run.items():
                try:
                    gone = await asyncio.to_thread(cancelled_among, self.store, run_id, shard_ids)
                except Exception as e:  # noqa: BLE001 - the store away: next round
                    log.debug("worker %s: cancelled shards not read: %s", self.name, e)
                    continue
                for shard_id in gone:
                    task = self._running.get((run_id, shard_id))
                    if task is not None and (run_id, shard_id) not in self._stopped:
                        log.info("worker %s: run %s cancelled: stopping shard %s",
                                 self.name, run_id, shard_id)  # fmt: skip
                        self._stopped.add((run_id, shard_id))
                        task.cancel()

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


def _suspect(msg: Any) -> bool:
    try:
        return int(msg.metadata.num_delivered) > 1
    except Exception:  # noqa: BLE001 - no delivery metadata: a first delivery
        return False


__all__ = ["Worker", "WorkerStats"]
