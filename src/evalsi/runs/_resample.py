"""Bootstrap intervals for dataset-scope metrics: resample the mapped values, reduce again."""

from __future__ import annotations

import random
from typing import Literal

from evalsi.core import Interval
from evalsi.evaluators import DatasetRunner

RESAMPLES = 1000


def dataset_bootstrap(
    runner: DatasetRunner,
    *,
    bootstrap: Literal["percentile", "bca"],
    seed: int,
    level: float = 0.95,
) -> dict[str, Interval]:
    """Percentile intervals per metric from ``RESAMPLES`` re-reductions.

    A corpus metric has no closed-form interval, so each resample re-runs ``reduce``. BCa would
    need a jackknife of n more reductions, so dataset scope always uses the percentile method
    and says so in the interval's method.
    """
    del bootstrap  # percentile only, see above
    rng = random.Random(seed)
    values = runner.values
    n = len(values)
    draws: dict[str, list[float]] = {}
    for _ in range(RESAMPLES):
        sample = [values[rng.randrange(n)] for _ in range(n)]
        scores = runner.reduce(sample)
        if isinstance(scores, str):
            continue  # a resample the metric cannot reduce (e.g. one class only) is dropped
        for score in scores:
            value = score.number if score.number is not None else score.passed
            if value is not None:
                draws.setdefault(score.name, []).append(float(value))
    out = {}
    alpha = (1 - level) / 2
    for name, got in draws.items():
        got.sort()
        lo = got[int(alpha * (len(got) - 1))]
        hi = got[round((1 - alpha) * (len(got) - 1))]
        out[name] = Interval(lo, hi, "bootstrap-percentile", level)
    return out
