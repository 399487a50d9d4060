"""Prometheus metrics of the online policies, read from the engine at scrape time.

Per policy (labels ``project``, ``policy``): traces selected, sampled, evaluated, skipped (by
``reason``), errors, alerts fired and failed, traces promoted (counters since the policy was
applied in this process), and per (``evaluator``, ``metric``) the window's mean and n (gauges).
Register it on the app's registry: ``registry.register(PolicyCollector(engine))``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from evalsi.policies import PolicyEngine

log = logging.getLogger("evalsi.server")

_COUNTERS = (
    ("selected", "Traces an online policy's selector matched."),
    ("sampled", "Selected traces an online policy chose to grade."),
    ("evaluated", "Traces an online policy graded."),
    ("errors", "Failures while an online policy graded (evaluator errors, store writes)."),
    ("alerts_fired", "Alerts an online policy fired."),
    ("alert_failures", "Alert deliveries that failed after retries."),
    ("promoted", "Traces an online policy promoted to a dataset."),
    ("forced_by_feedback", "Traces an online policy graded late, on negative feedback."),
    ("sink_sent", "Scores an online policy delivered to its sinks (per score and sink)."),
    ("sink_failures", "Scores an online policy's sinks did not take after retries."),
)


class PolicyCollector(Collector):
    """The engine's per-policy counts and window aggregates as Prometheus families."""

    def __init__(self, engine: PolicyEngine) -> None:
        self._engine = engine

    def describe(self) -> list[Metric]:
        # Declared up front so registering does not call collect().
        counters, skipped, mean, n = self._families()
        overloaded = CounterMetricFamily("evalsi_policy_overloaded", "Traces not graded.")
        return [*counters.values(), skipped, mean, n, overloaded]

    def _families(
        self,
    ) -> tuple[
        dict[str, CounterMetricFamily], CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily
    ]:
        labels = ("project", "policy")
        counters = {
            name: CounterMetricFamily(f"evalsi_policy_{name}", text, labels=labels)
            for name, text in _COUNTERS
        }
        skipped = CounterMetricFamily(
            "evalsi_policy_skipped",
            "Traces an online policy passed over, by reason.",
            labels=(*labels, "reason"),
        )
        mean = GaugeMetricFamily(
            "evalsi_policy_window_mean",
            "Mean of a metric over an online policy's window.",
            labels=(*labels, "evaluator", "metric"),
        )
        n = GaugeMetricFamily(
            "evalsi_policy_window_n",
            "Scored values of a metric in an online policy's window.",
            labels=(*labels, "evaluator", "metric"),
        )
        return counters, skipped, mean, n

    def collect(self) -> Iterator[Metric]:
        counters, skipped, mean, n = self._families()
        try:
            for applied in self._engine.policies():
                spec = applied.spec
                stats = self._engine.stats(spec.name, spec.project)
                key = (spec.project, spec.name)
                for name, family in counters.items():
                    family.add_metric(key, float(getattr(stats, name)))
                for reason, count in sorted(stats.skipped.items()):
                    skipped.add_metric((*key, reason), float(count))
                for m in stats.window:
                    n.add_metric((*key, m.evaluator, m.metric), float(m.n))
                    if m.mean is not None:
                        mean.add_metric((*key, m.evaluator, m.metric), float(m.mean))
        except Exception:  # a scrape must not fail because a policy's stats do
            log.exception("cannot read policy statistics for /metrics")
        yield from counters.values()
        yield from (skipped, mean, n)
        yield CounterMetricFamily(
            "evalsi_policy_overloaded",
            "Traces not graded because the policy engine's queue was full.",
            value=float(self._engine.dropped),
        )
