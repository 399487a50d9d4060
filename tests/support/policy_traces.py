"""Online policy test material: a policy, an agent turn as the OpenTelemetry SDK records it,
and waiting for the server's background grading."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# Project team-a: contains "thanks"; then length, only where contains passed.
SUPPORT = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata:
  name: support
  labels: {evals.si/project: team-a}
spec:
  selector: 'resource["service.name"] == "support-agent"'
  cascade:
    - {ref: contains, params: {values: [thanks]}}
    - {ref: length, when: "scores.all(s, s.passed)"}
  window: 10m
"""


def agent_turn(output: str, *, user: str | None = None) -> tuple[str, str, list[Any]]:
    """One agent turn as the OTel SDK records it (OpenInference attributes carry the input and
    output, and ``user.id`` the user when given): its trace id, root span id, and the finished
    spans."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent") as root:
        root.set_attribute("openinference.span.kind", "AGENT")
        root.set_attribute("input.value", "my order is late")
        root.set_attribute("output.value", output)
        root.set_attribute("session.id", "s-1")
        if user is not None:
            root.set_attribute("user.id", user)
        with tracer.start_as_current_span("chat") as llm:
            llm.set_attribute("openinference.span.kind", "LLM")
    provider.shutdown()
    ctx = root.get_span_context()
    return (
        format(ctx.trace_id, "032x"),
        format(ctx.span_id, "016x"),
        list(memory.get_finished_spans()),
    )


def wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll ``check`` until it holds (the server grades in the background)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)
