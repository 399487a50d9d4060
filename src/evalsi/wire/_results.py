"""Scores, results, metric summaries and evaluator manifests to and from proto."""

from __future__ import annotations

from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2, score_pb2
from evalsi.core import (
    EvaluationResult,
    EvaluatorManifest,
    EvaluatorRef,
    Interval,
    MetricSummary,
    OutputSpec,
    Score,
)
from evalsi.wire._json import (
    _OUTCOME_FROM_PROTO,
    _OUTCOME_TO_PROTO,
    _SCOPE_FROM_PROTO,
    _SCOPE_TO_PROTO,
    _SCORE_KIND_FROM_PROTO,
    _SCORE_KIND_TO_PROTO,
    _fields,
    _filled,
    _known,
    _opt_bool,
    _opt_fields,
    _opt_float,
    _set_fields,
    _set_struct,
    _set_value,
    _set_value_map,
    _value_map_from_proto,
    struct_from_proto,
    value_from_proto,
)
from evalsi.wire._records import _set_usage, _usage_from_proto


# -- scores and results -------------------------------------------------------------------------
def score_to_proto(score: Score) -> score_pb2.Score:
    return _filled(score_pb2.Score(), _set_score, score)


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
        outcome=_known(
            _OUTCOME_FROM_PROTO, int(message.outcome), "EvaluationResult.outcome", "outcome"
        ),
        scores=[score_from_proto(s) for s in message.scores],
        reason=str(message.reason),
        # One division of the exact integer keeps the float correctly rounded.
        duration_s=int(message.duration.ToNanoseconds()) / 1e9,
        trial=int(message.trial),
    )


# -- summaries ----------------------------------------------------------------------------------
_SUMMARY = ("evaluator", "metric", "n", "scored", "skipped", "errors", "cancelled", "infra_errors")
_SUMMARY_OPTIONAL = ("mean", "std", "clusters", "trial_variance", "higher_is_better")
_MANIFEST = ("description", "example", "pack", "batchable")


def summary_to_proto(summary: MetricSummary) -> score_pb2.MetricSummary:
    out = score_pb2.MetricSummary(
        **_fields(summary, _SUMMARY),
        kind=_SCORE_KIND_TO_PROTO[summary.kind],
        labels=summary.labels,
        pass_at_k=summary.pass_at_k,
        pass_hat_k=summary.pass_hat_k,
    )
    _set_fields(out, summary, _SUMMARY_OPTIONAL)
    set_interval(out.ci, summary.ci)
    return out


def summary_from_proto(message: score_pb2.MetricSummary) -> MetricSummary:
    return MetricSummary(
        **_fields(message, _SUMMARY),
        **_opt_fields(message, _SUMMARY_OPTIONAL),
        kind=_known(_SCORE_KIND_FROM_PROTO, int(message.kind), "MetricSummary.kind", "score kind"),
        ci=interval_from_proto(message.ci),
        labels=dict(message.labels),
        pass_at_k=dict(message.pass_at_k),
        pass_hat_k=dict(message.pass_hat_k),
    )


def set_interval(out: score_pb2.Interval, ci: Interval) -> None:
    out.SetInParent()
    _set_fields(out, ci, ("low", "high", "method", "level"))


def interval_from_proto(message: score_pb2.Interval) -> Interval:
    return Interval(
        **_opt_fields(message, ("low", "high")), method=message.method, level=message.level
    )


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
        **_fields(manifest, _MANIFEST),
    )
    for spec in manifest.outputs:
        _set_output_spec(out.outputs.add(), spec)
    _set_struct(out.params_schema, manifest.params_schema)
    return out


def manifest_from_proto(message: evaluator_pb2.EvaluatorManifest) -> EvaluatorManifest:
    return EvaluatorManifest(
        ref=evaluator_ref_from_proto(message.ref),
        scope=_known(_SCOPE_FROM_PROTO, int(message.scope), "EvaluatorManifest.scope", "scope"),
        requires=tuple(str(r) for r in message.requires),
        outputs=tuple(_output_spec_from_proto(o) for o in message.outputs),
        params_schema=struct_from_proto(message.params_schema),
        **_fields(message, _MANIFEST),
    )


def _set_output_spec(out: evaluator_pb2.OutputSpec, spec: OutputSpec) -> None:
    _set_fields(out, spec, ("name", "higher_is_better", "description"))
    out.type = _SCORE_KIND_TO_PROTO[spec.type]
    if spec.range is not None:
        out.range.SetInParent()  # (0, 0) is a range too
        out.range.low, out.range.high = spec.range


def _output_spec_from_proto(message: evaluator_pb2.OutputSpec) -> OutputSpec:
    return OutputSpec(
        name=str(message.name),
        type=_known(_SCORE_KIND_FROM_PROTO, int(message.type), "OutputSpec.type", "score kind"),
        range=(
            (float(message.range.low), float(message.range.high))
            if message.HasField("range")
            else None
        ),
        higher_is_better=_opt_bool(message, "higher_is_better"),
        description=str(message.description),
    )
