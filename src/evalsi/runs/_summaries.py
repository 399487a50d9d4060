"""Reading stored metric summaries (the JSON of ``MetricSummary.to_dict``) back into objects."""

from __future__ import annotations

from collections.abc import Iterable
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
