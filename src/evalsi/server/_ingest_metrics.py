"""Prometheus metrics of trace ingest, read from ``Ingest`` at scrape time.

Counters since the server started: export requests taken, spans stored, late spans, traces
completed, requests refused under load, feedback signals, traces recovered at start, span
events received as OTLP log records, completed traces handed to the policies from memory or
read back. Gauges: traces being assembled and the spans held for them (against
``traces.maxOpenTraces`` / ``maxOpenSpans``), bytes of span rows held to grade from memory.
Register it on the app's registry: ``registry.register(IngestCollector(ingest))``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from evalsi.traces import Ingest

_COUNTERS = (
    ("requests", "OTLP trace export requests whose spans were stored."),
    ("spans", "Spans stored."),
    ("late_spans", "Spans that arrived after their trace had completed (its row rebuilt)."),
    ("traces", "Traces assembled and completed."),
    ("refused", "Export requests refused while ingest was at its limit (503, retried)."),
    ("feedback", "Feedback signals stored (API and span events; re-sent ones once)."),
    ("recovered", "Traces a previous server left open, assembled again at start."),
    ("events", "Span events received as OTLP log records (re-sent ones once)."),
    ("from_memory", "Completed traces handed to the policies from the span rows held."),
    ("read_back", "Completed traces read back from the store for the policies."),
)


class IngestCollector(Collector):
    """``Ingest.stats`` and the assembler's size as Prometheus families."""

    def __init__(self, ingest: Ingest) -> None:
        self._ingest = ingest

    def describe(self) -> list[Metric]:
        return list(self.collect())  # cheap: counters read from memory

    def collect(self) -> Iterator[Metric]:
        stats = self._ingest.stats
        for name, text in _COUNTERS:
            value = float(getattr(stats, name))
            yield CounterMetricFamily(f"evalsi_ingest_{name}", text, value=value)
        assembler = self._ingest.assembler
        yield GaugeMetricFamily(
            "evalsi_ingest_open_traces", "Traces being assembled.", value=assembler.open_traces
        )
        yield GaugeMetricFamily(
            "evalsi_ingest_held_spans",
            "Spans held for the traces being assembled.",
            value=assembler.held_spans,
        )
        yield GaugeMetricFamily(
            "evalsi_ingest_held_row_bytes",
            "Bytes of span rows held to grade completed traces without reading them back.",
            value=self._ingest.held.bytes,
        )
