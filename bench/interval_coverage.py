"""Coverage of every interval the CLI can print for a pass rate, by simulation.

Binary outcomes in G clusters of ``trials`` records each (a Run's samples and their trials),
correlated within a cluster by a common shock: each cluster draws its own rate from a beta
distribution with mean p and intra-cluster correlation ICC (beta-binomial), then its records
pass independently at that rate. For every cell (ICC, p, G, trials) 2000 data sets are drawn
and each method's 95% interval is checked: does it cover p, and is it ever zero-width?

- ``cluster-wilson`` (a Run with trials >= 2, ``--cluster-by``) runs on every cell.
- ``wilson`` and ``bootstrap-percentile`` / ``bootstrap-bca`` (``--bootstrap``) treat records
  as independent; the CLI prints them only when no cluster is declared, so they run on the
  cells whose records are independent: trials = 1 (every ICC gives the same data there) and
  ICC = 0 (n = G x trials independent records).

The intervals come from evalsi's own code: ``cluster_wilson_bounds`` (what
``cluster_wilson_from_sums`` computes) over all draws at once, and ``summarize`` for the
record-level methods, once per distinct (n, successes) since their interval depends on nothing
else. ``tests/unit/stats/test_stats_coverage.py`` checks every cell; this script prints the
table of ``docs/guides/statistics.md``:

    .venv/bin/python bench/interval_coverage.py
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import numpy as np

from evalsi.stats import cluster_wilson_bounds, summarize

ICCS = (0.0, 0.2, 0.5)
RATES = (0.0, 0.02, 0.5, 0.98, 1.0)
CLUSTERS = (5, 20, 100)
TRIALS = (1, 2, 3, 4, 5)
DRAWS = 2000
SEED = 20261216
LEVEL = 0.95
CLUSTERED = ("cluster-wilson",)
RECORD_LEVEL = ("wilson", "bootstrap-percentile", "bootstrap-bca")
METHODS = CLUSTERED + RECORD_LEVEL


@dataclass(frozen=True, slots=True)
class Cell:
    """One simulated design and what one method's intervals did on it."""

    method: str
    icc: float
    p: float
    clusters: int
    trials: int
    coverage: float
    zero_width: int  # draws whose interval had zero width (or no bounds at all)
    mean_width: float


def draw_sums(icc: float, p: float, clusters: int, trials: int, draws: int) -> np.ndarray:
    """Successes per cluster, shape (draws, clusters), from the beta-binomial common shock."""
    rng = np.random.default_rng([SEED, ICCS.index(icc), RATES.index(p), clusters, trials])
    if icc == 0.0 or p in (0.0, 1.0):
        rate = np.full((draws, clusters), p)
    else:
        # Beta(a, b) with a + b = (1 - ICC) / ICC has mean p and ICC as its within-cluster
        # correlation for Bernoulli draws at the drawn rate.
        scale = (1.0 - icc) / icc
        rate = rng.beta(p * scale, (1.0 - p) * scale, size=(draws, clusters))
    return rng.binomial(trials, rate)


@cache
def _record_level(method: str, n: int, successes: int) -> tuple[float, float]:
    values = [1] * successes + [0] * (n - successes)
    bootstrap = None if method == "wilson" else method.removeprefix("bootstrap-")
    found = summarize(values, kind="passed", bootstrap=bootstrap, level=LEVEL).interval  # type: ignore[arg-type]
    if found.method != method:
        raise AssertionError(f"summarize gave {found.method}, expected {method}")
    return (
        float("nan") if found.low is None else found.low,
        float("nan") if found.high is None else found.high,
    )


def _cell(method: str, icc: float, p: float, g: int, m: int, sums: np.ndarray) -> Cell:
    if method == "cluster-wilson":
        sizes = np.full(sums.shape, m)
        low, high = cluster_wilson_bounds(sizes, sums, LEVEL)
    else:
        n = g * m
        pairs = [_record_level(method, n, int(s)) for s in sums.sum(axis=1)]
        low, high = (np.array(v) for v in zip(*pairs, strict=True))
    width = high - low
    covered = (low <= p) & (p <= high)  # NaN bounds never cover
    return Cell(
        method,
        icc,
        p,
        g,
        m,
        coverage=float(np.mean(covered)),
        zero_width=int(np.count_nonzero(~(width > 0.0))),
        mean_width=float(np.nanmean(width)) if np.any(np.isfinite(width)) else float("nan"),
    )


def simulate(methods: tuple[str, ...] = METHODS, draws: int = DRAWS) -> Iterator[Cell]:
    """Every (method, cell) the CLI can print, in grid order."""
    for icc, p, g, m in itertools.product(ICCS, RATES, CLUSTERS, TRIALS):
        sums = draw_sums(icc, p, g, m, draws)
        for method in methods:
            independent = m == 1 or icc == 0.0
            if method in RECORD_LEVEL and not independent:
                continue
            yield _cell(method, icc, p, g, m, sums)


def markdown(cells: list[Cell]) -> str:
    """Per method: the lowest coverage over trials 1-5 for each (ICC, p) and cluster count."""
    out: list[str] = []
    for method in METHODS:
        mine = [c for c in cells if c.method == method]
        if not mine:
            continue
        zero = sum(c.zero_width for c in mine)
        out.append(f"**{method}** ({len(mine)} cells, {zero} zero-width intervals)\n")
        out.append("| ICC | p | " + " | ".join(f"G = {g}" for g in CLUSTERS) + " |")
        out.append("|---|---|" + "---|" * len(CLUSTERS))
        for icc, p in itertools.product(ICCS, RATES):
            row = []
            for g in CLUSTERS:
                found = [c for c in mine if (c.icc, c.p, c.clusters) == (icc, p, g)]
                row.append(f"{min(c.coverage for c in found):.3f}" if found else "–")
            if any(v != "–" for v in row):
                out.append(f"| {icc:g} | {p:g} | " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    cells = list(simulate())
    print(markdown(cells))
    worst = min(cells, key=lambda c: c.coverage)
    print(
        f"lowest coverage {worst.coverage:.3f} ({worst.method}, ICC {worst.icc:g}, "
        f"p {worst.p:g}, G {worst.clusters}, trials {worst.trials}); "
        f"zero-width intervals: {sum(c.zero_width for c in cells)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
