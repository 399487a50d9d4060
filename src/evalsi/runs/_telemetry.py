"""A run's tasks as OpenTelemetry spans: the projection of each recorded trajectory.

The trajectory is the record; spans are its projection, built after the task's output is
stored, with the times the harness recorded, so a span never claims what the record does not
hold. One trace per task: an ``invoke_agent`` span for the invocation (its times the engine's,
widened to hold its steps), and one child per step, in trajectory order:

- ``llm_call`` → ``chat {model}`` (GenAI: ``gen_ai.operation.name`` chat, the model, token
  usage, finish reason, the answer and the tools it asked for as ``gen_ai.output.messages``);
- ``tool_call`` → ``execute_tool {tool}`` (``gen_ai.tool.name``, ``.call.id``, ``.call.arguments``,
  ``.call.result``; a failed call has status ERROR with the error);
- ``approval``, ``fault``, ``policy_block``, ``sandbox_denial`` and kinds GenAI has no name
  for → ``{kind} {name}``, with the step's input and output as JSON in ``evalsi.step.input`` /
  ``evalsi.step.output`` (and ``gen_ai.tool.name`` for the tool the step concerns).

Every span carries ``evalsi.run_id``, ``evalsi.trial``, ``evalsi.task_id`` (the sample id) and
``evalsi.step.kind`` (``task`` on the invocation); steps carry ``evalsi.step.index``, their
place in the trajectory (parallel tool calls may start in the same nanosecond), and the
invocation ``evalsi.stop_reason``. The Watch side's mapper reads these back
(``traces._mappers._evalsi``), so a run's traces give the trajectory the run stored.

A step recorded without times (a Python target's own trajectory may lack them) is placed,
zero-length, where the previous step ended.

Export itself is not here: the OpenTelemetry SDK stays at the edges (``evalsi.sinks``), and
the caller hands in an exporter factory (``SpanExporterFactory``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson

from evalsi.connectors import TargetOutput, resolve_secret
from evalsi.core import (
    STATUS_ERROR,
    Content,
    JsonValue,
    Span,
    Step,
    Trajectory,
    UserError,
)
from evalsi.specs import TelemetrySpec

log = logging.getLogger("evalsi.runs")

SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3  # OTLP SpanKind values
HARNESS_KINDS = frozenset({"approval", "fault", "policy_block", "sandbox_denial"})


class SpanExporter(Protocol):
    """Where a run's spans go (``evalsi.sinks.OtlpSpanExporter``)."""

    def export(self, spans: Sequence[Span]) -> None: ...

    def close(self) -> Any:
        """Flush and stop; returns counts with ``sent``, ``failed`` and ``dropped``."""
        ...


SpanExporterFactory = Callable[..., SpanExporter]
"""Called as ``factory(endpoint, headers=..., protocol=..., timeout_s=...)``."""


def _new_id(n: int) -> str:
    return os.urandom(n).hex()


def _json(value: JsonValue) -> str:
    return orjson.dumps(value, default=repr).decode()


def _tool_value(value: JsonValue) -> str | int | float | bool:
    """A tool's arguments or result as a GenAI attribute: text and numbers as they are,
    structures as JSON (what the GenAI mappers parse back)."""
    if isinstance(value, (str, int, float, bool)):
        return value
    return _json(value)


def _text_messages(content: Content | None, role: str) -> str | None:
    """Content as ``gen_ai.*.messages`` (GenAI 1.37 parts), when it is text or messages."""
    if content is None:
        return None
    if content.kind == "text":
        return _json([{"role": role, "parts": [{"type": "text", "content": content.value}]}])
    if content.kind == "messages":
        return _json(
            [
                {"role": m.role, "parts": [{"type": "text", "content": m.content or ""}]}
                for m in content.value
            ]
        )
    return None


def task_spans(
    trajectory: Trajectory,
    *,
    run_id: str,
    trial: int,
    task_id: str,
    agent: str,
    started_ns: int,
    ended_ns: int,
    input: Content | None = None,
    output: Content | None = None,
    new_id: Callable[[int], str] = _new_id,
) -> list[Span]:
    """The spans of one task: the invocation first, then one per step in trajectory order.

    Example:
        >>> from evalsi.core import Step, Trajectory
        >>> t = Trajectory([Step("policy_block", "transfer", start_time_unix_nano=5,
        ...     end_time_unix_nano=5)], stop_reason="final_answer")
        >>> spans = task_spans(t, run_id="r", trial=0, task_id="s1", agent="bank",
        ...     started_ns=1, ended_ns=9)
        >>> [(s.name, s.attributes["evalsi.step.kind"]) for s in spans]
        [('invoke_agent bank', 'task'), ('policy_block transfer', 'policy_block')]
    """
    trace_id, root_id = new_id(16), new_id(8)
    tags: dict[str, Any] = {
        "evalsi.run_id": run_id,
        "evalsi.trial": trial,
        "evalsi.task_id": task_id,
    }
    children: list[Span] = []
    cursor = started_ns
    for index, step in enumerate(trajectory.steps):
        start = step.start_time_unix_nano or cursor
        end = max(step.end_time_unix_nano or start, start)
        cursor = end
        span = _step_span(step, trace_id, new_id(8), root_id, start, end)
        span.attributes.update(tags)
        span.attributes["evalsi.step.index"] = index
        children.append(span)
    first = min([started_ns, *(s.start_time_unix_nano for s in children)])
    last = max([ended_ns, *(s.end_time_unix_nano for s in children)])
    root = Span(
        trace_id,
        root_id,
        name=f"invoke_agent {agent}",
        kind=SPAN_KIND_INTERNAL,
        start_time_unix_nano=first,
        end_time_unix_nano=last,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "evalsi.step.kind": "task",
            **tags,
        },
    )
    if trajectory.stop_reason:
        root.attributes["evalsi.stop_reason"] = trajectory.stop_reason
    for key, text in (
        ("gen_ai.input.messages", _text_messages(input, "user")),
        ("gen_ai.output.messages", _text_messages(output, "assistant")),
    ):
        if text is not None:
            root.attributes[key] = text
    return [root, *children]


def _step_span(step: Step, trace_id: str, span_id: str, parent: str, start: int, end: int) -> Span:
    span = Span(
        trace_id,
        span_id,
        parent,
        kind=SPAN_KIND_INTERNAL,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes={"evalsi.step.kind": step.kind},
    )
    attrs = span.attributes
    if step.error:
        span.status_code, span.status_message = STATUS_ERROR, step.error
    if step.kind == "llm_call":
        span.name, span.kind = f"chat {step.name}".rstrip(), SPAN_KIND_CLIENT
        attrs["gen_ai.operation.name"] = "chat"
        if step.name:
            attrs["gen_ai.request.model"] = step.name
        _usage(attrs, step)
        _answer(attrs, step.output)
        return span
    if step.kind == "tool_call":
        call = step.tool_call
        name = call.name if call is not None else step.name
        span.name = f"execute_tool {name}".rstrip()
        attrs["gen_ai.operation.name"] = "execute_tool"
        if name:
            attrs["gen_ai.tool.name"] = name
        if call is not None:
            if call.id:
                attrs["gen_ai.tool.call.id"] = call.id
            attrs["gen_ai.tool.call.arguments"] = _tool_value(call.arguments)
        elif step.input is not None:
            attrs["gen_ai.tool.call.arguments"] = _tool_value(step.input)
        if step.output is not None:
            attrs["gen_ai.tool.call.result"] = _tool_value(step.output)
        return span
    # A kind GenAI has no convention for: the step as it was recorded.
    span.name = f"{step.kind} {step.name}".rstrip()
    if step.name:
        attrs["evalsi.step.name"] = step.name
        if step.kind in HARNESS_KINDS:
            attrs["gen_ai.tool.name"] = step.name  # the tool the step concerns
    if step.input is not None:
        attrs["evalsi.step.input"] = _json(step.input)
    if step.output is not None:
        attrs["evalsi.step.output"] = _json(step.output)
    _usage(attrs, step)
    return span


def _usage(attrs: dict[str, Any], step: Step) -> None:
    u = step.usage
    if u is None:
        return
    for key, value in (
        ("gen_ai.usage.input_tokens", u.input_tokens),
        ("gen_ai.usage.output_tokens", u.output_tokens),
        ("gen_ai.usage.total_tokens", u.total_tokens),
    ):
        if value is not None:
            attrs[key] = value


def _answer(attrs: dict[str, Any], output: JsonValue) -> None:
    """The built-in loop records ``{"text", "tool_calls": [names], "finish_reason"}``."""
    if not isinstance(output, dict):
        if output is not None:
            attrs["evalsi.step.output"] = _json(output)
        return
    reason = output.get("finish_reason")
    if isinstance(reason, str) and reason:
        attrs["gen_ai.response.finish_reasons"] = (reason,)
    parts: list[dict[str, Any]] = []
    text = output.get("text")
    if isinstance(text, str) and text:
        parts.append({"type": "text", "content": text})
    calls = output.get("tool_calls")
    for name in calls if isinstance(calls, list) else ():
        if isinstance(name, str):
            parts.append({"type": "tool_call", "name": name})
    if parts:
        message: dict[str, Any] = {"role": "assistant", "parts": parts}
        if isinstance(reason, str) and reason:
            message["finish_reason"] = reason
        attrs["gen_ai.output.messages"] = _json([message])


class RunTelemetry:
    """The engine's hook: each finished task with a trajectory becomes a trace.

    ``export_task`` never raises (a failure loses that task's spans, counted); ``close``
    flushes and returns the warning to show when spans were lost, else ``None``.
    """

    def __init__(self, spec: TelemetrySpec, factory: SpanExporterFactory, agent: str) -> None:
        headers = {
            k: resolve_secret(v[len("secret:") :]).reveal() if v.startswith("secret:") else v
            for k, v in spec.headers.items()
        }
        self.endpoint = spec.endpoint
        self.agent = agent
        self.exporter = factory(
            spec.endpoint, headers=headers, protocol=spec.protocol, timeout_s=spec.timeout_s
        )
        self.lost = 0

    def export_task(
        self,
        *,
        run_id: str,
        trial: int,
        record_id: str,
        input: Content | None,
        output: TargetOutput,
        started_ns: int,
        ended_ns: int,
    ) -> None:
        if output.trajectory is None:
            return
        try:
            spans = task_spans(
                output.trajectory,
                run_id=run_id,
                trial=trial,
                task_id=record_id,
                agent=self.agent,
                started_ns=started_ns,
                ended_ns=ended_ns,
                input=input,
                output=output.output,
            )
            self.exporter.export(spans)
        except Exception:
            log.exception("cannot export the spans of task %s (trial %d)", record_id, trial)
            self.lost += 1

    def close(self) -> str | None:
        try:
            counts = self.exporter.close()
        except Exception as e:  # noqa: BLE001 - telemetry never fails a run
            return f"spans of this run may not have reached {self.endpoint}: {e}"
        failed = int(getattr(counts, "failed", 0)) + int(getattr(counts, "dropped", 0))
        if not failed and not self.lost:
            return None
        what = f"{failed} spans" + (f" and {self.lost} tasks" if self.lost else "")
        return (
            f"telemetry: {what} could not be exported to {self.endpoint} (the run itself is "
            "complete and stored)"
        )


def open_telemetry(
    spec: TelemetrySpec | None, factory: SpanExporterFactory | None, agent: str
) -> RunTelemetry | None:
    """The run's telemetry hook, or ``None`` when ``spec.telemetry`` is not set."""
    if spec is None:
        return None
    if factory is None:
        raise UserError(
            "spec.telemetry: this caller cannot export spans (no exporter was handed in)",
            hint="run it with evalsi run, evalsi.run() or on evalsi serve, or remove "
            "spec.telemetry",
        )
    return RunTelemetry(spec, factory, agent)
