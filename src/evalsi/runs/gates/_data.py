"""What a gate reads: a metric's fields as CEL sees them, when its data is too thin to judge,
its pass@k / pass^k, and what the caller holding the store answers beyond the metrics
(``GateData``: paired deltas, flaky cases)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.core import MetricSummary
from evalsi.runs._isolation import IsolationSummary
from evalsi.runs.gates._syntax import CI_FIELDS, MetricRef


@dataclass(frozen=True, slots=True)
class GateData:
    """What gates may read beyond the metric summaries, from whoever holds the run's store.

    ``delta(evaluator, metric, baseline)`` gives the paired comparison of this run against
    ``baseline`` as CEL sees it (``mean`` = the mean paired difference, ``n`` the pairs,
    ``ci.low``/``ci.high``) or why there is none; ``flaky_cases()`` the scenarios whose trials
    neither all passed nor all failed. A gate reading either without them is inconclusive.
    """

    delta: Callable[[str, str, str], tuple[dict[str, Any] | None, str]] | None = None
    flaky_cases: Callable[[], int] | None = None


def _fields(m: MetricSummary, isolation: IsolationSummary | None = None) -> dict[str, Any]:
    """A metric as CEL sees it; undefined values are left out, so reading one is a KeyError.

    ``isolation`` (the level's rank) is defined only when every scored result of the evaluator
    reported one: an unreported result may have run anywhere, so no level can be claimed.
    """
    out: dict[str, Any] = {
        "n": m.n,
        "scored": m.scored,
        "skipped": m.skipped,
        "errors": m.errors,
        "cancelled": m.cancelled,
        "infra_errors": m.infra_errors,
    }
    for key, value in (("mean", m.mean), ("std", m.std)):
        if value is not None and math.isfinite(value):
            out[key] = float(value)
    ci = {
        key: float(value)
        for key, value in (("low", m.ci.low), ("high", m.ci.high))
        if value is not None and math.isfinite(value)
    }
    out["ci"] = ci
    if isolation is not None and isolation.complete:
        out["isolation"] = isolation.rank
        out["enforced"] = isolation.enforcement == "full"
    return out


_HIGH: dict[str, Any] = {
    "mean": 0.9, "std": 0.1, "n": 100, "scored": 100, "skipped": 0, "errors": 0, "cancelled": 0,
    "infra_errors": 0, "ci": {"low": 0.85, "high": 0.95}, "pass": 0.95, "isolation": 4,
    "enforced": True,
}  # fmt: skip
_LOW: dict[str, Any] = {
    "mean": 0.1, "std": 0.3, "n": 3, "scored": 3, "skipped": 1, "errors": 1, "cancelled": 0,
    "infra_errors": 0, "ci": {"low": 0.0, "high": 0.4}, "pass": 0.05, "isolation": 0,
    "enforced": False,
}  # fmt: skip


def _ineligible(m: MetricSummary, min_completion: float, max_errors: float) -> str | None:
    total = m.scored + m.skipped + m.errors + m.cancelled + m.infra_errors
    if total and m.scored / total < min_completion:
        lost = [
            f"{count} {what}"
            for count, what in (
                (m.skipped, "skipped"),
                (m.errors, "errors"),
                (m.cancelled, "cancelled"),
                (m.infra_errors, "infra errors"),
            )
            if count
        ]
        return (
            f"completion {_pct(m.scored / total)} is below {_pct(min_completion)} "
            f"({m.scored} of {total} scored; {', '.join(lost)})"
        )
    attempted = m.scored + m.errors
    if attempted and m.errors / attempted > max_errors:
        return (
            f"evaluator error rate {_pct(m.errors / attempted)} is above {_pct(max_errors)} "
            f"({m.errors} of {attempted})"
        )
    if m.n == 0:
        return "no scored values (n=0)"
    return None


def _pass_k(
    m: MetricSummary, ref: MetricRef, k: int, hat: bool, undefined: list[str]
) -> float | None:
    table = m.pass_hat_k if hat else m.pass_at_k
    name = "passHatK" if hat else "passAtK"
    value = table.get(str(k))
    if value is None and k == 1 and m.kind == "passed" and m.mean is not None:
        value = m.mean  # one trial: pass@1 and pass^1 are the pass rate
    if value is not None and math.isfinite(value):
        return float(value)
    if m.kind != "passed":
        why = f"pass@k needs a pass/fail metric; {ref.label} is a {m.kind} metric"
    elif table:
        why = f"this run has it for k in {', '.join(sorted(table, key=int))}"
    else:
        why = f"it needs at least {k} trials per sample; this run has one"
    undefined.append(f"{ref.text}.{name}({k}) is undefined: {why}")
    return None


def _undefined_field(
    key: str,
    refs: Sequence[MetricRef],
    found: Sequence[MetricSummary],
    isolated: Mapping[str, IsolationSummary],
) -> str | None:
    for ref, m in zip(refs, found, strict=True):
        if key in ("isolation", "enforced"):
            iso = isolated.get(ref.evaluator)
            if iso is None:
                return (
                    f"{ref.text}.{key} is undefined: no score of {ref.evaluator} reported "
                    "sandbox isolation (it ran nothing in the sandbox, or did not say how)"
                )
            if not iso.complete:
                return (
                    f"{ref.text}.{key} is undefined: {iso.unreported} of "
                    f"{iso.sandboxed + iso.unreported} scored results of {ref.evaluator} "
                    f"reported no sandbox isolation (the others ran at {iso.describe()})"
                )
        if key in CI_FIELDS and (m.ci.low if key == "low" else m.ci.high) is None:
            return f"{ref.text}.ci.{key} is undefined (interval method: {m.ci.method})"
        if key in ("mean", "std") and getattr(m, key) is None:
            return f"{ref.text}.{key} is undefined ({m.kind} metric, n={m.n})"
    return None


def _pct(x: float) -> str:
    return f"{x * 100:.4g}%"


__all__ = ["GateData"]
