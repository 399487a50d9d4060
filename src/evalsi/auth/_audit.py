"""The audit log: every denial, every change to keys, bindings and projects, every run start.

Events are queued in memory and written in batches by one thread (a flood of denied requests
costs one insert per batch, not one per request); past ``MAX_PENDING`` queued events, further
ones are counted and recorded as a single ``audit.dropped`` event, so memory stays bounded.
An event names the principal (``provider/subject``), never a credential.

The same thread applies ``auth.auditRetention``: ``expire`` deletes what is older, when the
thread starts and then at most once every ``EXPIRE_EVERY_S`` (one indexed delete an hour costs
nothing beside the inserts; the table never holds much more than the retention asks).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("evalsi.auth")

MAX_PENDING = 10_000
FLUSH_INTERVAL_S = 0.5
EXPIRE_EVERY_S = 3600.0


@dataclass(frozen=True, slots=True)
class AuditEvent:
    principal: str
    action: str
    project: str
    resource: str  # what was acted on: "run 2026...", "key key_ab12", "/v1alpha1/runs"
    decision: str  # allow | deny
    decided_by: str  # the rule, role or default behind the decision
    request_id: str = ""
    source: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)

    def row(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "principal": self.principal[:512],
            "action": self.action[:64],
            "project_id": self.project[:64],
            "resource": self.resource[:2048],
            "decision": self.decision,
            "decided_by": self.decided_by[:2048],
            "request_id": self.request_id[:64],
            "source": self.source[:128],
            "detail": dict(self.detail),
        }


class AuditLog:
    """Queues events and writes them with ``write(rows)`` from a thread of its own, which
    also calls ``expire()`` (retention: deletes old events, returns how many) now and then."""

    def __init__(
        self,
        write: Callable[[Sequence[Mapping[str, Any]]], None],
        *,
        expire: Callable[[], int] | None = None,
        expire_every_s: float = EXPIRE_EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self._expire = expire
        self._expire_every_s = expire_every_s
        self._monotonic = monotonic
        self._next_expiry: float | None = None  # None: at the thread's first round
        self._pending: list[AuditEvent] = []
        self._dropped = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    def record(self, event: AuditEvent) -> None:
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                self._dropped += 1
                return
            self._pending.append(event)
        if self._thread is None:
            self.start()

    def start(self) -> None:
        """Start the writing thread (else the first event does): retention begins now."""
        with self._lock:
            if self._thread is None and not self._stop:
                self._thread = threading.Thread(target=self._loop, name="evalsi-audit", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            self.expire_due()
            self._wake.wait(FLUSH_INTERVAL_S)
            self._wake.clear()
            self.flush()

    def expire_due(self) -> int:
        """Apply retention if it is time (the first call, then once per ``expire_every_s``);
        how many events went. A failure is logged and retried at the next interval."""
        now = self._monotonic()
        if self._expire is None or (self._next_expiry is not None and now < self._next_expiry):
            return 0
        self._next_expiry = now + self._expire_every_s
        try:
            deleted = self._expire()
        except Exception:
            log.exception("audit retention: could not delete expired events")
            return 0
        if deleted:
            log.info("audit retention: deleted %d expired events", deleted)
        return deleted

    def flush(self) -> None:
        """Write what is queued now (also called on shutdown and before audit reads)."""
        with self._lock:
            batch, self._pending = self._pending, []
            dropped, self._dropped = self._dropped, 0
        rows = [e.row() for e in batch]
        if dropped:
            rows.append(
                AuditEvent(
                    "", "audit.dropped", "", "", "deny", "queue full", detail={"dropped": dropped}
                ).row()
            )
        if not rows:
            return
        try:
            self._write(rows)
        except Exception:
            log.exception("could not write %d audit events", len(rows))

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()
