"""The Watch way in on a server: one trace store, the ingest pipeline the OTLP endpoints feed,
the online policy engine it hands completed traces to, and retention.

``attach`` builds them onto ``ServerState`` (so the Trace and Policy services, the OTLP
endpoints and the metrics share them); ``Watch.start``/``stop`` run in the app's lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from typing import Any

from evalsi.server._policies import default_engine
from evalsi.server._state import ServerState
from evalsi.store import TraceStore
from evalsi.traces import Ingest, Redactor

log = logging.getLogger("evalsi.server")

RETENTION_EVERY_S = 300.0
# Ingest allocates a dict or list per attribute of every span, and the open traces keep many
# of them alive: under CPython's default thresholds (700, 10, 10) the collector ran so often,
# over so many live objects, that it took a third of the loop's time at 20k spans/s (measured
# with the OTLP ingest bench). Fewer, larger young collections; the old generation rarely.
GC_THRESHOLDS = (20_000, 50, 100)


class Watch:
    """Owns the ingest pipeline's and the retention loop's life cycle."""

    def __init__(self, state: ServerState) -> None:
        cfg = state.config.traces
        self.state = state
        if state.trace_store is None:
            state.trace_store = TraceStore(state.store)
        if state.policies is None:
            state.policies = default_engine(state)
        engine = state.policies
        self.ingest = Ingest(
            state.trace_store,
            redactor=Redactor(cfg.redaction),
            grace_s=cfg.grace_s,
            max_open=cfg.max_open_traces,
            on_trace=engine.submit,
            on_feedback=engine.on_feedback,
        )
        state.ingest = self.ingest
        # The PolicyService handler (``_policies.PolicyHandler``), set by default_services:
        # starting it re-applies the policies kept in the store, once.
        self.policy_service: Any = None
        self._retention: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start(self) -> None:
        # What the server built at start-up lives as long as it does: out of the collector's
        # sight, so full collections only walk what ingest keeps.
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        await self.ingest.start()
        if self.policy_service is not None:
            await self.policy_service.start()
        self._stop = asyncio.Event()
        self._retention = asyncio.create_task(self._retain(), name="evalsi-trace-retention")

    async def stop(self) -> None:
        self._stop.set()
        if self._retention is not None:
            await self._retention
        await self.ingest.stop()  # completes open traces: they reach the engine first
        await self.state.policies.drain()
        await self.state.policies.close()

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
                )
                if deleted:
                    log.info("trace retention: deleted %d expired rows", deleted)
            except Exception:  # retention must not stop the server; it retries next round
                log.exception("trace retention failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), RETENTION_EVERY_S)
