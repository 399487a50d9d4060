"""The action table: every RPC the server answers, the action it takes and the resource it
takes it on (the attributes role conditions and rules read as ``resource``).

A test walks the service descriptors and fails when an RPC is missing here, so a new RPC
cannot ship unguarded. ``health`` is not a permission: it is open when ``auth.health: open``
(the default), else any authenticated principal may ask.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evalsi.auth import PERMISSIONS

HEALTH = "health"
"""Liveness: not a permission (see the module doc)."""

CODE_EVALUATORS = frozenset({"code-exec-tests", "compile-check", "lint-check"})
"""Built-in evaluators that execute submitted programs in the sandbox."""

Extract = Callable[[Any], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Act:
    """One RPC's action and how its resource is read from the request message."""

    action: str
    resource: Extract
    lists: bool = False  # an empty project_id means every project the caller can read


def _none(request: Any) -> dict[str, Any]:
    return {"project": "", "labels": {}}


def project_of(request: Any) -> str:
    return str(getattr(request, "project_id", "") or "default")


def _project(request: Any) -> dict[str, Any]:
    return {"project": project_of(request), "labels": {}}


def _run(request: Any) -> dict[str, Any]:
    ref = getattr(request, "id", "") or getattr(request, "run_id", "")
    return {"project": project_of(request), "labels": {}, "run": {"id": str(ref)}}


def _replay_run(request: Any) -> dict[str, Any]:
    refs = [str(r) for r in request.evaluators]
    return {**_run(request), "evaluators": refs, "runs_code": _runs_code(refs)}


def _runs_code(refs: list[str]) -> bool:
    return any(r in CODE_EVALUATORS or ":" in r or r.endswith(".py") for r in refs)


def _evaluators(specs: Any) -> list[str]:
    return [str(e.ref) for e in specs]


def _evaluate(request: Any) -> dict[str, Any]:
    refs = _evaluators(request.evaluators)
    return {"project": project_of(request), "labels": {}, "evaluators": refs,
            "runs_code": _runs_code(refs)}  # fmt: skip


def _evaluate_stream(first: Any) -> dict[str, Any]:
    if first is None:
        return {"project": "default", "labels": {}, "evaluators": [], "runs_code": False}
    config = first.config
    refs = _evaluators(config.evaluators)
    return {"project": project_of(config), "labels": {}, "evaluators": refs,
            "runs_code": _runs_code(refs)}  # fmt: skip


def _create_run(request: Any) -> dict[str, Any]:
    run = request.run
    spec = run.spec
    target: dict[str, Any] = {"kind": spec.target.WhichOneof("kind") or ""}
    model = None
    if spec.target.HasField("model"):
        model = spec.target.model
    elif spec.target.HasField("agent") and spec.target.agent.HasField("model"):
        model = spec.target.agent.model
    if model is not None:
        target.update(connector=model.connector, model=model.model, base_url=model.base_url)
    elif spec.target.HasField("http"):
        target.update(url=spec.target.http.url)
    refs = _evaluators(spec.evaluators)
    judges = {name: {"connector": j.connector, "model": j.model} for name, j in spec.judges.items()}
    code = _runs_code(refs) or target["kind"] == "python" or spec.HasField("environment")
    return {
        "project": project_of(request),
        "labels": dict(run.metadata.labels),
        "name": run.metadata.name,
        "target": target,
        "evaluators": refs,
        "judges": judges,
        "judge": next(iter(judges.values()), {}),
        "dataset": spec.dataset.path,
        "trials": spec.trials or 1,
        "runs_code": bool(code),
    }


def _policy(request: Any) -> dict[str, Any]:
    name = getattr(request, "name", "")
    if hasattr(request, "policy") and not name:
        name = request.policy.metadata.name
    return {"project": project_of(request), "labels": {}, "policy": {"name": str(name)}}


def _binding(request: Any) -> dict[str, Any]:
    return {"project": project_of(request), "labels": {}, "role": getattr(request, "role", "")}


_V1 = "evalsi.v1alpha1."
_TABLE: dict[str, tuple[str, Extract, bool]] = {
    "CatalogService/ListEvaluators": ("catalog.read", _none, False),
    "CatalogService/GetEvaluator": ("catalog.read", _none, False),
    "CatalogService/ListPacks": ("catalog.read", _none, False),
    "CatalogService/ListConnectors": ("catalog.read", _none, False),
    "DatasetService/CreateDataset": ("datasets.write", _project, False),
    "DatasetService/AppendRows": ("datasets.write", _project, False),
    "DatasetService/ListDatasets": ("datasets.read", _project, False),
    "DatasetService/GetDataset": ("datasets.read", _project, False),
    "DatasetService/ListDatasetVersions": ("datasets.read", _project, False),
    # writes a dataset; the handler also decides runs.read / traces.read on the source
    "PromotionService/Promote": ("datasets.write", _project, False),
    "EvaluationService/Evaluate": ("evaluations.run", _evaluate, False),
    "EvaluationService/EvaluateStream": ("evaluations.run", _evaluate_stream, False),
    "IngestService/Ingest": ("results.write", _project, False),
    "IngestService/StartIngest": ("results.write", _project, False),
    "IngestService/AppendIngest": ("results.write", _project, False),
    "IngestService/FinalizeIngest": ("results.write", _project, False),
    "PolicyService/ApplyPolicy": ("policies.write", _policy, False),
    "PolicyService/DeletePolicy": ("policies.write", _policy, False),
    "PolicyService/ListPolicies": ("policies.read", _project, True),
    "PolicyService/GetPolicy": ("policies.read", _policy, False),
    "PolicyService/GetPolicyStats": ("policies.read", _policy, False),
    "ReviewService/ExportReview": ("reviews.read", _run, False),
    "ReviewService/ImportReview": ("reviews.write", _project, False),
    "ReviewService/ListReviews": ("reviews.read", _run, False),
    "RunService/CreateRun": ("runs.create", _create_run, False),
    "RunService/GetRun": ("runs.read", _run, False),
    "RunService/ListRuns": ("runs.read", _project, True),
    "RunService/WatchRun": ("runs.read", _run, False),
    "RunService/ExportBundle": ("runs.read", _run, False),
    "RunService/CancelRun": ("runs.cancel", _run, False),
    "RunService/ResumeRun": ("runs.resume", _run, False),
    "RunService/ReplayRun": ("runs.create", _replay_run, False),
    "RunService/ListRunResults": ("runs.read", _run, False),
    "RunService/ListRunTasks": ("runs.read", _run, False),
    "RunService/GetRunCategories": ("runs.read", _run, False),
    "RunService/CompareRuns": ("runs.read", _project, False),
    "TraceService/ListTraces": ("traces.read", _project, False),
    "TraceService/GetTrace": ("traces.read", _project, False),
    "TraceService/ListSessions": ("traces.read", _project, False),
    "TraceService/ListSpans": ("traces.read", _project, False),
    "TraceService/PostFeedback": ("traces.write", _project, False),
    "AuthService/WhoAmI": ("self.read", _none, False),
    "AuthService/ListPermissions": ("self.read", _none, False),
    "AuthService/ListRoles": ("self.read", _none, False),
    "AuthService/ListProjects": ("self.read", _none, False),
    "AuthService/CreateProject": ("projects.manage", _none, False),
    "AuthService/CreateApiKey": ("access.manage", _binding, False),
    "AuthService/ListApiKeys": ("access.manage", _project, False),
    "AuthService/RevokeApiKey": ("access.manage", _project, False),
    "AuthService/CreateRoleBinding": ("access.manage", _binding, False),
    "AuthService/ListRoleBindings": ("access.manage", _project, False),
    "AuthService/DeleteRoleBinding": ("access.manage", _project, False),
    "AuthService/ListAuditEvents": ("audit.read", _project, True),
}

ACTIONS: dict[str, Act] = {
    _V1 + name: Act(action, extract, lists) for name, (action, extract, lists) in _TABLE.items()
}
ACTIONS.update(
    {
        "grpc.health.v1.Health/Check": Act(HEALTH, _none),
        "grpc.health.v1.Health/List": Act(HEALTH, _none),
        "grpc.health.v1.Health/Watch": Act(HEALTH, _none),
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo": Act("catalog.read", _none),
        "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": Act("catalog.read", _none),
        "opentelemetry.proto.collector.trace.v1.TraceService/Export": Act("traces.write", _none),
        "opentelemetry.proto.collector.logs.v1.LogsService/Export": Act("traces.write", _none),
    }
)

PATHS: Mapping[str, str] = {
    "/metrics": "metrics.read",
    "/openapi.json": "catalog.read",
    "/healthz": HEALTH,
    "/.well-known/evalsi-auth": HEALTH,  # what `evalsi login` needs before it has a token
    # What an MCP client reads to find where to get a token (RFC 9728).
    "/.well-known/oauth-protected-resource": HEALTH,
    "/.well-known/oauth-protected-resource/mcp": HEALTH,
}
"""The HTTP routes that are not RPCs."""

assert all(a.action in PERMISSIONS or a.action == HEALTH for a in ACTIONS.values())
assert all(a in PERMISSIONS or a == HEALTH for a in PATHS.values())
