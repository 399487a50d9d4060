"""The Watch way in on a server: one trace store, the ingest pipeline the OTLP endpoints feed,
the online policy engine it hands completed traces to, and retention.

``attach`` builds them onto ``ServerState`` (so the Trace and Policy services, the OTLP
endpoints and the metrics share them); ``Watch.start``/``stop`` run in the app's lifespan.

With ``cluster:`` (replicas sharing a PostgreSQL store, decision 0019) ingest stores spans
without assembling them; ``SharedCompletion`` completes each trace once, on the replica holding
the ``watch`` lease, whose policy engine is the one that grades (``engine.leader``); every
replica takes the policies kept in the store every ``SYNC_S`` (applied on any replica).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from evalsi.policies import result_key
from evalsi.server._policies import default_engine
from evalsi.server._state import ServerState
from evalsi.server.otlp import IngestPool, worker_count
from evalsi.store import TraceStore
from evalsi.traces import Ingest, Redactor, SharedCompletion, normalize

log = logging.getLogger("evalsi.server")

RETENTION_EVERY_S = 300.0
# Seconds the policies get, at shutdown, to finish grading what ingest handed them.
DRAIN_TIMEOUT_S = 10.0
SYNC_S = 2.0
"""With replicas: how often each takes the policies kept in the store (applied on another)."""
ORPHAN_S = 60.0
"""A trace without a root completes this long after its last span (``Ingest``'s default)."""


class Watch:
    """Owns the ingest pipeline's and the retention loop's life cycle."""

    def __init__(self, state: ServerState) -> None:
        cfg = state.config.traces
        self.state = state
        cluster = state.config.cluster
        shared = cluster is not None
        if state.trace_store is None or (shared and not state.trace_store.claims):
            # replicas: every span batch also upserts its traces' claims (same transaction)
            state.trace_store = TraceStore(state.store, views=normalize, claims=shared)
        if state.policies is None:
            state.policies = default_engine(state)
        engine = state.policies
        self.ingest = Ingest(
            state.trace_store,
            redactor=Redactor(cfg.redaction),
            grace_s=cfg.grace_s,
            orphan_s=ORPHAN_S,
            max_open=cfg.max_open_traces,
            max_open_spans=cfg.max_open_spans,
            # completed traces go to the engine as values, through its bounded inbox; with
            # replicas they are completed from the store instead (``self.shared``)
            handoff=None if shared else engine.inbox,
            assemble=not shared,
        )
        self.shared: SharedCompletion | None = None
        if cluster is not None:
            engine.leader = False  # until this replica holds the watch lease
            rows = self.ingest.parts.rows
            self.shared = SharedCompletion(
                state.trace_store,
                lambda project, summaries: rows.put(project, (), summaries),
                ttl_s=cluster.lease_ttl_s,
                grace_s=cfg.grace_s,
                orphan_s=ORPHAN_S,
                grade=engine.on_trace,
                wants=engine.active,
                on_lead=self._lead,
                ingest_stats=self.ingest.stats,
            )
        # traces.ingestWorkers: processes that decode and store OTLP requests (started on the
        # first request); None: on the event loop.
        workers = worker_count(cfg.ingest_workers, state.store)
        self.pool = (
            IngestPool(workers, state.store, cfg.redaction, claims=shared) if workers else None
        )
        # traces.export.otlp: every stored score out as a gen_ai.evaluation.result event.
        self.exporter = cfg.export.exporter() if cfg.export is not None else None
        if self.exporter is not None:
            engine.on_scores = self.exporter
        state.ingest = self.ingest
        # The PolicyService handler (``_policies.PolicyHandler``), set by default_services:
        # starting it re-applies the policies kept in the store, once.
        self.policy_service: Any = None
        self._retention: asyncio.Task[None] | None = None
        self._sync: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start(self) -> None:
        self.state.policies.start()
        await self.ingest.start()
        if self.policy_service is not None:
            await self.policy_service.start()
        self._stop = asyncio.Event()
        self._retention = asyncio.create_task(self._retain(), name="evalsi-trace-retention")
        if self.shared is not None:
            self._sync = asyncio.create_task(self._sync_policies(), name="evalsi-policy-sync")
            await self.shared.start()

    async def stop(self) -> None:
        self._stop.set()
        try:
            if self.shared is not None:
                await self.shared.stop()  # the batch at hand is graded and settled
            for task in (self._retention, self._sync):
                if task is not None:
                    await task
            await self.ingest.stop()  # completes open traces: they reach the engine first
            if self.pool is not None:
                await asyncio.to_thread(self.pool.close)
        finally:
            try:
                await self.state.policies.drain(timeout_s=DRAIN_TIMEOUT_S)
                await self.state.policies.close()  # the leader keeps its counts last
            finally:
                if self.shared is not None:
                    await self.shared.release()
                if self.exporter is not None:
                    await asyncio.to_thread(self.exporter.close)  # sends what is queued

    async def _lead(self, held: bool) -> None:
        """This replica took (or lost) the watch lease: its engine grades from now on,
        starting from the policies and counts the last holder kept."""
        engine = self.state.policies
        engine.leader = held
        if held:
            await engine.sync(self._check, counts=True)

    def _check(self, spec: Any) -> None:
        if self.policy_service is not None:
            self.policy_service.check_stored(spec)

    async def _sync_policies(self) -> None:
        engine = self.state.policies
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), SYNC_S)
            if self._stop.is_set():
                return
            try:
                await engine.sync(self._check, counts=not engine.leader)
            except Exception:  # the store away: next round
                log.exception("taking the policies kept in the store failed")

    async def _retain(self) -> None:
        cfg = self.state.config.traces
        if cfg.retention_s is None and not cfg.project_retention_s:
            return
        while not self._stop.is_set():
            try:
                deleted = await asyncio.to_thread(
                    self.state.trace_store.delete_expired,
                    time.time(),
                    cfg.retention_s,
                    cfg.project_retention_s,
                    score_key=result_key,  # the policies' scores of deleted traces go too
                )
                if deleted:
                    log.info("trace retention: deleted %d expired rows", deleted)
            except Exception:  # retention must not stop the server; it retries next round
                log.exception("trace retention failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), RETENTION_EVERY_S)
