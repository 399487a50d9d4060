"""Converters between the domain types of ``evalsi.core`` and the generated wire messages.

Every ``*_to_proto`` builds a fresh message; every ``*_from_proto`` builds a fresh core object.
For the types below, ``x_from_proto(x_to_proto(obj)) == obj`` field for field (the round-trip
property test in ``tests/unit/wire`` holds this), with one documented loss in JSON values:

* JSON values (``google.protobuf.Value``) carry numbers as IEEE doubles. An ``int`` within
  +-2**53 survives exactly: a double holding an integral value in that range is read back as an
  ``int`` (the same convention as protobuf's own JSON printer). The price is that a ``float``
  holding an integral value (``3.0``) is also read back as ``int`` (``3``); the two compare equal.
  An ``int`` beyond 2**53 cannot survive and raises ``ValueError`` instead of silently changing.
* ``EvaluationResult.duration_s`` travels as a ``Duration``, so it keeps nanosecond resolution.

Absent and empty are kept apart wherever the core types keep them apart (``Usage()`` is not
``None``, ``Message.content`` may be ``None``, ``Interval.low`` may be ``None``): the schema
gives those fields presence for exactly this reason.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, Literal

from google.protobuf import struct_pb2

from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2, record_pb2, score_pb2
from evalsi.core import (
    Content,
    EvaluationResult,
    EvaluatorManifest,
    EvaluatorRef,
    Interval,
    IsolationReport,
    JsonValue,
    MediaRef,
    Message,
    MetricSummary,
    Outcome,
    OutputSpec,
    Provenance,
    Record,
    Scope,
    Score,
    ScoreKind,
    Step,
    StepKind,
    TabularRow,
    Tensor,
    ToolCall,
    Trajectory,
    Usage,
)

ProvenanceSourceName = Literal["", "dataset", "run", "trace"]

# Largest magnitude below which every integer is exactly representable as a double.
_EXACT_INT_LIMIT = 2**53

_STEP_KIND_TO_PROTO: dict[StepKind, record_pb2.StepKind] = {
    "llm_call": record_pb2.STEP_KIND_LLM_CALL,
    "tool_call": record_pb2.STEP_KIND_TOOL_CALL,
    "retrieval": record_pb2.STEP_KIND_RETRIEVAL,
    "message": record_pb2.STEP_KIND_MESSAGE,
    "agent": record_pb2.STEP_KIND_AGENT,
    "other": record_pb2.STEP_KIND_OTHER,
}
_STEP_KIND_FROM_PROTO: dict[int, StepKind] = {v: k for k, v in _STEP_KIND_TO_PROTO.items()}

_SOURCE_TO_PROTO: dict[ProvenanceSourceName, record_pb2.ProvenanceSource] = {
    "": record_pb2.PROVENANCE_SOURCE_UNSPECIFIED,
    "dataset": record_pb2.PROVENANCE_SOURCE_DATASET,
    "run": record_pb2.PROVENANCE_SOURCE_RUN,
    "trace": record_pb2.PROVENANCE_SOURCE_TRACE,
}
_SOURCE_FROM_PROTO: dict[int, ProvenanceSourceName] = {v: k for k, v in _SOURCE_TO_PROTO.items()}

_SCORE_KIND_TO_PROTO: dict[ScoreKind, score_pb2.ScoreKind] = {
    "number": score_pb2.SCORE_KIND_NUMBER,
    "passed": score_pb2.SCORE_KIND_PASSED,
    "label": score_pb2.SCORE_KIND_LABEL,
    "structured": score_pb2.SCORE_KIND_STRUCTURED,
}
_SCORE_KIND_FROM_PROTO: dict[int, ScoreKind] = {v: k for k, v in _SCORE_KIND_TO_PROTO.items()}

_OUTCOME_TO_PROTO: dict[Outcome, score_pb2.Outcome] = {
    Outcome.SCORED: score_pb2.OUTCOME_SCORED,
    Outcome.SKIPPED: score_pb2.OUTCOME_SKIPPED,
    Outcome.ERROR: score_pb2.OUTCOME_ERROR,
    Outcome.CANCELLED: score_pb2.OUTCOME_CANCELLED,
}
# No entry for OUTCOME_UNSPECIFIED: an unset outcome has no safe reading (it would be miscounted).
_OUTCOME_FROM_PROTO: dict[int, Outcome] = {v: k for k, v in _OUTCOME_TO_PROTO.items()}

_SCOPE_TO_PROTO: dict[Scope, evaluator_pb2.Scope] = {
    Scope.RECORD: evaluator_pb2.SCOPE_RECORD,
    Scope.DATASET: evaluator_pb2.SCOPE_DATASET,
    Scope.SPAN: evaluator_pb2.SCOPE_SPAN,
    Scope.SESSION: evaluator_pb2.SCOPE_SESSION,
    Scope.COMPARATIVE: evaluator_pb2.SCOPE_COMPARATIVE,
}
_SCOPE_FROM_PROTO: dict[int, Scope] = {v: k for k, v in _SCOPE_TO_PROTO.items()}
# The schema documents an unset scope as the common case, a record-scope evaluator.
_SCOPE_FROM_PROTO[evaluator_pb2.SCOPE_UNSPECIFIED] = Scope.RECORD


# -- JSON values --------------------------------------------------------------------------------
def value_to_proto(value: JsonValue) -> struct_pb2.Value:
    """A JSON value (what ``json.loads`` returns; tuples are accepted as lists) as a ``Value``."""
    out = struct_pb2.Value()
    _set_value(out, value)
    return out


def value_from_proto(message: struct_pb2.Value) -> JsonValue:
    """The JSON value a ``Value`` holds; an unset ``Value`` reads as ``None``."""
    kind = message.WhichOneof("kind")
    if kind == "string_value":
        return str(message.string_value)
    if kind == "number_value":
        return _number_from_proto(float(message.number_value))
    if kind == "bool_value":
        return bool(message.bool_value)
    if kind == "struct_value":
        return struct_from_proto(message.struct_value)
    if kind == "list_value":
        return [value_from_proto(item) for item in message.list_value.values]
    return None


def struct_to_proto(mapping: Mapping[str, JsonValue]) -> struct_pb2.Struct:
    """A JSON object as a ``Struct``."""
    out = struct_pb2.Struct()
    _set_struct(out, mapping)
    return out


def struct_from_proto(message: struct_pb2.Struct) -> dict[str, JsonValue]:
    """The JSON object a ``Struct`` holds; an unset ``Struct`` reads as ``{}``."""
    return {str(key): value_from_proto(item) for key, item in message.fields.items()}


def _set_value(out: struct_pb2.Value, value: JsonValue) -> None:
    # bool before numbers: bool is an int subclass, and True must not become 1.0.
    if value is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, numbers.Integral):
        if abs(int(value)) > _EXACT_INT_LIMIT:
            raise ValueError(
                f"integer {value} does not fit a JSON number exactly (|n| > 2**53); "
                "send it as a string"
            )
        out.number_value = float(value)
    elif isinstance(value, numbers.Real):
        out.number_value = float(value)
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, Mapping):
        _set_struct(out.struct_value, value)
    elif isinstance(value, list | tuple):
        items = out.list_value
        items.SetInParent()  # an empty list is still a list, not an unset value
        for item in value:
            _set_value(items.values.add(), item)
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def _set_struct(out: struct_pb2.Struct, mapping: Mapping[str, JsonValue]) -> None:
    out.SetInParent()
    for key, item in mapping.items():
        if not isinstance(key, str):
            raise TypeError(f"JSON object keys must be strings, got {type(key).__name__}")
        _set_value(out.fields[key], item)


def _set_value_map(out: Any, mapping: Mapping[str, JsonValue]) -> None:
    for key, item in mapping.items():
        _set_value(out[key], item)


def _value_map_from_proto(message_map: Any) -> dict[str, JsonValue]:
    return {str(key): value_from_proto(item) for key, item in message_map.items()}


def _number_from_proto(number: float) -> int | float:
    if number.is_integer() and abs(number) <= _EXACT_INT_LIMIT:
        return int(number)
    return number


# -- optional scalars ---------------------------------------------------------------------------
def _opt_int(message: Any, name: str) -> int | None:
    return int(getattr(message, name)) if message.HasField(name) else None


def _opt_float(message: Any, name: str) -> float | None:
    return float(getattr(message, name)) if message.HasField(name) else None


def _opt_bool(message: Any, name: str) -> bool | None:
    return bool(getattr(message, name)) if message.HasField(name) else None


# -- content ------------------------------------------------------------------------------------
def content_to_proto(content: Content) -> record_pb2.Content:
    out = record_pb2.Content()
    _set_content(out, content)
    return out


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
        media: MediaRef = value
        out.media.SetInParent()
        out.media.uri = media.uri
        out.media.mime_type = media.mime_type
        out.media.sha256 = media.sha256
    else:
        raise ValueError(f"unknown content kind {kind!r}")


def _set_message(out: record_pb2.Message, message: Message) -> None:
    out.role = message.role
    if message.content is not None:
        out.content = message.content
    for call in message.tool_calls:
        _set_tool_call(out.tool_calls.add(), call)
    out.tool_call_id = message.tool_call_id
    out.name = message.name


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
def _set_usage(out: record_pb2.Usage, usage: Usage) -> None:
    out.SetInParent()  # Usage() with nothing known is still "usage was reported"
    if usage.input_tokens is not None:
        out.input_tokens = usage.input_tokens
    if usage.output_tokens is not None:
        out.output_tokens = usage.output_tokens
    if usage.total_tokens is not None:
        out.total_tokens = usage.total_tokens
    if usage.cost_usd is not None:
        out.cost_usd = usage.cost_usd
    if usage.latency_ms is not None:
        out.latency_ms = usage.latency_ms


def _usage_from_proto(message: record_pb2.Usage) -> Usage:
    return Usage(
        input_tokens=_opt_int(message, "input_tokens"),
        output_tokens=_opt_int(message, "output_tokens"),
        total_tokens=_opt_int(message, "total_tokens"),
        cost_usd=_opt_float(message, "cost_usd"),
        latency_ms=_opt_float(message, "latency_ms"),
    )


def _set_step(out: record_pb2.Step, step: Step) -> None:
    out.kind = _STEP_KIND_TO_PROTO[step.kind]
    out.name = step.name
    if step.input is not None:
        _set_value(out.input, step.input)
    if step.output is not None:
        _set_value(out.output, step.output)
    if step.tool_call is not None:
        _set_tool_call(out.tool_call, step.tool_call)
    if step.usage is not None:
        _set_usage(out.usage, step.usage)
    out.error = step.error
    out.start_time_unix_nano = step.start_time_unix_nano
    out.end_time_unix_nano = step.end_time_unix_nano
    out.span_id = step.span_id


def _step_from_proto(message: record_pb2.Step) -> Step:
    return Step(
        # Unset, or a kind added by a newer schema: still a step, of no kind we know.
        kind=_STEP_KIND_FROM_PROTO.get(int(message.kind), "other"),
        name=str(message.name),
        input=value_from_proto(message.input),
        output=value_from_proto(message.output),
        tool_call=(
            _tool_call_from_proto(message.tool_call) if message.HasField("tool_call") else None
        ),
        usage=_usage_from_proto(message.usage) if message.HasField("usage") else None,
        error=str(message.error),
        start_time_unix_nano=int(message.start_time_unix_nano),
        end_time_unix_nano=int(message.end_time_unix_nano),
        span_id=str(message.span_id),
    )


def _set_provenance(out: record_pb2.Provenance, provenance: Provenance) -> None:
    out.SetInParent()
    out.source = _SOURCE_TO_PROTO[provenance.source]
    out.dataset = provenance.dataset
    out.dataset_version = provenance.dataset_version
    out.line = provenance.line
    out.run_id = provenance.run_id
    out.trace_id = provenance.trace_id
    out.span_id = provenance.span_id
    if provenance.isolation is not None:
        isolation = provenance.isolation
        out.isolation.SetInParent()
        out.isolation.level = isolation.level
        out.isolation.driver = isolation.driver
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
        source=_SOURCE_FROM_PROTO.get(int(message.source), ""),
        dataset=str(message.dataset),
        dataset_version=str(message.dataset_version),
        line=int(message.line),
        run_id=str(message.run_id),
        trace_id=str(message.trace_id),
        span_id=str(message.span_id),
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
        for step in record.trajectory.steps:
            _set_step(out.trajectory.steps.add(), step)
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
            Trajectory(steps=[_step_from_proto(s) for s in message.trajectory.steps])
            if message.HasField("trajectory")
            else None
        ),
        usage=_usage_from_proto(message.usage) if message.HasField("usage") else None,
        metadata=_value_map_from_proto(message.metadata),
        provenance=(
            _provenance_from_proto(message.provenance) if message.HasField("provenance") else None
        ),
    )


# -- scores and results -------------------------------------------------------------------------
def score_to_proto(score: Score) -> score_pb2.Score:
    out = score_pb2.Score()
    _set_score(out, score)
    return out


def score_from_proto(message: score_pb2.Score) -> Score:
    which = message.WhichOneof("value")
    return Score(
        name=str(message.name),
        number=float(message.number) if which == "number" else None,
        passed=bool(message.passed) if which == "passed" else None,
        label=str(message.label) if which == "label" else None,
        structured=value_from_proto(message.structured) if which == "structured" else None,
        explanation=str(message.explanation),
        confidence=_opt_float(message, "confidence"),
        cost=_usage_from_proto(message.cost) if message.HasField("cost") else None,
        metadata=_value_map_from_proto(message.metadata),
    )


def _set_score(out: score_pb2.Score, score: Score) -> None:
    held = [
        name
        for name in ("number", "passed", "label", "structured")
        if getattr(score, name) is not None
    ]
    if len(held) > 1:
        # The wire holds one value per score; dropping the others silently would lose data.
        raise ValueError(f"score {score.name!r} holds several values ({', '.join(held)})")
    out.name = score.name
    if score.number is not None:
        out.number = score.number
    elif score.passed is not None:
        out.passed = score.passed
    elif score.label is not None:
        out.label = score.label
    elif score.structured is not None:
        _set_value(out.structured, score.structured)
    out.explanation = score.explanation
    if score.confidence is not None:
        out.confidence = score.confidence
    if score.cost is not None:
        _set_usage(out.cost, score.cost)
    _set_value_map(out.metadata, score.metadata)


def result_to_proto(result: EvaluationResult) -> score_pb2.EvaluationResult:
    out = score_pb2.EvaluationResult(
        record_id=result.record_id,
        evaluator=result.evaluator,
        evaluator_ref=result.evaluator_ref,
        outcome=_OUTCOME_TO_PROTO[result.outcome],
        reason=result.reason,
        trial=result.trial,
    )
    for score in result.scores:
        _set_score(out.scores.add(), score)
    out.duration.FromNanoseconds(round(result.duration_s * 1e9))
    return out


def result_from_proto(message: score_pb2.EvaluationResult) -> EvaluationResult:
    return EvaluationResult(
        record_id=str(message.record_id),
        evaluator=str(message.evaluator),
        evaluator_ref=str(message.evaluator_ref),
        outcome=_outcome_from_proto(int(message.outcome)),
        scores=[score_from_proto(s) for s in message.scores],
        reason=str(message.reason),
        # One division of the exact integer keeps the float correctly rounded.
        duration_s=int(message.duration.ToNanoseconds()) / 1e9,
        trial=int(message.trial),
    )


def _outcome_from_proto(number: int) -> Outcome:
    outcome = _OUTCOME_FROM_PROTO.get(number)
    if outcome is None:
        raise ValueError(f"EvaluationResult.outcome {number} is not a known outcome")
    return outcome


# -- summaries ----------------------------------------------------------------------------------
def summary_to_proto(summary: MetricSummary) -> score_pb2.MetricSummary:
    out = score_pb2.MetricSummary(
        evaluator=summary.evaluator,
        metric=summary.metric,
        kind=_SCORE_KIND_TO_PROTO[summary.kind],
        n=summary.n,
        scored=summary.scored,
        skipped=summary.skipped,
        errors=summary.errors,
        cancelled=summary.cancelled,
        infra_errors=summary.infra_errors,
    )
    if summary.mean is not None:
        out.mean = summary.mean
    if summary.std is not None:
        out.std = summary.std
    ci = summary.ci
    out.ci.SetInParent()
    if ci.low is not None:
        out.ci.low = ci.low
    if ci.high is not None:
        out.ci.high = ci.high
    out.ci.method = ci.method
    out.ci.level = ci.level
    for label, count in summary.labels.items():
        out.labels[label] = count
    if summary.clusters is not None:
        out.clusters = summary.clusters
    for k, value in summary.pass_at_k.items():
        out.pass_at_k[k] = value
    for k, value in summary.pass_hat_k.items():
        out.pass_hat_k[k] = value
    if summary.trial_variance is not None:
        out.trial_variance = summary.trial_variance
    if summary.higher_is_better is not None:
        out.higher_is_better = summary.higher_is_better
    return out


def summary_from_proto(message: score_pb2.MetricSummary) -> MetricSummary:
    ci = message.ci
    return MetricSummary(
        evaluator=str(message.evaluator),
        metric=str(message.metric),
        kind=_score_kind_from_proto(int(message.kind), "MetricSummary.kind"),
        n=int(message.n),
        mean=_opt_float(message, "mean"),
        std=_opt_float(message, "std"),
        ci=Interval(
            low=_opt_float(ci, "low"),
            high=_opt_float(ci, "high"),
            method=str(ci.method),
            level=float(ci.level),
        ),
        scored=int(message.scored),
        skipped=int(message.skipped),
        errors=int(message.errors),
        cancelled=int(message.cancelled),
        infra_errors=int(message.infra_errors),
        labels={str(k): int(v) for k, v in message.labels.items()},
        clusters=_opt_int(message, "clusters"),
        pass_at_k={str(k): float(v) for k, v in message.pass_at_k.items()},
        pass_hat_k={str(k): float(v) for k, v in message.pass_hat_k.items()},
        trial_variance=_opt_float(message, "trial_variance"),
        higher_is_better=_opt_bool(message, "higher_is_better"),
    )


def _score_kind_from_proto(number: int, field: str) -> ScoreKind:
    kind = _SCORE_KIND_FROM_PROTO.get(number)
    if kind is None:
        raise ValueError(f"{field} {number} is not a known score kind")
    return kind


# -- evaluator manifests ------------------------------------------------------------------------
def evaluator_ref_to_proto(ref: EvaluatorRef) -> evaluator_pb2.EvaluatorRef:
    return evaluator_pb2.EvaluatorRef(namespace=ref.namespace, name=ref.name, version=ref.version)


def evaluator_ref_from_proto(message: evaluator_pb2.EvaluatorRef) -> EvaluatorRef:
    return EvaluatorRef(str(message.namespace), str(message.name), str(message.version))


def manifest_to_proto(manifest: EvaluatorManifest) -> evaluator_pb2.EvaluatorManifest:
    out = evaluator_pb2.EvaluatorManifest(
        ref=evaluator_ref_to_proto(manifest.ref),
        scope=_SCOPE_TO_PROTO[manifest.scope],
        requires=list(manifest.requires),
        description=manifest.description,
        example=manifest.example,
        pack=manifest.pack,
        batchable=manifest.batchable,
    )
    for spec in manifest.outputs:
        _set_output_spec(out.outputs.add(), spec)
    _set_struct(out.params_schema, manifest.params_schema)
    return out


def manifest_from_proto(message: evaluator_pb2.EvaluatorManifest) -> EvaluatorManifest:
    scope = _SCOPE_FROM_PROTO.get(int(message.scope))
    if scope is None:
        raise ValueError(f"EvaluatorManifest.scope {message.scope} is not a known scope")
    return EvaluatorManifest(
        ref=evaluator_ref_from_proto(message.ref),
        scope=scope,
        requires=tuple(str(r) for r in message.requires),
        outputs=tuple(_output_spec_from_proto(o) for o in message.outputs),
        params_schema=struct_from_proto(message.params_schema),
        description=str(message.description),
        example=str(message.example),
        pack=str(message.pack),
        batchable=bool(message.batchable),
    )


def _set_output_spec(out: evaluator_pb2.OutputSpec, spec: OutputSpec) -> None:
    out.name = spec.name
    out.type = _SCORE_KIND_TO_PROTO[spec.type]
    if spec.range is not None:
        out.range.SetInParent()  # (0, 0) is a range too
        out.range.low, out.range.high = spec.range
    if spec.higher_is_better is not None:
        out.higher_is_better = spec.higher_is_better
    out.description = spec.description


def _output_spec_from_proto(message: evaluator_pb2.OutputSpec) -> OutputSpec:
    return OutputSpec(
        name=str(message.name),
        type=_score_kind_from_proto(int(message.type), "OutputSpec.type"),
        range=(
            (float(message.range.low), float(message.range.high))
            if message.HasField("range")
            else None
        ),
        higher_is_better=_opt_bool(message, "higher_is_better"),
        description=str(message.description),
    )
