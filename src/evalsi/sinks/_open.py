"""A sink from its spec section: the kind's library is imported here, on first use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalsi.sinks._sink import Sink, TraceSink

SINK_KINDS = ("mlflow", "s3", "webhook", "wandb", "langfuse", "langsmith")
# The kinds an online policy can send its scores to (each attaches them to its own record of
# the trace); S3 and W&B keep runs, not traces.
TRACE_SINK_KINDS = ("mlflow", "webhook", "langfuse", "langsmith")


def open_sink(kind: str, options: Mapping[str, Any], *, secret: str = "") -> Sink:
    """The sink of ``kind`` configured by ``options`` (a ``spec.sinks[i]`` section, camelCase
    keys); ``secret`` is the webhook's signing secret, already read from its reference. Its
    library is imported here, so a run without sinks never loads one."""
    o = dict(options)
    if kind == "mlflow":
        from evalsi.sinks._mlflow import MlflowSink

        return MlflowSink(str(o["trackingUri"]), str(o.get("experiment", "")))
    if kind == "s3":
        from evalsi.sinks._s3 import S3Sink

        return S3Sink(
            str(o["bucket"]),
            str(o.get("prefix", "")),
            str(o.get("endpointUrl", "")),
            str(o.get("region", "")),
        )
    if kind == "webhook":
        from evalsi.sinks._webhook import WebhookSink

        return WebhookSink(str(o["url"]), secret, float(o.get("timeoutSeconds", 10.0)))
    if kind == "wandb":
        from evalsi.sinks._wandb import WandbSink

        return WandbSink(
            str(o["project"]),
            str(o.get("mode", "")),
            str(o.get("dir", "")),
            str(o.get("entity", "")),
        )
    if kind == "langfuse":
        from evalsi.sinks._langfuse import LangfuseSink

        return LangfuseSink(str(o["host"]), str(o["publicKey"]), secret, str(o.get("dataset", "")))
    if kind == "langsmith":
        from evalsi.sinks._langsmith import LangsmithSink

        return LangsmithSink(
            str(o.get("endpoint", "")), secret, str(o.get("project", "")), str(o.get("dataset", ""))
        )
    raise ValueError(f"no sink kind {kind!r}; the kinds are {', '.join(SINK_KINDS)}")


def open_trace_sink(
    kind: str, options: Mapping[str, Any], *, secret: str = "", egress: Any = None
) -> TraceSink:
    """The trace sink of ``kind`` (an online policy's ``spec.sinks[i]``); ``secret`` is the
    kind's secret, already read from its reference; ``egress`` (a server's ``EgressPolicy``)
    is checked by the webhook sink where its host resolves."""
    o = dict(options)
    if kind == "mlflow":
        from evalsi.sinks._mlflow_traces import MlflowTraceSink

        return MlflowTraceSink(str(o["trackingUri"]))
    if kind == "webhook":
        from evalsi.sinks._webhook import WebhookTraceSink

        timeout_s = float(o.get("timeoutSeconds", 10.0))
        return WebhookTraceSink(str(o["url"]), secret, timeout_s, egress=egress)
    if kind == "langfuse":
        from evalsi.sinks._langfuse import LangfuseTraceSink

        return LangfuseTraceSink(str(o["host"]), str(o["publicKey"]), secret)
    if kind == "langsmith":
        from evalsi.sinks._langsmith import LangsmithTraceSink

        return LangsmithTraceSink(str(o.get("endpoint", "")), secret, str(o.get("project", "")))
    raise ValueError(
        f"an online policy cannot send to {kind!r} yet; the kinds are "
        + ", ".join(TRACE_SINK_KINDS)
    )


__all__ = ["SINK_KINDS", "TRACE_SINK_KINDS", "open_sink", "open_trace_sink"]
