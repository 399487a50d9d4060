"""A policy's dataset-scope evaluators: corpus metrics over the traces of its window.

A cascade step whose evaluator is dataset-scope (corpus BLEU, ROC-AUC, drift…) grades no single
trace: each sampled trace whose ``when`` holds joins the step's corpus, and the metric is that
corpus reduced, with its bootstrap interval, by the same code an offline run uses
(``runs.dataset_scope_of_outputs``). Records leave with the window (by time), and the corpus is
bounded in records and bytes (the oldest go first, counted in ``dropped``).

Reducing is O(n), so it is not done per trace: the engine refreshes a changed corpus off the
event loop about every second, less often when a reduce takes long (at most a third of the time
goes to reducing), and when grading drains. Between refreshes the window shows the last result.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from evalsi.core import MetricSummary, Record
from evalsi.datasets import record_to_row
from evalsi.evaluators import BoundEvaluator, DatasetRunner
from evalsi.runs import dataset_scope_of_outputs

DEFAULT_MAX_RECORDS = 10_000
"""Records one step's corpus holds at most (the window's oldest go first)."""
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Bytes of record content one step's corpus holds at most (JSON size, an estimate)."""
MIN_REFRESH_S = 1.0
"""A changed corpus is reduced again at most this often (and at most a third of the time)."""
SEED = 0
"""Bootstrap seed of window intervals: the same corpus gives the same interval."""


@dataclass(slots=True)
class _Held:
    at: float
    record: Record
    size: int


class StepCorpus:
    """The records one dataset-scope step has seen within the window."""

    def __init__(
        self,
        bound: BoundEvaluator,
        seconds: float,
        *,
        clock: Callable[[], float],
        max_records: int = DEFAULT_MAX_RECORDS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.bound = bound
        self.name = bound.name
        self.seconds = seconds
        self.clock = clock
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.dropped = 0
        self.bytes = 0
        self.changed = False
        self.summaries: list[MetricSummary] = []
        self.refreshed_at: float | None = None
        self.reduce_s = 0.0
        self._held: deque[_Held] = deque()

    def add(self, record: Record) -> None:
        size = len(orjson.dumps(record_to_row(record), default=str))
        self._held.append(_Held(self.clock(), record, size))
        self.bytes += size
        while len(self._held) > self.max_records or self.bytes > self.max_bytes:
            self.bytes -= self._held.popleft().size
            self.dropped += 1
        self.changed = True

    def prune(self) -> None:
        horizon = self.clock() - self.seconds
        while self._held and self._held[0].at < horizon:
            self.bytes -= self._held.popleft().size
            self.changed = True

    def due(self, *, force: bool = False) -> bool:
        """Whether a refresh would change what the window shows, and may run now."""
        self.prune()
        if not self.changed:
            return False
        if force or self.refreshed_at is None:
            return True
        pause = max(MIN_REFRESH_S, 2 * self.reduce_s)
        return self.clock() - self.refreshed_at >= pause

    def snapshot(self) -> list[Record]:
        """The records to reduce; taken on the event loop, reduced elsewhere."""
        self.changed = False
        self.refreshed_at = self.clock()
        return [h.record for h in self._held]

    def reduce(self, records: Sequence[Record]) -> list[MetricSummary]:
        """The corpus metric and its interval (thread-safe: a fresh runner per call)."""
        if not records:
            return []
        started = time.perf_counter()
        summaries, _ = dataset_scope_of_outputs(
            [DatasetRunner(self.bound)], [self.bound], records, trials=1, seed=SEED
        )
        self.reduce_s = time.perf_counter() - started
        return summaries
