"""Prometheus ``/metrics``: requests and latencies per RPC and protocol, runs and tasks by
state, judge cache hits; with ``cluster:``, its pools and workers (``_cluster_metrics``).

The registry is the app's own (two apps in one process, as in tests, never share counters).
RPC protocols are counted by ``RpcMetricsInterceptor`` (a connectrpc metadata interceptor, so
it also sees requests whose body fails to parse); REST routes call ``Metrics.observe``.
Gauges are read when scraped: runs by state from the store (one GROUP BY, so a scrape stays
cheap however many runs it holds), tasks and judge cache hits from the run scheduler when there
is one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from connectrpc.errors import ConnectError
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from evalsi.server._state import ServerState

log = logging.getLogger("evalsi.server")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Loopback RPCs take ~1 ms; judge-backed Evaluate calls take seconds.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """The app's metrics and the registry ``/metrics`` renders."""

    def __init__(self, state: ServerState) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "evalsi_requests",
            "API requests answered, by service, method, protocol and result code.",
            ("service", "method", "protocol", "code"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "evalsi_request_duration_seconds",
            "Time to answer an API request (a stream: until it ends).",
            ("service", "method", "protocol"),
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_StateCollector(state))
        if getattr(state, "policies", None) is not None:  # online policies: counters, means
            from evalsi.server._policy_metrics import PolicyCollector

            self.registry.register(PolicyCollector(state.policies))
        if getattr(state, "ingest", None) is not None:  # trace ingest: counts, open traces
            from evalsi.server._ingest_metrics import IngestCollector

            self.registry.register(IngestCollector(state.ingest))
        self.cluster: Any = None  # the cluster's pools and workers, read in the background
        cluster = getattr(getattr(state, "config", None), "cluster", None)  # (a bare test state)
        if cluster is not None:
            from evalsi.server._cluster_metrics import ClusterCollector, ClusterGauges

            self.cluster = ClusterGauges(cluster, state.store)
            self.registry.register(ClusterCollector(self.cluster))
        self.interceptor = RpcMetricsInterceptor(self)

    def observe(self, service: str, method: str, protocol: str, code: str, seconds: float) -> None:
        self.requests.labels(service, method, protocol, code).inc()
        self.latency.labels(service, method, protocol).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def protocol_of(content_type: str) -> str:
    """``grpc``, ``grpc_web`` or ``connect``, from the request's content type."""
    if content_type.startswith("application/grpc-web"):
        return "grpc_web"
    if content_type.startswith("application/grpc"):
        return "grpc"
    return "connect"


def code_of(error: Exception | None) -> str:
    if error is None:
        return "ok"
    return error.code.value if isinstance(error, ConnectError) else "unknown"


class RpcMetricsInterceptor:
    """Counts and times every RPC; first in the chain so it runs before the body is read."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    async def on_start(self, ctx: Any) -> float:
        return time.perf_counter()

    async def on_end(self, token: float, ctx: Any, error: Exception | None, /) -> None:
        method = ctx.method
        protocol = protocol_of(ctx.request_headers.get("content-type", ""))
        self._metrics.observe(
            method.service_name, method.name, protocol, code_of(error), time.perf_counter() - token
        )


class _StateCollector(Collector):
    """Runs and tasks by state and judge cache hits, read at scrape time."""

    def __init__(self, state: ServerState) -> None:
        self._state = state

    def describe(self) -> list[Metric]:
        # Declared up front so registering does not call collect() (which reads the store).
        return [
            GaugeMetricFamily("evalsi_runs", "Runs by state."),
            GaugeMetricFamily("evalsi_tasks", "Run tasks by state."),
            CounterMetricFamily("evalsi_judge_cache_hits", "Judge calls answered by the cache."),
        ]

    def collect(self) -> Iterator[Metric]:
        try:
            stats = self._stats()
        except Exception:  # a scrape must not fail because the store or scheduler does
            log.exception("cannot read run statistics for /metrics")
            stats = {}
        for key, text in (("runs", "Runs by state."), ("tasks", "Run tasks by state.")):
            family = GaugeMetricFamily(f"evalsi_{key}", text, labels=("state",))
            for state, n in sorted(dict(stats.get(key, {})).items()):
                family.add_metric((str(state),), float(n))
            yield family
        yield CounterMetricFamily(
            "evalsi_judge_cache_hits",
            "Judge calls answered by the cache.",
            value=float(stats.get("judge_cache_hits", 0)),
        )

    def _stats(self) -> dict[str, Any]:
        scheduler = self._state.runs
        stats = dict(scheduler.stats()) if scheduler is not None else {}
        stats["runs"] = self._state.store.count_runs_by_status()
        return stats
