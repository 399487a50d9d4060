"""ReviewService: review files (``evidence._review``) over the API, on the server's store.

Both ways go through a private temporary file, so the file a client gets, and the checks an
import passes, are exactly those of ``evalsi review export | import`` on a local store: export
writes the file with ``export_review`` and streams it in 1 MiB chunks; import writes the sent
bytes and hands them to ``import_review``. Its error messages name the file ``file`` (the
request field), not the server's temporary path.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from connectrpc.request import RequestContext

from evalsi._proto.evalsi.v1alpha1 import review_service_pb2 as pb
from evalsi.core import NotFoundError, UserError
from evalsi.evidence import ImportResult, export_review, import_review, list_reviews
from evalsi.server._runs import BUNDLE_CHUNK, _no_nul, _project, _ref
from evalsi.server._state import ServerState
from evalsi.wire import review_to_proto

FILE = "review.jsonl"


class ReviewHandler:
    """Implements the generated ``ReviewService`` protocol over ``state.store``."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    async def export_review(
        self, request: pb.ExportReviewRequest, ctx: RequestContext[Any, Any], /
    ) -> AsyncIterator[pb.ExportReviewResponse]:
        ref, project = _ref(request.id), _project(request.project_id)
        for name in request.evaluators:
            _no_nul(name, "evaluators")
        limit = request.limit if request.HasField("limit") else None
        if limit is not None and limit < 0:
            raise UserError(f"limit: expected 0 or more items, got {limit}")
        store = self.state.store
        info = await asyncio.to_thread(store.get_run, ref, project_id=project)
        with tempfile.TemporaryDirectory(prefix="evalsi-review-") as tmp:
            path = Path(tmp) / FILE
            await asyncio.to_thread(
                export_review,
                store,
                info.id,
                path,
                evaluators=list(request.evaluators) or None,
                only_failing=request.only_failing,
                limit=limit,
            )
            with path.open("rb") as f:
                while chunk := await asyncio.to_thread(f.read, BUNDLE_CHUNK):
                    yield pb.ExportReviewResponse(data=chunk)

    async def import_review(
        self, request: pb.ImportReviewRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ImportReviewResponse:
        project = _project(request.project_id)
        return await asyncio.to_thread(self._import, request.file, project)

    def _import(self, data: bytes, project: str) -> pb.ImportReviewResponse:
        store = self.state.store
        run_id = _header_run(data)
        if run_id is not None:  # a run of another project is not found, as on every read
            found = store.get_run(run_id, project_id=project)
            if found.id != run_id:
                # A prefix: said here, as import_review says it, before import_review reads
                # it over every project (its answer would tell what other projects hold).
                raise UserError(f"file: run {run_id} is not in this store")
        with tempfile.TemporaryDirectory(prefix="evalsi-review-") as tmp:
            path = Path(tmp) / FILE
            path.write_bytes(data)
            try:
                result = import_review(store, path)
            except NotFoundError:
                raise
            except UserError as e:
                message = e.message.replace(str(path), "file")
                if not message.startswith("file"):
                    message = f"file: {message}"
                raise UserError(message, hint=e.hint) from None
        return _import_to_proto(result)

    async def list_reviews(
        self, request: pb.ListReviewsRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ListReviewsResponse:
        ref, project = _ref(request.id), _project(request.project_id)
        return await asyncio.to_thread(self._list, ref, project)

    def _list(self, ref: str, project: str) -> pb.ListReviewsResponse:
        run_id = self.state.store.get_run(ref, project_id=project).id
        reviews = list_reviews(self.state.store, run_id)
        return pb.ListReviewsResponse(run_id=run_id, reviews=[review_to_proto(r) for r in reviews])


def _header_run(data: bytes) -> str | None:
    """The run the file's header names, or None when it names none (``import_review`` then
    says what is wrong with the file)."""
    try:
        header = orjson.loads(data.split(b"\n", 1)[0])
    except orjson.JSONDecodeError:
        return None
    run_id = header.get("run_id") if isinstance(header, dict) else None
    return run_id if isinstance(run_id, str) and run_id and "\x00" not in run_id else None


def _import_to_proto(result: ImportResult) -> pb.ImportReviewResponse:
    return pb.ImportReviewResponse(
        run_id=result.run_id,
        accepted=[review_to_proto(r) for r in result.accepted],
        refused=[pb.Refused(line=r.line, item=r.item, reason=r.reason) for r in result.refused],
        skipped=result.skipped,
    )
