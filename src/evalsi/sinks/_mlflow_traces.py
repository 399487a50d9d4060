"""An online policy's scores as assessments on MLflow traces (MLflow 3's feedback), through
MLflow's own tracing client (``mlflow-skinny``, the ``mlflow`` extra).

A trace that reached MLflow over OTLP (its ``/v1/traces`` endpoint) has the MLflow id
``tr-<OTel trace id>``; each score becomes a feedback assessment on it named
``EVALUATOR/METRIC`` (or the evaluator's name), from source ``CODE`` with id
``evalsi/<policy>``, on the scored span. Its ``evalsi.score_id`` metadata makes a resend
idempotent: the trace's assessments are read first, and a score already there is updated when
its value changed and left alone when it did not. A trace MLflow does not have is an error
(retried, then counted): the policy's scores go where its traces went.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from evalsi.core import require_extra
from evalsi.sinks._sink import Receipt, TraceScore, metric_key

SCORE_ID = "evalsi.score_id"


def mlflow_trace_id(otel_trace_id: str) -> str:
    """MLflow's id of a trace it took in over OTLP."""
    return f"tr-{otel_trace_id}"


class MlflowTraceSink:
    kind = "mlflow"

    def __init__(self, tracking_uri: str) -> None:
        require_extra("the mlflow sink", "mlflow", "mlflow")
        from mlflow.tracing.client import TracingClient

        self.target = tracking_uri
        self.client = TracingClient(tracking_uri)

    def send(self, scores: Sequence[TraceScore]) -> Receipt:
        from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback

        by_trace: dict[str, list[TraceScore]] = defaultdict(list)
        for score in scores:
            by_trace[score.trace_id].append(score)
        made = updated = kept = 0
        for otel_id, batch in by_trace.items():
            trace_id = mlflow_trace_id(otel_id)
            info = self.client.get_trace_info(trace_id)
            have = {str((a.metadata or {}).get(SCORE_ID, "")): a for a in (info.assessments or ())}
            for score in batch:
                value = _value(score)
                existing = have.get(score.score_id)
                if existing is not None and _same(existing, value, score.explanation):
                    kept += 1
                    continue
                feedback = Feedback(
                    name=metric_key({"evaluator": score.evaluator, "metric": score.metric}),
                    value=value,
                    error=None if value is not None else (score.explanation or score.outcome),
                    source=AssessmentSource(
                        source_type=AssessmentSourceType.CODE, source_id=f"evalsi/{score.policy}"
                    ),
                    rationale=score.explanation or None,
                    metadata={
                        SCORE_ID: score.score_id,
                        "evalsi.run_id": score.run_id,
                        "evalsi.outcome": score.outcome,
                    },
                    span_id=score.span_id or None,
                )
                if existing is None:
                    self.client.log_assessment(trace_id, feedback)
                    made += 1
                else:
                    self.client.update_assessment(trace_id, str(existing.assessment_id), feedback)
                    updated += 1
        remote = {"created": str(made), "updated": str(updated), "unchanged": str(kept)}
        return Receipt(self.kind, self.target, len(scores), remote)

    def close(self) -> None:
        pass


def _value(score: TraceScore) -> Any:
    """Pass/fail as a boolean (MLflow's UI shows it as such), a number as a number, else the
    label; None when the evaluator gave nothing (skipped, error)."""
    if score.passed is not None:
        return score.passed
    if score.value is None:
        return score.label
    return score.value


def _same(existing: Any, value: Any, rationale: str) -> bool:
    current = getattr(getattr(existing, "feedback", None), "value", None)
    return bool(current == value and (existing.rationale or "") == rationale)


__all__ = ["MlflowTraceSink", "mlflow_trace_id"]
