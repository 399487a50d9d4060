"""Runs to and from proto: a stored run (or a ``RunResult``) as the ``Run`` message, and back.

A ``Run`` carries the figures in typed fields (metrics, gates, status, records) and everything
else ``RunResult.to_dict()`` reports (tasks, trials, infra errors, stopped reason, spend,
pass@k samples, judges, the dry-run plan) in ``details``, so a client rebuilds the same
``RunResult`` the embedded ``evalsi.run`` returns (without a store attached).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2, score_pb2
from evalsi.core import MetricSummary, RunInfo
from evalsi.runs import (
    CategoryMetrics,
    RunResult,
    gates_exit_code,
    isolation_from_dicts,
    summaries_from_dicts,
)
from evalsi.wire._json import (
    _EXACT_INT_LIMIT,
    _opt_seconds,
    _set_seconds,
    _set_struct,
    struct_from_proto,
)
from evalsi.wire._results import summary_from_proto, summary_to_proto
from evalsi.wire._warnings import (
    cause_to_proto,
    causes_from_proto,
    warning_to_proto,
    warnings_from_proto,
)

# The core's gate verdicts and the wire's (score.proto: "pass", "fail", "undecided").
_VERDICT_TO_PROTO = {"passed": "pass", "failed": "fail", "inconclusive": "undecided"}
_VERDICT_FROM_PROTO = {v: k for k, v in _VERDICT_TO_PROTO.items()}
# Summary keys with a typed field of their own; the rest goes to ``details``.
_EXPLAINED = ("warnings", "infra_error_causes", "target_error_causes")
_TYPED = ("metrics", "gates", *_EXPLAINED)
# What ``RunResult.to_dict()`` reads from the run's results, not from the run: a client lists
# them from ListRunResults, so they are not carried.
_FROM_RESULTS = ("failures",)
EXIT_CANNOT_JUDGE = 2
EXIT_INFRA = 3


@dataclass(frozen=True, slots=True)
class Progress:
    """Tasks finished in this session of a run, of ``total`` (0 when unknown)."""

    done: int = 0
    total: int = 0
    infra_errors: int = 0


def run_to_proto(
    info: RunInfo,
    *,
    status: str | None = None,
    progress: Progress | None = None,
    metrics: Sequence[MetricSummary] | None = None,
    project_id: str = "",
) -> run_service_pb2.Run:
    """A stored run as a ``Run``.

    ``status`` overrides the stored one (a server reports ``queued`` runs it holds back);
    ``metrics`` are partial metrics of a running run (the stored summary's otherwise).
    """
    summary = dict(info.summary or {})
    shown = status or info.status
    out = run_service_pb2.Run(
        id=info.id,
        name=info.name,
        kind=info.kind,
        status=shown,
        records=info.records,
        error=info.error or "",
        project_id=project_id or info.project_id,
        created_by=info.created_by,
    )
    _set_seconds(out.create_time, info.created_at)
    if info.finished_at is not None:
        _set_seconds(out.finish_time, info.finished_at)
    if metrics is None:
        metrics = summaries_from_dicts(summary.get("metrics") or [])
    out.metrics.extend(summary_to_proto(m) for m in metrics)
    gates = list(summary.get("gates") or [])
    out.gates.extend(gate_to_proto(g) for g in gates)
    _set_explained(out, summary)
    out.exit_code = _exit_code(info.kind, shown, gates)
    if progress is not None:
        out.progress.tasks_done = progress.done
        out.progress.tasks_total = progress.total
        out.progress.infra_errors = progress.infra_errors
    dataset = summary.get("dataset") or {}
    if dataset.get("version"):
        out.dataset_version = str(dataset["version"])
    _set_struct(out.spec, _jsonable(info.spec))
    details = {k: v for k, v in summary.items() if k not in _TYPED}
    if info.spec.get("evaluators") is not None:
        details["evaluators"] = info.spec["evaluators"]
    _set_struct(out.details, _jsonable(details))
    return out


def run_result_to_proto(result: RunResult, *, project_id: str = "") -> run_service_pb2.Run:
    """A ``RunResult`` (a finished run, or a dry run's plan) as a ``Run``."""
    # Without its store: the failing results are the client's to list (ListRunResults), so
    # the server does not read the run's results to fill a key it leaves out anyway.
    d = dataclasses.replace(result, store=None).to_dict()
    out = run_service_pb2.Run(
        id=result.run_id,
        kind="run",
        status=result.status,
        records=result.records,
        exit_code=result.exit_code,
        project_id=project_id,
    )
    out.metrics.extend(summary_to_proto(m) for m in result.metrics)
    out.gates.extend(gate_to_proto(g) for g in result.gates)
    _set_explained(out, d)
    if result.dataset_version:
        out.dataset_version = result.dataset_version
    left_out = ("run_id", "status", "records", *_TYPED, *_FROM_RESULTS)
    details = {k: v for k, v in d.items() if k not in left_out}
    details.setdefault("dataset", {"source": result.dataset_source, "version": None})
    details.setdefault("evaluators", result.evaluators)
    details["pass_k_samples"] = result.pass_k_samples
    _set_struct(out.details, _jsonable(details))
    return out


def run_from_proto(message: run_service_pb2.Run) -> RunResult:
    """The ``RunResult`` a ``Run`` describes, as the embedded ``evalsi.run`` returns it.

    No store is attached (``store=None``): read results with the client's ListRunResults.
    """
    details = struct_from_proto(message.details)
    dataset = details.get("dataset")
    dataset = dataset if isinstance(dataset, dict) else {}
    plan = details.get("plan")
    return RunResult(
        run_id=str(message.id),
        status=str(message.status),
        records=int(message.records),
        metrics=[summary_from_proto(m) for m in message.metrics],
        dataset_source=str(dataset.get("source") or ""),
        dataset_version=str(message.dataset_version) or None,
        bad_records=_int(details.get("bad_records")),
        evaluators=[dict(e) for e in _list(details.get("evaluators")) if isinstance(e, dict)],
        store=None,
        gates=[gate_from_proto(g) for g in message.gates],
        trials=_int(details.get("trials"), 1),
        tasks={str(k): _int(v) for k, v in _dict(details.get("tasks")).items()},
        infra_errors=_int(details.get("infra_errors")),
        stopped_reason=_opt_str(details.get("stopped_reason")),
        spend=_dict(details.get("spend")),
        pass_k_samples={
            str(k): {str(a): _int(b) for a, b in _dict(v).items()}
            for k, v in _dict(details.get("pass_k_samples")).items()
        },
        plan=plan if isinstance(plan, dict) else None,
        isolation=isolation_from_dicts(details.get("isolation")),
        warnings=_explained(message, details, "warnings"),
        infra_error_causes=_explained(message, details, "infra_error_causes"),
        target_error_causes=_explained(message, details, "target_error_causes"),
    )


def _set_explained(out: run_service_pb2.Run, summary: Mapping[str, Any]) -> None:
    """The warnings and failure causes of a summary (or ``to_dict()``) in their typed fields."""
    out.warnings.extend(warning_to_proto(w) for w in _list(summary.get("warnings")))
    for name in ("infra_error_causes", "target_error_causes"):
        getattr(out, name).extend(cause_to_proto(c) for c in _list(summary.get(name)))


def _explained(
    message: run_service_pb2.Run, details: Mapping[str, Any], name: str
) -> list[dict[str, Any]]:
    """A ``Run``'s warnings or causes as dicts: the typed field, else (from a server of
    before the field) what ``details`` carried under the same name."""
    field = getattr(message, name)
    if len(field):
        if name == "warnings":
            return warnings_from_proto(field)
        return causes_from_proto(field)
    return [dict(v) for v in _list(details.get(name)) if isinstance(v, dict)]


def gate_to_proto(g: Mapping[str, Any]) -> score_pb2.GateResult:
    """A gate verdict as ``evaluate_gates`` reports it, as a ``GateResult``."""
    gate = score_pb2.GateResult(
        expr=str(g.get("expr", "")),
        passed=bool(g.get("passed")),
        verdict=_VERDICT_TO_PROTO.get(str(g.get("verdict")), str(g.get("verdict") or "")),
        reason=str(g.get("reason") or ""),
    )
    value = g.get("value")
    if isinstance(value, numbers.Real):  # bools read as 1/0: the wire's value is a double
        gate.value = float(value)
    return gate


def gate_from_proto(g: score_pb2.GateResult) -> dict[str, Any]:
    """A ``GateResult`` as ``evaluate_gates`` reports a verdict (``passed`` None when
    undecided)."""
    verdict = _VERDICT_FROM_PROTO.get(str(g.verdict), str(g.verdict))
    return {
        "expr": str(g.expr),
        "passed": None if verdict == "inconclusive" else bool(g.passed),
        "verdict": verdict,
        "value": float(g.value) if g.HasField("value") else None,
        "reason": str(g.reason),
    }


def _exit_code(kind: str, status: str, gates: Sequence[Mapping[str, Any]]) -> int:
    """What ``evalsi run`` exits with for a run in this state (0 while it is not finished)."""
    if status in ("running", "queued", "planned"):
        return 0
    if status == "failed":  # nothing could be judged (bad data, every call failed), as RunResult
        return EXIT_CANNOT_JUDGE
    if status != "done":
        return EXIT_INFRA if kind == "run" else 0
    return gates_exit_code(gates)


def _jsonable(value: Any) -> Any:
    """``value`` as a ``Struct`` can hold it: integers beyond 2**53 become strings (as proto3
    JSON writes int64), anything else that is not JSON becomes its ``str``."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value) if abs(int(value)) <= _EXACT_INT_LIMIT else str(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def _int(value: Any, default: int = 0) -> int:
    return int(value) if isinstance(value, int | float) else default


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def run_info_from_proto(run: run_service_pb2.Run) -> RunInfo:
    """A ``Run`` message as a ``RunInfo``, as ``evalsi runs`` prints it."""
    details = struct_from_proto(run.details)
    spec = struct_from_proto(run.spec)
    result = run_from_proto(run)
    summary: dict[str, Any] = {
        "metrics": [summary_from_proto(m).to_dict() for m in run.metrics],
        "gates": result.gates,
        "dataset": details.get("dataset")
        or {"source": _dataset_source(spec), "version": run.dataset_version or None},
        "bad_records": details.get("bad_records", 0),
        "warnings": result.warnings,
        "infra_errors": details.get("infra_errors", 0),
        "infra_error_causes": result.infra_error_causes,
        "target_error_causes": result.target_error_causes,
    }
    manifest = details.get("manifest")
    return RunInfo(
        id=str(run.id),
        kind=str(run.kind),
        status=str(run.status),
        created_at=_opt_seconds(run, "create_time") or 0.0,
        name=str(run.name),
        finished_at=_opt_seconds(run, "finish_time"),
        records=int(run.records),
        spec=spec,
        manifest=manifest if isinstance(manifest, dict) else None,
        summary=summary,
        error=str(run.error) or None,
        project_id=str(run.project_id) or "default",
        created_by=str(run.created_by),
    )


def _dataset_source(spec: dict[str, Any]) -> str:
    inner = spec.get("spec")
    if isinstance(inner, dict) and isinstance(inner.get("dataset"), dict):
        return str(inner["dataset"].get("path", "?"))
    return str(spec.get("data", "?"))


def category_to_proto(category: CategoryMetrics) -> run_service_pb2.RunCategory:
    out = run_service_pb2.RunCategory(key=category.key, value=category.value)
    out.metrics.extend(summary_to_proto(m) for m in category.metrics)
    _set_struct(out.pass_k_samples, _jsonable(category.pass_k_samples))
    return out


def category_from_proto(message: run_service_pb2.RunCategory) -> CategoryMetrics:
    return CategoryMetrics(
        key=str(message.key),
        value=str(message.value),
        metrics=[summary_from_proto(m) for m in message.metrics],
        pass_k_samples={
            str(k): {str(a): _int(b) for a, b in _dict(v).items()}
            for k, v in struct_from_proto(message.pass_k_samples).items()
        },
    )
