"""Records and their parts (content, usage, trajectory, provenance) to and from proto."""

from __future__ import annotations

from evalsi._proto.evalsi.v1alpha1 import record_pb2
from evalsi.core import (
    Check,
    Content,
    IsolationReport,
    MediaRef,
    Message,
    Provenance,
    Record,
    Step,
    TabularRow,
    Tensor,
    ToolCall,
    Trajectory,
    Usage,
)
from evalsi.wire._json import (
    _SOURCE_FROM_PROTO,
    _SOURCE_TO_PROTO,
    _STEP_KIND_FROM_PROTO,
    _STEP_KIND_TO_PROTO,
    _fields,
    _filled,
    _opt_fields,
    _set_fields,
    _set_value,
    _set_value_map,
    _value_map_from_proto,
    value_from_proto,
)


# -- content ------------------------------------------------------------------------------------
def content_to_proto(content: Content) -> record_pb2.Content:
    return _filled(record_pb2.Content(), _set_content, content)


def content_from_proto(message: record_pb2.Content) -> Content:
    kind = message.WhichOneof("kind")
    if kind == "text":
        return Content.of_text(str(message.text))
    if kind == "messages":
        return Content.of_messages([_message_from_proto(m) for m in message.messages.messages])
    if kind == "json":
        return Content.of_json(value_from_proto(message.json))
    if kind == "row":
        row = message.row
        return Content.of_row(
            TabularRow(
                features=_value_map_from_proto(row.features),
                prediction=value_from_proto(row.prediction),
                probabilities={str(k): float(v) for k, v in row.probabilities.items()},
            )
        )
    if kind == "tensor":
        tensor = message.tensor
        return Content.of_tensor(
            Tensor(
                dtype=str(tensor.dtype),
                shape=tuple(int(n) for n in tensor.shape),
                values=[float(v) for v in tensor.values],
            )
        )
    if kind == "media":
        media = message.media
        return Content.of_media(MediaRef(str(media.uri), str(media.mime_type), str(media.sha256)))
    raise ValueError("a Content message must hold one of its kinds, but none is set")


def _set_content(out: record_pb2.Content, content: Content) -> None:
    kind, value = content.kind, content.value
    if kind == "text":
        out.text = value
    elif kind == "messages":
        out.messages.SetInParent()  # an empty conversation is still the messages kind
        for message in value:
            _set_message(out.messages.messages.add(), message)
    elif kind == "json":
        _set_value(out.json, value)
    elif kind == "row":
        row: TabularRow = value
        out.row.SetInParent()
        _set_value_map(out.row.features, row.features)
        if row.prediction is not None:
            _set_value(out.row.prediction, row.prediction)
        for label, probability in row.probabilities.items():
            out.row.probabilities[label] = probability
    elif kind == "tensor":
        tensor: Tensor = value
        out.tensor.SetInParent()
        out.tensor.dtype = tensor.dtype
        out.tensor.shape.extend(tensor.shape)
        out.tensor.values.extend(tensor.values)
    elif kind == "media":
        out.media.SetInParent()
        _set_fields(out.media, value, ("uri", "mime_type", "sha256"))
    else:
        raise ValueError(f"unknown content kind {kind!r}")


def _set_message(out: record_pb2.Message, message: Message) -> None:
    _set_fields(out, message, ("role", "content", "tool_call_id", "name"))
    for call in message.tool_calls:
        _set_tool_call(out.tool_calls.add(), call)


def _message_from_proto(message: record_pb2.Message) -> Message:
    return Message(
        role=str(message.role),
        content=str(message.content) if message.HasField("content") else None,
        tool_calls=[_tool_call_from_proto(c) for c in message.tool_calls],
        tool_call_id=str(message.tool_call_id),
        name=str(message.name),
    )


def _set_tool_call(out: record_pb2.ToolCall, call: ToolCall) -> None:
    out.SetInParent()
    out.id = call.id
    out.name = call.name
    if call.arguments is not None:
        _set_value(out.arguments, call.arguments)


def _tool_call_from_proto(message: record_pb2.ToolCall) -> ToolCall:
    return ToolCall(
        name=str(message.name),
        arguments=value_from_proto(message.arguments),
        id=str(message.id),
    )


# -- usage, trajectory, provenance --------------------------------------------------------------
_USAGE = ("input_tokens", "output_tokens", "total_tokens", "cost_usd", "latency_ms")
_STEP = ("name", "error", "start_time_unix_nano", "end_time_unix_nano", "span_id")
_PROVENANCE = ("dataset", "dataset_version", "line", "run_id", "trace_id", "span_id")


def _set_usage(out: record_pb2.Usage, usage: Usage) -> None:
    out.SetInParent()  # Usage() with nothing known is still "usage was reported"
    _set_fields(out, usage, _USAGE)


def _usage_from_proto(message: record_pb2.Usage) -> Usage:
    return Usage(**_opt_fields(message, _USAGE))


def _set_step(out: record_pb2.Step, step: Step) -> None:
    out.kind = _STEP_KIND_TO_PROTO[step.kind]
    _set_fields(out, step, _STEP)
    if step.input is not None:
        _set_value(out.input, step.input)
    if step.output is not None:
        _set_value(out.output, step.output)
    if step.tool_call is not None:
        _set_tool_call(out.tool_call, step.tool_call)
    if step.usage is not None:
        _set_usage(out.usage, step.usage)


def _step_from_proto(message: record_pb2.Step) -> Step:
    return Step(
        **_fields(message, _STEP),
        # Unset, or a kind added by a newer schema: still a step, of no kind we know.
        kind=_STEP_KIND_FROM_PROTO.get(int(message.kind), "other"),
        input=value_from_proto(message.input),
        output=value_from_proto(message.output),
        tool_call=(
            _tool_call_from_proto(message.tool_call) if message.HasField("tool_call") else None
        ),
        usage=_usage_from_proto(message.usage) if message.HasField("usage") else None,
    )


def _set_provenance(out: record_pb2.Provenance, provenance: Provenance) -> None:
    out.SetInParent()
    out.source = _SOURCE_TO_PROTO[provenance.source]
    _set_fields(out, provenance, _PROVENANCE)
    if provenance.isolation is not None:
        isolation = provenance.isolation
        out.isolation.SetInParent()
        _set_fields(out.isolation, isolation, ("level", "driver"))
        for key, detail in isolation.details.items():
            out.isolation.details[key] = detail


def _provenance_from_proto(message: record_pb2.Provenance) -> Provenance:
    isolation = None
    if message.HasField("isolation"):
        report = message.isolation
        isolation = IsolationReport(
            level=str(report.level),
            driver=str(report.driver),
            details={str(k): str(v) for k, v in report.details.items()},
        )
    return Provenance(
        **_fields(message, _PROVENANCE),
        source=_SOURCE_FROM_PROTO.get(int(message.source), ""),
        isolation=isolation,
    )


# -- records ------------------------------------------------------------------------------------
def record_to_proto(record: Record) -> record_pb2.Record:
    out = record_pb2.Record(id=record.id)
    if record.input is not None:
        _set_content(out.input, record.input)
    if record.output is not None:
        _set_content(out.output, record.output)
    if record.reference is not None:
        _set_content(out.reference, record.reference)
    for item in record.context:
        _set_content(out.context.add(), item)
    if record.trajectory is not None:
        out.trajectory.SetInParent()  # an empty trajectory is not a missing one
        out.trajectory.stop_reason = record.trajectory.stop_reason
        for step in record.trajectory.steps:
            _set_step(out.trajectory.steps.add(), step)
        for check in record.trajectory.checks:
            out.trajectory.checks.add(name=check.name, passed=check.passed, detail=check.detail)
        if record.trajectory.end_state is not None:
            _set_value(out.trajectory.end_state, record.trajectory.end_state)
    if record.usage is not None:
        _set_usage(out.usage, record.usage)
    _set_value_map(out.metadata, record.metadata)
    if record.provenance is not None:
        _set_provenance(out.provenance, record.provenance)
    return out


def record_from_proto(message: record_pb2.Record) -> Record:
    def content(name: str) -> Content | None:
        return content_from_proto(getattr(message, name)) if message.HasField(name) else None

    return Record(
        id=str(message.id),
        input=content("input"),
        output=content("output"),
        reference=content("reference"),
        context=[content_from_proto(c) for c in message.context],
        trajectory=(
            Trajectory(
                [_step_from_proto(s) for s in message.trajectory.steps],
                message.trajectory.stop_reason,
                [Check(c.name, c.passed, c.detail) for c in message.trajectory.checks],
                (
                    value_from_proto(message.trajectory.end_state)
                    if message.trajectory.HasField("end_state")
                    else None
                ),
            )
            if message.HasField("trajectory")
            else None
        ),
        usage=_usage_from_proto(message.usage) if message.HasField("usage") else None,
        metadata=_value_map_from_proto(message.metadata),
        provenance=(
            _provenance_from_proto(message.provenance) if message.HasField("provenance") else None
        ),
    )
