"""An online policy's scores sent to its sinks (``spec.sinks``) as traces are graded.

Grading never waits for a sink: ``offer`` puts a trace's scores in a bounded queue and returns;
one task per policy takes them out in batches (up to ``BATCH`` scores, or what came within
``LINGER_S``) and hands each batch to every sink in a worker thread (their SDKs block).
A batch a sink refuses is tried again with backoff, ``ATTEMPTS`` times in all; each sink
dedupes on ``TraceScore.score_id``, so a batch sent twice lands once. What cannot be delivered
(a sink down for minutes, a queue full because a sink lags) is counted in the policy's
``sink_failures`` and logged, never raised: the scores are safe in the store, and the policy's
watch run can be sent again with ``evalsi export``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from evalsi.core import ResultBatch, UserError
from evalsi.policies._live import Counts
from evalsi.sinks import TraceScore, result_rows
from evalsi.specs import SinkSpec

log = logging.getLogger("evalsi.policies.sinks")

BATCH = 500
"""Scores sent in one call to a sink."""
LINGER_S = 1.0
"""How long a batch waits for more scores before it is sent."""
MAX_QUEUED = 20_000
"""Scores waiting per policy; beyond, new scores are counted as failures, not queued."""
ATTEMPTS = 5
"""Tries of one batch on one sink before it is given up."""
BACKOFF_S = 1.0
"""The first wait between tries; doubled each time (with jitter), at most ``MAX_BACKOFF_S``."""
MAX_BACKOFF_S = 30.0


def score_id(run_id: str, trace_id: str, step: int, evaluator: str, metric: str) -> str:
    """The same score of the same trace always has this id (32 hex digits): an onFeedback
    step graded again replaces its score at the sink rather than adding one."""
    text = "\x1f".join((run_id, trace_id, str(step), evaluator, metric))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def open_sinks(specs: Sequence[SinkSpec], egress: Any = None) -> list[Any]:
    """Each ``spec.sinks[i]`` opened, its secret read now: a missing secret or library is a
    ``UserError`` naming the entry, so applying the policy fails rather than its deliveries.
    ``egress``: the server's policy, for where a webhook's host resolves."""
    from evalsi.connectors import resolve_secret
    from evalsi.sinks import open_trace_sink

    out: list[Any] = []
    try:
        for i, spec in enumerate(specs):
            try:
                secret = resolve_secret(spec.secret_ref).reveal() if spec.secret_ref else ""
                out.append(open_trace_sink(spec.kind, spec.options, secret=secret, egress=egress))
            except UserError as e:
                message = f"spec.sinks[{i}] ({spec.describe()}): {e.message}"
                raise UserError(message, hint=e.hint) from None
            except (ValueError, ImportError) as e:
                raise UserError(f"spec.sinks[{i}] ({spec.describe()}): {e}") from None
    except BaseException:
        for sink in out:
            with contextlib.suppress(Exception):
                sink.close()
        raise
    return out


class ScoreDelivery:
    """One policy's sinks and the queue feeding them (see the module's doc)."""

    def __init__(
        self,
        name: str,
        sinks: Sequence[Any],
        counts: Counts,
        *,
        sleep: Callable[[float], Any] = asyncio.sleep,
        linger_s: float = LINGER_S,
    ) -> None:
        self.name = name
        self.sinks = list(sinks)
        self.counts = counts
        self.sleep = sleep
        self.linger_s = linger_s
        self.queue: asyncio.Queue[Any] = asyncio.Queue(MAX_QUEUED)
        self.unsettled = 0  # (score, sink) deliveries neither sent nor given up yet
        self._task: asyncio.Task[None] | None = None

    def offer(
        self,
        *,
        project: str,
        run_id: str,
        trace_id: str,
        span_id: str,
        rows: Sequence[tuple[int, int, ResultBatch]],
    ) -> None:
        """Queue a graded trace's scores (``rows``: the engine's (step, _, batch) triples)."""
        now = time.time()
        for step, _, batch in rows:
            for result in batch:
                for row in result_rows(result):
                    score = TraceScore(
                        score_id=score_id(run_id, trace_id, step, row.evaluator, row.metric),
                        trace_id=trace_id,
                        span_id=span_id,
                        project=project,
                        policy=self.name,
                        run_id=run_id,
                        evaluator=row.evaluator,
                        metric=row.metric,
                        outcome=row.outcome,
                        value=row.value,
                        label=row.label,
                        explanation=row.explanation,
                        created_at=now,
                        passed=row.passed,
                    )
                    try:
                        self.queue.put_nowait(score)
                    except asyncio.QueueFull:
                        self.counts.sink_failures += len(self.sinks)
                    else:
                        self.unsettled += len(self.sinks)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"evalsi-sinks-{self.name}")

    async def _run(self) -> None:
        while True:
            batch = [await self.queue.get()]
            deadline = asyncio.get_running_loop().time() + self.linger_s
            while len(batch) < BATCH:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), left))
                except TimeoutError:
                    break
            try:
                await asyncio.gather(*(self._send(sink, batch) for sink in self.sinks))
            finally:
                for _ in batch:
                    self.queue.task_done()

    async def _send(self, sink: Any, batch: list[Any]) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                await asyncio.to_thread(sink.send, batch)
            except Exception as e:  # noqa: BLE001 - every sink failure is retried alike
                if attempt == ATTEMPTS:
                    self.unsettled -= len(batch)
                    self.counts.sink_failures += len(batch)
                    log.warning(
                        "policy %s: %s %s did not take %d scores after %d tries: %s",
                        self.name, sink.kind, sink.target, len(batch), ATTEMPTS, e,
                    )  # fmt: skip
                    return
                wait = min(MAX_BACKOFF_S, BACKOFF_S * 2 ** (attempt - 1))
                await self.sleep(wait * random.uniform(0.5, 1.0))
            else:
                self.unsettled -= len(batch)
                self.counts.sink_sent += len(batch)
                return

    async def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until what is queued has been delivered or given up (False: not within
        ``timeout_s``)."""
        try:
            await asyncio.wait_for(self.queue.join(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def close(self, timeout_s: float | None = None) -> None:
        """Deliver what is queued (for at most ``timeout_s``; the rest is counted as failed),
        then close the sinks."""
        if self._task is not None:
            if not await self.flush(timeout_s):
                log.warning(
                    "policy %s: %d score deliveries to its sinks not made",
                    self.name,
                    self.unsettled,
                )
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
            self.counts.sink_failures += self.unsettled  # queued, or cut off mid-send
            self.unsettled = 0
        for sink in self.sinks:
            try:
                await asyncio.to_thread(sink.close)
            except Exception:
                log.exception("policy %s: closing %s failed", self.name, sink.kind)


__all__ = ["ScoreDelivery", "open_sinks", "score_id"]
