"""PromotionService: a run's failing tasks or the project's flagged traces appended to a
dataset of the project, as ``evalsi promote`` writes them locally (``runs.promote_run``,
``policies.promote_traces``).

The gate decides ``datasets.write`` on the project (the action table); reading the source is
decided here as well (``runs.read`` or ``traces.read``), so a caller who may only write
datasets cannot copy runs or traces it may not see. Another project's run is not found. The
rows go in one new version built on the latest; ids the latest already holds are skipped, as
the policies' ``DatasetPromoter`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

import orjson

from evalsi._proto.evalsi.v1alpha1 import promotion_service_pb2 as pb
from evalsi.core import NotFoundError, UserError
from evalsi.policies import TraceSelector, promote_traces
from evalsi.runs import PromoteStats, promote_run
from evalsi.server._dataset_files import NAME, DatasetFiles, file_name
from evalsi.server._guard import Gate, _request_info, current_principal
from evalsi.server._state import ServerState
from evalsi.server._traces import nanos_of
from evalsi.store import DEFAULT_PROJECT, TraceStore, check_project_id
from evalsi.traces import normalize, record_row

PROMOTE_PATH: Final = "/evalsi.v1alpha1.PromotionService/Promote"
DEFAULT_LIMIT: Final = 100
MAX_LIMIT: Final = 10_000


class PromotionHandler:
    """Implements the generated ``PromotionService`` protocol."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._traces: TraceStore | None = None

    @property
    def traces(self) -> TraceStore:
        shared = getattr(self.state, "trace_store", None)
        if isinstance(shared, TraceStore):
            return shared
        if self._traces is None:
            self._traces = TraceStore(self.state.store, views=normalize)
        return self._traces

    async def promote(self, request: pb.PromoteRequest, ctx: Any, /) -> pb.PromoteResponse:
        project = check_project_id(request.project_id) if request.project_id else DEFAULT_PROJECT
        if not NAME.fullmatch(request.dataset):
            raise UserError(
                f"dataset: expected a dataset name (lower-case letters, digits, '.', '_', '-'), "
                f"got {request.dataset!r}"
            )
        if not 0 <= request.limit <= MAX_LIMIT:
            raise UserError(f"limit: expected 0 to {MAX_LIMIT}, got {request.limit}")
        source = request.WhichOneof("source")
        if source is None:
            raise UserError("run_id or traces: name what to promote")
        if source == "run_id" and not request.run_id:
            raise UserError("run_id: empty")
        self._decide("runs.read" if source == "run_id" else "traces.read", project, ctx)
        stats = PromoteStats()
        rows = await asyncio.to_thread(self._rows, request, project, source, stats)
        # Appends build on the latest version: one at a time per project, with the policies'.
        async with self.state.dataset_append_lock(project):
            version, added = await asyncio.to_thread(
                self._append, self.state.dataset_files(project), request.dataset, rows
            )
        return pb.PromoteResponse(
            dataset=request.dataset,
            version=version.version if version is not None else "",
            path=version.path if version is not None else "",
            rows_added=added,
            rows_skipped=len(rows) - added,
            scanned=stats.seen,
        )

    def _rows(
        self, request: pb.PromoteRequest, project: str, source: str, stats: PromoteStats
    ) -> list[dict[str, Any]]:
        limit = request.limit or DEFAULT_LIMIT
        evaluators = list(request.evaluators) or None
        if source == "run_id":
            info = self.state.store.get_run(request.run_id, project_id=project)
            return list(
                promote_run(
                    self.state.store,
                    info.id,
                    failing_only=request.failing_only,
                    evaluators=evaluators,
                    trials="first" if request.first_trial_only else "all",
                    limit=limit,
                    stats=stats,
                )
            )
        t = request.traces
        selector = TraceSelector(
            failing=request.failing_only,
            negative_feedback=t.negative_feedback,
            evaluators=tuple(evaluators or ()),
            since_ns=nanos_of(t, "start_time", "traces.startTime"),
            until_ns=nanos_of(t, "end_time", "traces.endTime"),
            service=t.service or None,
            limit=limit,
        )
        traces = self.traces

        def record_of(project: str, trace_id: str) -> dict[str, Any] | None:
            trace = traces.get_trace(project, trace_id)
            return None if trace is None else record_row(trace)

        return list(
            promote_traces(
                self.state.store, traces, project, selector, record_of=record_of, stats=stats
            )
        )

    @staticmethod
    def _append(files: DatasetFiles, name: str, rows: list[dict[str, Any]]) -> tuple[Any, int]:
        """The rows whose id the latest version lacks, appended as one new version."""
        try:
            latest = files.get(name)
        except NotFoundError:
            return (files.create(name, rows), len(rows)) if rows else (None, 0)
        held: set[Any] = set()
        with (files.root / name / file_name(latest.version)).open("rb") as f:
            for line in f:
                with contextlib.suppress(orjson.JSONDecodeError):
                    held.add(orjson.loads(line).get("id"))
        new = [r for r in rows if r.get("id") not in held]
        if not new:
            return latest, 0
        return files.append(name, new, latest.version), len(new)

    def _decide(self, action: str, project: str, ctx: Any) -> None:
        """Reading the source, decided (and audited) as the gate decides a request."""
        access = getattr(self.state, "access", None)
        if access is None or not access.enabled:
            return
        headers = getattr(ctx, "request_headers", None) or {}
        protocol = "grpc" if getattr(ctx, "http_method", "") == "POST" else "rest"
        info = _request_info(PROMOTE_PATH, protocol, headers.items())
        source = str(getattr(ctx, "client_address", "") or "")
        Gate(access).decide(
            current_principal(), action, {"project": project, "labels": {}}, info, source, "promote"
        )


__all__ = ["PromotionHandler"]
