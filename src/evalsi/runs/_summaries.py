"""Metric summaries as JSON (``MetricSummary.to_dict``, with a Run's pass@k sample counts) and
read back into objects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalsi.core import Interval, MetricSummary


def summary_from_dict(d: dict[str, Any]) -> MetricSummary:
    low, high = (d.get("ci") or [None, None])[:2]
    return MetricSummary(
        evaluator=d["evaluator"],
        metric=d["metric"],
        kind=d.get("kind", "number"),
        n=d.get("n", 0),
        mean=d.get("mean"),
        std=d.get("std"),
        ci=Interval(low, high, d.get("ci_method", "none")),
        scored=d.get("scored", 0),
        skipped=d.get("skipped", 0),
        errors=d.get("errors", 0),
        cancelled=d.get("cancelled", 0),
        infra_errors=d.get("infra_errors", 0),
        labels=dict(d.get("labels") or {}),
        clusters=d.get("clusters"),
        pass_at_k=dict(d.get("pass_at_k") or {}),
        pass_hat_k=dict(d.get("pass_hat_k") or {}),
        trial_variance=d.get("trial_variance"),
        higher_is_better=d.get("higher_is_better"),
    )


def summaries_from_dicts(items: Iterable[dict[str, Any]]) -> list[MetricSummary]:
    return [summary_from_dict(d) for d in items]


def metric_dicts(
    metrics: Iterable[MetricSummary], pass_k_samples: Mapping[str, Mapping[str, int]]
) -> list[dict[str, Any]]:
    """The metrics as ``--format json`` prints them: with trials, a pass/fail metric's
    pass@k also says over how many samples (``pass_k_samples``) and how many were left out
    for lacking a scored trial (``pass_k_excluded``). ``pass_k_samples`` is keyed by
    ``evaluator/metric``."""
    out = [m.to_dict() for m in metrics]
    for m in out:
        extra = pass_k_samples.get(f"{m['evaluator']}/{m['metric']}")
        if extra is not None and "pass_at_k" in m:
            m["pass_k_samples"] = extra["samples"]
            m["pass_k_excluded"] = extra["excluded"]
    return out
