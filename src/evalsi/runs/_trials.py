"""Trial statistics: pass@k, pass^k and the across-trial variance from per-sample trial values.

Pure and streaming: feed one sample's scored trial values at a time (``TrialStats.add``), read
the estimates at the end. pass@k' and pass^k' are the unbiased estimators of
``evalsi.stats`` with n = the run's trials k, averaged over samples; a sample with fewer than
k scored trials (infra errors, skips, evaluator errors) would bias them, so it is left out and
counted in ``excluded``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evalsi.stats import pass_at_k, pass_hat_k


@dataclass(slots=True)
class TrialStats:
    """Running pass@k / pass^k sums and the mean of per-sample trial variances of one metric.

    Example:
        >>> t = TrialStats(trials=2)
        >>> t.add([1.0, 0.0]); t.add([1.0, 1.0])
        >>> t.pass_at_k()["2"], t.pass_hat_k()["2"]
        (1.0, 0.5)
    """

    trials: int
    samples: int = 0
    excluded: int = 0
    _at: list[float] = field(default_factory=list)
    _hat: list[float] = field(default_factory=list)
    _var_sum: float = 0.0
    _var_n: int = 0
    binary: bool = True
    _rows: dict[int, list[tuple[float, float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._at = [0.0] * self.trials
        self._hat = [0.0] * self.trials

    def add(self, values: list[float]) -> None:
        """One sample's scored values, one per trial (1.0/0.0 for pass/fail)."""
        if len(values) >= 2:
            mean = sum(values) / len(values)
            self._var_sum += sum((v - mean) ** 2 for v in values) / (len(values) - 1)
            self._var_n += 1
        if any(v not in (0.0, 1.0) for v in values):
            self.binary = False
        if len(values) < self.trials:
            self.excluded += 1
            return
        n = self.trials
        c = int(sum(1 for v in values[:n] if v >= 0.5))
        self.samples += 1
        row = self._rows.get(c)
        if row is None:  # the estimates depend on c alone (n is the run's): n + 1 rows at most
            row = [(pass_at_k(n, c, k), pass_hat_k(n, c, k)) for k in range(1, n + 1)]
            self._rows[c] = row
        for k, (at, hat) in enumerate(row):
            self._at[k] += at
            self._hat[k] += hat

    def pass_at_k(self) -> dict[str, float]:
        """pass@k' for k' in 1..trials, keyed by k' as a string; empty when no sample counts."""
        if not self.samples or not self.binary:
            return {}
        return {str(k): s / self.samples for k, s in enumerate(self._at, 1)}

    def pass_hat_k(self) -> dict[str, float]:
        """pass^k' for k' in 1..trials, keyed by k' as a string; empty when no sample counts."""
        if not self.samples or not self.binary:
            return {}
        return {str(k): s / self.samples for k, s in enumerate(self._hat, 1)}

    @property
    def trial_variance(self) -> float | None:
        """Mean over samples (with 2+ scored trials) of the sample variance across trials."""
        return self._var_sum / self._var_n if self._var_n else None
