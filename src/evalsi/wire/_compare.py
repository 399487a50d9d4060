"""Run comparisons to and from proto (``CompareRunsResponse``).

The wire names the runs baseline and candidate (A and B in ``Comparison``) and spells the
verdicts ``no_change`` / ``insufficient_data``; everything else round-trips unchanged.
"""

from __future__ import annotations

from typing import Literal

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2
from evalsi.runs import CompareKind, Comparison, MetricComparison, Unmatched, Verdict
from evalsi.stats import McNemar
from evalsi.wire._json import _fields, _known, _opt_fields, _opt_float, _set_fields
from evalsi.wire._results import interval_from_proto, set_interval

_VERDICT_TO_PROTO: dict[Verdict, str] = {
    "improved": "improved",
    "regressed": "regressed",
    "changed": "changed",
    "no significant change": "no_change",
    "insufficient data": "insufficient_data",
}
_VERDICT_FROM_PROTO = {v: k for k, v in _VERDICT_TO_PROTO.items()}


def comparison_to_proto(comparison: Comparison) -> run_service_pb2.CompareRunsResponse:
    out = run_service_pb2.CompareRunsResponse(
        baseline=comparison.run_a,
        candidate=comparison.run_b,
        warnings=list(comparison.warnings),
        level=comparison.level,
        seed=comparison.seed,
        baseline_dataset_version=comparison.dataset_versions[0] or "",
        candidate_dataset_version=comparison.dataset_versions[1] or "",
    )
    for m in comparison.metrics:
        _set_metric(out.metrics.add(), m)
    for u in comparison.unmatched:
        out.unmatched.add(evaluator=u.evaluator, metric=u.metric, run_id=u.run_id)
    return out


def comparison_from_proto(message: run_service_pb2.CompareRunsResponse) -> Comparison:
    baseline = str(message.baseline)
    unmatched = [
        Unmatched(
            evaluator=str(u.evaluator),
            metric=str(u.metric),
            only_in="a" if u.run_id == baseline else "b",
            run_id=str(u.run_id),
        )
        for u in message.unmatched
    ]
    return Comparison(
        run_a=baseline,
        run_b=str(message.candidate),
        dataset_versions=(
            str(message.baseline_dataset_version) or None,
            str(message.candidate_dataset_version) or None,
        ),
        metrics=[_metric_from_proto(m) for m in message.metrics],
        unmatched=unmatched,
        warnings=[str(w) for w in message.warnings],
        level=float(message.level) or 0.95,
        seed=int(message.seed),
    )


_METRIC = ("evaluator", "metric", "n_paired", "note")
_METRIC_OPTIONAL = ("delta", "p_value", "mde", "higher_is_better")
_MCNEMAR = ("b01", "b10", "statistic", "p_value", "method")


def _set_metric(out: run_service_pb2.MetricComparison, m: MetricComparison) -> None:
    _set_fields(out, m, (*_METRIC, *_METRIC_OPTIONAL, "kind"))
    out.n_baseline, out.n_candidate = m.n_a, m.n_b
    for name, value in (("mean_baseline", m.mean_a), ("mean_candidate", m.mean_b)):
        if value is not None:
            setattr(out, name, value)
    set_interval(out.ci, m.ci)
    if m.mcnemar is not None:
        out.mcnemar_p_value = m.mcnemar.p_value
        out.mcnemar.SetInParent()
        _set_fields(out.mcnemar, m.mcnemar, _MCNEMAR)
    out.verdict = _VERDICT_TO_PROTO.get(m.verdict, m.verdict)


def _metric_from_proto(m: run_service_pb2.MetricComparison) -> MetricComparison:
    kind: CompareKind = "passed" if m.kind == "passed" else "number"
    test = None
    if m.HasField("mcnemar"):
        t = m.mcnemar
        method: Literal["exact", "chi2"] = "chi2" if t.method == "chi2" else "exact"
        test = McNemar(int(t.b01), int(t.b10), float(t.statistic), float(t.p_value), method)
    verdict = _known(_VERDICT_FROM_PROTO, str(m.verdict), "MetricComparison.verdict", "verdict")
    return MetricComparison(
        **_fields(m, _METRIC),
        **_opt_fields(m, _METRIC_OPTIONAL),
        kind=kind,
        n_a=int(m.n_baseline),
        n_b=int(m.n_candidate),
        mean_a=_opt_float(m, "mean_baseline"),
        mean_b=_opt_float(m, "mean_candidate"),
        ci=interval_from_proto(m.ci),
        mcnemar=test,
        verdict=verdict,
    )
