"""Which traces a policy grades: a rate decided by the trace id, and latency percentiles.

The rate decision is a pure function of the trace id (``sample_point(id) < rate``), so every
replica, every re-delivery and every re-evaluation of a trace decides the same way, and two
policies at rates 0.05 and 0.10 grade nested sets of traces. The id is hashed (SHA-256) rather
than read as a number because OTLP ids are only required to be unique, not uniformly random.

``latency > p99`` compares a trace's duration with a running estimate of that percentile of the
policy's traces. The estimate is the P² algorithm (Jain and Chlamtac, "The P² algorithm for
dynamic calculation of quantiles and histograms without storing observations", CACM 1985):
five markers adjusted by piecewise-parabolic interpolation, so memory is constant however many
traces pass.
"""

from __future__ import annotations

import hashlib
import math

_SCALE = float(1 << 64)


def _digest(trace_id: str) -> bytes:
    return hashlib.sha256(trace_id.strip().lower().encode("utf-8")).digest()


def sample_point(trace_id: str) -> float:
    """A number in [0, 1) fixed by the trace id; the trace is sampled at rate r iff it is < r.

    Example:
        >>> sample_point("4bf92f3577b34da6a3ce929d0e0e4736") == sample_point(
        ...     "4BF92F3577B34DA6A3CE929D0E0E4736")
        True
    """
    return int.from_bytes(_digest(trace_id)[:8], "big") / _SCALE


def sampled(trace_id: str, rate: float) -> bool:
    """Whether a trace is in the sample at ``rate`` (0 never, 1 always)."""
    if rate >= 1.0:
        return True
    return rate > 0.0 and sample_point(trace_id) < rate


def result_key(trace_id: str) -> tuple[int, int]:
    """Where a trace's results are stored in its policy's run: ``(seq, trial)``.

    The store's task key is (run, seq, trial, evaluator); a watch run has no dataset positions
    or trials, so the two 31-bit columns together hold 62 bits of the trace id's hash (both fit
    a PostgreSQL ``integer``). Grading a trace again upserts the same rows (idempotent); two
    traces share a key with probability about n² / 2⁶³.
    """
    bits = int.from_bytes(_digest(trace_id)[8:16], "big")
    return bits & 0x7FFF_FFFF, (bits >> 31) & 0x7FFF_FFFF


class P2Quantile:
    """A streaming estimate of one quantile ``p`` (0 < p < 1) in constant memory (P²).

    Exact (the sorted sample's interpolated quantile, as ``numpy.quantile``) for the first
    five observations, then the five-marker estimate.

    Example:
        >>> q = P2Quantile(0.5)
        >>> for x in range(1, 1002):
        ...     q.add(float(x))
        >>> round(q.value())
        501
    """

    __slots__ = ("_desired", "_heights", "_increments", "_positions", "count", "p")

    def __init__(self, p: float) -> None:
        if not 0.0 < p < 1.0:
            raise ValueError(f"quantile must be between 0 and 1 (exclusive), got {p}")
        self.p = p
        self.count = 0
        self._heights: list[float] = []
        self._positions = [1.0, 2.0, 3.0, 4.0, 5.0]
        self._desired = [1.0, 1.0 + 2 * p, 1.0 + 4 * p, 3.0 + 2 * p, 5.0]
        self._increments = [0.0, p / 2, p, (1.0 + p) / 2, 1.0]

    def add(self, x: float) -> None:
        if not math.isfinite(x):
            return
        self.count += 1
        h = self._heights
        if len(h) < 5:
            h.append(x)
            h.sort()
            return
        n = self._positions
        if x < h[0]:
            h[0] = x
            k = 0
        elif x >= h[4]:
            h[4] = max(h[4], x)
            k = 3
        else:
            k = next(i for i in range(4) if h[i] <= x < h[i + 1])
        for i in range(k + 1, 5):
            n[i] += 1.0
        for i in range(5):
            self._desired[i] += self._increments[i]
        for i in (1, 2, 3):
            d = self._desired[i] - n[i]
            if (d >= 1.0 and n[i + 1] - n[i] > 1.0) or (d <= -1.0 and n[i - 1] - n[i] < -1.0):
                step = 1.0 if d > 0 else -1.0
                candidate = self._parabolic(i, step)
                if not h[i - 1] < candidate < h[i + 1]:
                    candidate = self._linear(i, step)
                h[i] = candidate
                n[i] += step

    def _parabolic(self, i: int, d: float) -> float:
        h, n = self._heights, self._positions
        return h[i] + d / (n[i + 1] - n[i - 1]) * (
            (n[i] - n[i - 1] + d) * (h[i + 1] - h[i]) / (n[i + 1] - n[i])
            + (n[i + 1] - n[i] - d) * (h[i] - h[i - 1]) / (n[i] - n[i - 1])
        )

    def _linear(self, i: int, d: float) -> float:
        h, n = self._heights, self._positions
        j = i + int(d)
        return h[i] + d * (h[j] - h[i]) / (n[j] - n[i])

    def value(self) -> float | None:
        """The current estimate; None before the first observation."""
        h = self._heights
        if not h:
            return None
        if self.count <= 5:
            pos = self.p * (len(h) - 1)
            lo = math.floor(pos)
            hi = min(lo + 1, len(h) - 1)
            return h[lo] + (h[hi] - h[lo]) * (pos - lo)
        return h[2]
