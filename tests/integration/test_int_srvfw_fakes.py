"""Small service implementations the server-framework tests mount through
``build_app(services=...)``: they answer from the request alone, and fail on purpose for
record ids ``bad`` (UserError), ``missing`` (NotFoundError), ``down`` (RunError) and ``boom``
(a bug: RuntimeError). No tests here; the other ``test_int_srvfw_*`` modules import this."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as cat
from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as rs
from evalsi._proto.evalsi.v1alpha1.catalog_service_connect import CatalogServiceASGIApplication
from evalsi._proto.evalsi.v1alpha1.evaluation_service_connect import (
    EvaluationServiceASGIApplication,
)
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceASGIApplication
from evalsi.core import NotFoundError, RunError, UserError
from evalsi.packs import builtin_registry
from evalsi.server._state import ServerState
from tests.support.server_state import server_state

SECRET = "secret-internal-detail-42"


def _fail_for(record_id: str) -> None:
    if record_id == "bad":
        raise UserError("record 'bad' is bad", hint="fix it")
    if record_id == "missing":
        raise NotFoundError("no run 'missing'")
    if record_id == "down":
        raise RunError("the store is down")
    if record_id == "boom":
        raise RuntimeError(SECRET)


class FakeEvaluation:
    calls = 0

    async def evaluate(self, request: Any, ctx: Any, /) -> Any:
        FakeEvaluation.calls += 1
        for record in request.records:
            _fail_for(record.id)
        out = ev.EvaluateResponse(run_id="run-1", records=len(request.records), status="done")
        for record in request.records:
            result = out.results.add(record_id=record.id, evaluator="exact-match")
            score = result.scores.add(name="exact_match")
            score.passed = record.output.text == record.reference.text
        return out

    async def evaluate_stream(
        self, requests: AsyncIterator[Any], ctx: Any, /
    ) -> AsyncIterator[Any]:
        n = 0
        async for request in requests:
            n += len(request.records)
            yield ev.EvaluateStreamResponse(run_id="run-s")
        yield ev.EvaluateStreamResponse(run_id="run-s", dataset_version=f"n={n}")


class FakeRuns:
    async def get_run(self, request: Any, ctx: Any, /) -> Any:
        _fail_for(request.id)
        return rs.GetRunResponse(run=rs.Run(id=request.id, status="done"))

    async def list_runs(self, request: Any, ctx: Any, /) -> Any:
        size = request.page_size or 20
        runs = [rs.Run(id=f"r{i}", status=request.status or "done") for i in range(size)]
        return rs.ListRunsResponse(runs=runs, next_page_token=request.page_token)

    async def watch_run(self, request: Any, ctx: Any, /) -> AsyncIterator[Any]:
        _fail_for(request.id)
        for done in (1, 2, 3):
            run = rs.Run(id=request.id, status="running" if done < 3 else "done")
            run.progress.tasks_done = done
            run.progress.tasks_total = 3
            yield rs.WatchRunResponse(run=run)
        if request.id == "late-boom":
            raise RuntimeError(SECRET)

    async def cancel_run(self, request: Any, ctx: Any, /) -> Any:
        _fail_for(request.id)
        return rs.CancelRunResponse(run=rs.Run(id=request.id, status="cancelled"))

    async def resume_run(self, request: Any, ctx: Any, /) -> Any:
        return rs.ResumeRunResponse(run=rs.Run(id=request.id, status="running"))

    async def replay_run(self, request: Any, ctx: Any, /) -> Any:
        return rs.ReplayRunResponse(run=rs.Run(id="replay", status="running"))

    async def create_run(self, request: Any, ctx: Any, /) -> Any:
        return rs.CreateRunResponse(run=rs.Run(id="new", name=request.run.metadata.name))

    async def list_run_results(self, request: Any, ctx: Any, /) -> Any:
        return rs.ListRunResultsResponse()

    async def list_run_tasks(self, request: Any, ctx: Any, /) -> Any:
        return rs.ListRunTasksResponse()

    async def get_run_categories(self, request: Any, ctx: Any, /) -> Any:
        return rs.GetRunCategoriesResponse()

    async def export_bundle(self, request: Any, ctx: Any, /) -> AsyncIterator[Any]:
        _fail_for(request.id)
        yield rs.ExportBundleResponse(path="metadata.json", data=b"{}", size=2, run_id=request.id)

    async def compare_runs(self, request: Any, ctx: Any, /) -> Any:
        return rs.CompareRunsResponse(baseline=request.baseline, candidate=request.candidate)


class FakeCatalog:
    async def list_evaluators(self, request: Any, ctx: Any, /) -> Any:
        return cat.ListEvaluatorsResponse()

    async def get_evaluator(self, request: Any, ctx: Any, /) -> Any:
        if request.ref != "builtin/exact-match@1.0.0":
            raise NotFoundError(f"no evaluator {request.ref!r}")
        out = cat.GetEvaluatorResponse()
        out.evaluator.description = request.ref
        return out

    async def list_packs(self, request: Any, ctx: Any, /) -> Any:
        return cat.ListPacksResponse(packs=[cat.Pack(name="core")])

    async def list_connectors(self, request: Any, ctx: Any, /) -> Any:
        return cat.ListConnectorsResponse()


def fake_services() -> list[tuple[Any, Any]]:
    return [
        (EvaluationServiceASGIApplication, FakeEvaluation()),
        (RunServiceASGIApplication, FakeRuns()),
        (CatalogServiceASGIApplication, FakeCatalog()),
    ]


def fake_state(tmp: Path, *, max_body_bytes: int = 64 * 1024) -> ServerState:
    return server_state(
        tmp,
        registry=builtin_registry(entry_points=False),
        runs=False,
        max_body_bytes=max_body_bytes,
    )
