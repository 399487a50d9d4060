"""Binning of a numerical feature by the reference's quantiles, and the two binned divergences.

The binning, stated once:

- edges are the reference's quantiles at levels 1/b, 2/b, …, (b-1)/b (``b`` = param ``bins``)
  by the inverted empirical CDF (``numpy.quantile(..., method="inverted_cdf")``: the smallest
  reference value whose cumulative share reaches the level), repeated edges dropped;
- bins are right-closed intervals between consecutive edges, the first open to −∞ and the last
  to +∞: ``(-inf, e1], (e1, e2], …, (ek, +inf)``, so current values outside the reference's
  range land in the end bins. Heavy ties merge bins, so there can be fewer than ``b``;
- when every edge equals the reference's maximum (a constant reference, or one value holding
  nearly all of it), those bins would put the whole reference in one bin; the bins become
  "below that value", "equal to it" and "above it".

A categorical feature's "bins" are its categories (the reference's, then new ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evalsi.packs.ml_monitoring._base import F64, Ints


@dataclass(frozen=True, slots=True)
class Bins:
    """The bins of one numerical feature and the reference's share in each."""

    edges: F64
    collapsed: bool
    reference: F64

    @property
    def size(self) -> int:
        return int(self.reference.size)

    def assign(self, x: F64) -> Ints:
        """The bin index of each value (values must not be NaN)."""
        if self.collapsed:
            top = self.edges[0]
            out: Ints = (x >= top).astype(np.intp) + (x > top)
            return out
        return np.searchsorted(self.edges, x, side="left").astype(np.intp)


def quantile_bins(reference: F64, bins: int) -> Bins:
    """Bins from a sorted, non-empty reference sample (see the module docstring)."""
    levels = np.arange(1, bins) / bins
    edges = np.unique(np.quantile(reference, levels, method="inverted_cdf"))
    top = reference[-1]
    collapsed = bool(edges[0] == top)
    if collapsed:
        edges = np.array([top], dtype=np.float64)
    size = 3 if collapsed else edges.size + 1
    shell = Bins(edges, collapsed, np.zeros(size))
    counts = np.bincount(shell.assign(reference), minlength=size).astype(np.float64)
    return Bins(edges, collapsed, counts / reference.size)


def psi(reference: F64, current: F64, epsilon: float) -> float:
    """Population stability index: sum of (c - r) * ln(c / r) over bins, natural log.

    Empty bins (share 0 on either side) take the share ``epsilon`` instead, without
    renormalising, so the logarithm stays finite.
    """
    r = np.where(reference == 0, epsilon, reference)
    c = np.where(current == 0, epsilon, current)
    return float(np.sum((c - r) * np.log(c / r)))


def js_distance(reference: F64, current: F64) -> float:
    """Jensen-Shannon distance in base 2 (0..1): ``scipy.spatial.distance.jensenshannon``."""
    from scipy.spatial.distance import jensenshannon

    with np.errstate(invalid="ignore"):  # sqrt of a rounding-error negative is 0, not NaN
        value = float(jensenshannon(reference, current, base=2.0))
    return 0.0 if math.isnan(value) else value
