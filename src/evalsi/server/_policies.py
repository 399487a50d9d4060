"""PolicyService: online evaluation policies applied to the server's trace stream.

A policy arrives as an ``OnlineEvalPolicy`` message or as YAML/JSON text (then errors name its
lines), is checked exactly as ``evalsi watch -f`` checks the file (``evalsi.traces``), with the
server's rules on secrets, and handed to the ``PolicyEngine``, which keeps it in the store so a
restarted server applies it again (``start``). Promoted traces become rows of the server's
datasets (``DatasetPromoter``: content-addressed versions in the policy's project).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from google.protobuf import json_format

from evalsi._proto.evalsi.v1alpha1 import policy_pb2
from evalsi._proto.evalsi.v1alpha1 import policy_service_pb2 as pb
from evalsi.auth import PermissionDenied
from evalsi.core import NotFoundError, UserError
from evalsi.evaluators import PackOptIn
from evalsi.policies import (
    AppliedPolicy,
    PolicyEngine,
    PolicySpec,
    PolicyStats,
    policy_from_dict,
    policy_from_yaml,
)
from evalsi.runs import wire_safe
from evalsi.server._dataset_files import DatasetFiles, file_name
from evalsi.server._egress import check_policy_egress, server_egress
from evalsi.server._grading import grade_in_threads
from evalsi.server._guard import Gate, _request_info, current_principal, readable_projects
from evalsi.server._runs import _check_secrets
from evalsi.server._state import ServerState
from evalsi.store import DEFAULT_PROJECT, check_project_id
from evalsi.wire import message_document, summary_to_proto

SPEC_SOURCE = "policy"
MAX_POLICY_TEXT = 1 << 20
APPLY_PATH = "/evalsi.v1alpha1.PolicyService/ApplyPolicy"


class DatasetPromoter:
    """Promoted rows appended to a dataset of the policy's project (created on first use); a
    row whose id is already in the latest version is not appended again.

    ``lock_of`` gives the project's append lock, shared with every other writer that builds on
    the latest version (``ServerState.dataset_append_lock``); default: one lock of its own.
    """

    def __init__(
        self,
        files_of: Callable[[str], DatasetFiles],
        lock_of: Callable[[str], asyncio.Lock] | None = None,
    ) -> None:
        self.files_of = files_of
        own = asyncio.Lock()
        self.lock_of = lock_of or (lambda _project: own)

    async def promote(self, project: str, dataset: str, row: dict[str, Any]) -> str | None:
        row = wire_safe(row)  # step times as strings: GetDataset sends rows as JSON
        async with self.lock_of(project):  # one append at a time: each builds on the latest
            return await asyncio.to_thread(self._append, self.files_of(project), dataset, row)

    def _append(self, files: DatasetFiles, dataset: str, row: dict[str, Any]) -> str | None:
        try:
            latest = files.get(dataset)
        except NotFoundError:
            return files.create(dataset, [row]).version
        path = files.root / dataset / file_name(latest.version)
        wanted = row.get("id")
        with path.open("rb") as f:
            for line in f:
                with contextlib.suppress(orjson.JSONDecodeError):
                    if orjson.loads(line).get("id") == wanted:
                        return None
        return files.append(dataset, [row], latest.version).version


def default_engine(state: ServerState) -> PolicyEngine:
    """The engine a server runs: its registry, store, packs and judges; promotion into its
    datasets; sync evaluators in grading threads under ``limits.evaluatorSeconds``."""
    return PolicyEngine(
        registry=state.registry,
        store=state.store,
        packs=PackOptIn(state.config.packs),
        judges=state.config.judges,
        promoter=DatasetPromoter(state.dataset_files, state.dataset_append_lock),
        egress=server_egress(state.config),
        grade_sync=grade_in_threads(float(state.config.limits.evaluator_seconds)),
    )


class PolicyHandler:
    """Implements the generated ``PolicyService`` protocol over a ``PolicyEngine``."""

    def __init__(self, state: ServerState, engine: PolicyEngine | None = None) -> None:
        self.state = state
        self.engine = engine if engine is not None else default_engine(state)
        self._started = False
        self._start_lock = asyncio.Lock()

    async def start(self) -> int:
        """Apply the policies kept in the store (once); how many. Called by the app on start,
        and by the first request if the app did not."""
        async with self._start_lock:
            if self._started:
                return 0
            self._started = True
            # the server's rules of today: a policy applied under a wider secrets.allowEnv
            # does not keep a secret the configuration no longer allows
            return await self.engine.restore(check=self.check_stored)

    def check_stored(self, spec: PolicySpec) -> None:
        """The server's rules for a policy kept in the store (re-applied at start, or taken
        from another replica): its secrets, and what replicas support."""
        self._check_secrets(spec)
        self._check_replicas(spec)

    async def stop(self) -> None:
        await self.engine.close()

    # -- RPCs -----------------------------------------------------------------------------------
    async def apply_policy(
        self, request: pb.ApplyPolicyRequest, ctx: Any, /
    ) -> pb.ApplyPolicyResponse:
        await self.start()
        project = _project(request.project_id)
        spec = self._spec(request, project)
        self._check_project(spec, project, ctx)
        applied = await self.engine.apply(spec)
        return pb.ApplyPolicyResponse(policy=_policy(applied), changed=applied.changed)

    async def list_policies(
        self, request: pb.ListPoliciesRequest, ctx: Any, /
    ) -> pb.ListPoliciesResponse:
        await self.start()
        project = _project(request.project_id) if request.project_id else None
        found = self.engine.policies(project)
        if project is None:  # every project the caller may read (all: authentication off)
            readable = readable_projects()
            found = [p for p in found if readable is None or p.spec.project in readable]
        return pb.ListPoliciesResponse(policies=[_policy(p) for p in found])

    async def get_policy(self, request: pb.GetPolicyRequest, ctx: Any, /) -> pb.GetPolicyResponse:
        await self.start()
        applied = self.engine.get(_name(request.name), _project(request.project_id))
        return pb.GetPolicyResponse(policy=_policy(applied))

    async def delete_policy(
        self, request: pb.DeletePolicyRequest, ctx: Any, /
    ) -> pb.DeletePolicyResponse:
        await self.start()
        await self.engine.delete(_name(request.name), _project(request.project_id))
        return pb.DeletePolicyResponse()

    async def get_policy_stats(
        self, request: pb.GetPolicyStatsRequest, ctx: Any, /
    ) -> pb.GetPolicyStatsResponse:
        await self.start()
        stats = self.engine.stats(_name(request.name), _project(request.project_id))
        return pb.GetPolicyStatsResponse(stats=stats_to_proto(stats))

    # -- specs ----------------------------------------------------------------------------------
    def _spec(self, request: pb.ApplyPolicyRequest, project: str) -> PolicySpec:
        has_message = request.HasField("policy")
        if has_message == bool(request.yaml):
            raise UserError(
                "set exactly one of policy (the message) and yaml (the policy as YAML or JSON text)"
            )
        engine = self.engine
        if request.yaml:
            if len(request.yaml) > MAX_POLICY_TEXT:
                raise UserError(f"yaml: the policy is larger than {MAX_POLICY_TEXT} bytes")
            spec = policy_from_yaml(
                request.yaml,
                source=SPEC_SOURCE,
                registry=engine.registry,
                packs=engine.packs,
                project=project,
            )
        else:
            doc = message_document(request.policy)
            spec = policy_from_dict(
                doc, source=SPEC_SOURCE, registry=engine.registry, packs=engine.packs,
                project=project,
            )  # fmt: skip
        self._check_secrets(spec)
        self._check_replicas(spec)
        check_policy_egress(spec, server_egress(self.state.config))
        return spec

    def _check_replicas(self, spec: PolicySpec) -> None:
        """With ``cluster:``, feedback reaches whichever replica it is sent to, and only the
        one holding the ``watch`` lease grades (decision 0019): steps run on feedback after a
        trace completed are refused until feedback is handed across replicas. Feedback sent
        before the trace completes is graded with it, as on one server."""
        if self.state.config.cluster is None:
            return
        if spec.on_feedback:
            raise UserError(
                "spec.onFeedback: steps run on late feedback are not supported with cluster: "
                "configured yet (feedback reaches one replica, the watch lease holder grades)",
                hint="drop spec.onFeedback, or serve without cluster: for this policy",
            )
        if spec.feedback_forces:
            raise UserError(
                "spec.sampling.always: the feedback.negative rule is not supported with "
                "cluster: configured yet (feedback reaches one replica, the watch lease "
                "holder grades)",
                hint="drop the feedback rule from spec.sampling.always",
            )

    def _check_secrets(self, spec: PolicySpec) -> None:
        _check_secrets(spec.raw.get("spec", {}), self.state.config.allowed_env_secrets)

    def _check_project(self, spec: PolicySpec, decided: str, ctx: Any) -> None:
        """The policy lands in the project its ``evals.si/project`` label names, whatever the
        request's ``project_id`` (the one the gate decided) says: a label naming another
        project is decided here as the gate decides a request (else a caller allowed in one
        project could apply a policy, and read its scores and promoted traces, in any other).

        Promoted rows go to the datasets of the policy's project: a policy that promotes needs
        ``datasets.write`` there too."""
        if spec.project != decided:
            self._decide("policies.write", spec.project, spec, ctx)
        if spec.promote is not None:
            try:
                self._decide("datasets.write", spec.project, spec, ctx)
            except (NotFoundError, PermissionDenied):
                raise PermissionDenied(
                    f"spec.promote: promoted rows go to the datasets of project "
                    f"{spec.project!r}; applying this policy needs datasets.write there"
                ) from None

    def _decide(self, action: str, project: str, spec: PolicySpec, ctx: Any) -> None:
        """``action`` on ``project`` for the caller, decided (and audited) as the gate does."""
        access = getattr(self.state, "access", None)
        if access is None or not access.enabled:
            return
        headers = getattr(ctx, "request_headers", None) or {}
        protocol = "grpc" if getattr(ctx, "http_method", "") == "POST" else "rest"
        info = _request_info(APPLY_PATH, protocol, headers.items())
        resource = {"project": project, "labels": {}, "policy": {"name": spec.name}}
        source = str(getattr(ctx, "client_address", "") or "")
        Gate(access).decide(
            current_principal(), action, resource, info, source, f"policy {spec.name}"
        )


def _project(project_id: str) -> str:
    return check_project_id(project_id) if project_id else DEFAULT_PROJECT


def _name(name: str) -> str:
    if not name:
        raise UserError("name: the policy's name is required")
    return name


def policy_to_proto(doc: Mapping[str, Any]) -> policy_pb2.OnlineEvalPolicy:
    message = policy_pb2.OnlineEvalPolicy()
    json_format.ParseDict(dict(doc), message)
    return message


def _policy(applied: AppliedPolicy) -> pb.Policy:
    spec = applied.spec
    out = pb.Policy(
        name=spec.name,
        project_id=spec.project,
        run_id=applied.run_id,
        spec=policy_to_proto(spec.raw),
        spec_hash=spec.spec_hash,
    )
    out.apply_time.FromNanoseconds(int(applied.applied_at * 1e9))
    return out


def stats_to_proto(stats: PolicyStats) -> pb.PolicyStats:
    return pb.PolicyStats(
        name=stats.name,
        project_id=stats.project,
        selected=stats.selected,
        sampled=stats.sampled,
        evaluated=stats.evaluated,
        skipped=stats.skipped,
        errors=stats.errors,
        alerts_fired=stats.alerts_fired,
        alert_failures=stats.alert_failures,
        promoted=stats.promoted,
        window=[summary_to_proto(m) for m in stats.window],
        window_seconds=stats.window_seconds,
        firing=stats.firing,
        outcomes=stats.outcomes,
        forced_by_feedback=stats.forced_by_feedback,
        sink_sent=stats.sink_sent,
        sink_failures=stats.sink_failures,
    )
