"""Store calls that wait out an unreachable store (PostgreSQL restarting, a connection killed)
instead of failing the work: both the run's owner and its workers go through here."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from evalsi.store import SqlStore, unavailable

log = logging.getLogger("evalsi.cluster")

T = TypeVar("T")
RETRY_S = 1.0


async def call_store(store: SqlStore, call: Callable[..., T], *args: Any, who: str = "") -> T:
    """``call(*args)`` off the loop; while the store is unreachable, wait for it and call
    again (a refused write still raises)."""
    while True:
        try:
            return await asyncio.to_thread(call, *args)
        except Exception as e:
            if not unavailable(e):
                raise
            log.warning("%s: store unavailable (%s); pausing", who or "evalsi", e)
            await wait_for_store(store, who)


async def wait_for_store(store: SqlStore, who: str = "") -> float:
    """Return once the store answers again; the seconds waited."""
    began = time.monotonic()
    while True:
        await asyncio.sleep(RETRY_S)
        try:
            await asyncio.to_thread(store.ping)
        except Exception:  # noqa: BLE001 - still away
            continue
        log.info("%s: the store is back; resuming", who or "evalsi")
        return time.monotonic() - began


__all__ = ["call_store", "wait_for_store"]
