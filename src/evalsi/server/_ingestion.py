"""IngestService: results computed elsewhere, stored as a Score run (``runs._ingest``), in one
call (Ingest) or in chunks (StartIngest, AppendIngest, FinalizeIngest).

Every call is idempotent on the caller's client key. The run id is derived from (project, key),
so no table maps keys to runs: a start that finds its run returns it (``already_finalized``
once it is done, so a client stops there), results are task-keyed upserts, and the records file
keeps one part per chunk, replaced when the chunk comes again (``_ingestion_parts``): a chunk
sent twice is stored once. The calls on one run are serialised by a lock per run in this
process; the store's unique run id settles two servers that start the same key at once.
Store and file work runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.evalsi.v1alpha1 import ingest_service_pb2 as pb
from evalsi.core import NotFoundError, RunError, RunStatus, UserError
from evalsi.datasets import FieldMap, open_dataset
from evalsi.runs import (
    RunRow,
    conclude_ingest,
    ingest_batches,
    ingest_run_id,
    ingest_spec,
    is_ingested,
)
from evalsi.server._guard import principal_id
from evalsi.server._ingestion_parts import MISSING_EXAMPLES, IngestFiles, Part
from evalsi.server._ingestion_request import (
    Chunk,
    Header,
    named_evaluators,
    read_chunk,
    read_header,
)
from evalsi.server._state import ServerState
from evalsi.store import DEFAULT_PROJECT, RunInfo, check_project_id
from evalsi.wire import run_to_proto

T = TypeVar("T")

_RUN_ID = re.compile(r"ing-[0-9a-f]{24}")
OPEN = ("running", "interrupted")
"""Statuses of an ingest that takes records: started here, or by a server since stopped."""
READ_BATCH = 4096


class IngestHandler:
    """Implements the generated ``IngestService`` protocol over ``ServerState``."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        self._locks: weakref.WeakValueDictionary[str, threading.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._guard = threading.Lock()

    # -- RPCs -----------------------------------------------------------------------------------
    async def ingest(self, request: pb.IngestRequest, ctx: Any, /) -> pb.IngestResponse:
        by = principal_id(self._state)
        return await self._off_loop(functools.partial(self._ingest, created_by=by), request)

    async def start_ingest(
        self, request: pb.StartIngestRequest, ctx: Any, /
    ) -> pb.StartIngestResponse:
        by = principal_id(self._state)
        return await self._off_loop(functools.partial(self._start, created_by=by), request)

    async def append_ingest(
        self, request: pb.AppendIngestRequest, ctx: Any, /
    ) -> pb.AppendIngestResponse:
        return await self._off_loop(self._append_request, request)

    async def finalize_ingest(
        self, request: pb.FinalizeIngestRequest, ctx: Any, /
    ) -> pb.FinalizeIngestResponse:
        return await self._off_loop(self._finalize_request, request)

    # -- the calls, in a worker thread ----------------------------------------------------------
    def _ingest(self, request: pb.IngestRequest, *, created_by: str) -> pb.IngestResponse:
        header = read_header(request, named_evaluators(request.records))
        chunk = read_chunk(request.records, header.evaluators, self._state.config.limits)
        run_id = ingest_run_id(header.project_id, header.client_key)
        with self._lock(run_id):
            info = self._open(header, run_id, created_by)
            if info.status == RunStatus.DONE:
                return pb.IngestResponse(run=run_to_proto(info), already_finalized=True)
            self._append(info, 0, chunk)
            info = self._finalize(info)
        return pb.IngestResponse(run=run_to_proto(info))

    def _start(self, request: pb.StartIngestRequest, *, created_by: str) -> pb.StartIngestResponse:
        header = read_header(request)
        run_id = ingest_run_id(header.project_id, header.client_key)
        with self._lock(run_id):
            info = self._open(header, run_id, created_by)
        return pb.StartIngestResponse(
            run_id=info.id,
            already_finalized=info.status == RunStatus.DONE,
            run=run_to_proto(info),
        )

    def _append_request(self, request: pb.AppendIngestRequest) -> pb.AppendIngestResponse:
        info = self._ingested(request.run_id, request.project_id)
        _check_open(info)
        if request.offset < 0:
            raise UserError(f"offset: {request.offset} is negative; the first chunk starts at 0")
        chunk = read_chunk(request.records, info.evaluators, self._state.config.limits)
        with self._lock(info.id):
            info = self._ingested(info.id, info.project_id)  # as it is now, under the lock
            received = self._append(info, request.offset, chunk)
        return pb.AppendIngestResponse(run_id=info.id, records=received)

    def _finalize_request(self, request: pb.FinalizeIngestRequest) -> pb.FinalizeIngestResponse:
        info = self._ingested(request.run_id, request.project_id)
        with self._lock(info.id):
            info = self._ingested(info.id, info.project_id)
            if info.status == RunStatus.DONE:  # a retried finalize whose answer was lost
                return pb.FinalizeIngestResponse(run=run_to_proto(info), already_finalized=True)
            info = self._finalize(info)
        return pb.FinalizeIngestResponse(run=run_to_proto(info))

    # -- a run's life ---------------------------------------------------------------------------
    def _open(self, header: Header, run_id: str, created_by: str) -> RunInfo:
        """The run of ``header``'s key: found, or created (an open Score run, no record yet)
        recording ``created_by``, the caller's provider/subject (the run's first caller: the
        same key again later does not change it)."""
        store = self._state.store
        info = self._find(run_id, header.project_id)
        if info is None:
            files = IngestFiles(self._state.config.data_dir, run_id)
            spec = ingest_spec(
                header.evaluators,
                data=str(files.path),
                client_key=header.client_key,
                source=header.source,
            )
            row = RunRow(
                store,
                kind="score",
                spec=spec,
                name=header.name,
                run_id=run_id,
                project_id=header.project_id,
                created_by=created_by,
            )
            try:
                row.open()
            except Exception:
                # Another server on this store created it first: the unique id refused ours.
                info = self._find(run_id, header.project_id)
                if info is None:
                    raise
            else:
                info = store.get_run(run_id, project_id=header.project_id)
        if info.evaluators != header.evaluators:
            names = ", ".join(str(e.get("name")) for e in info.evaluators)
            raise ConnectError(
                Code.FAILED_PRECONDITION,
                f"client_key: {header.client_key!r} names run {run_id}, whose evaluators were "
                f"declared otherwise ({names}); the same key must send the same evaluators "
                "(use another key for another ingest)",
            )
        return info

    def _append(self, info: RunInfo, offset: int, chunk: Chunk) -> int:
        """Store one chunk at ``offset`` (results, then its records part); the records received."""
        _check_open(info)
        count = len(chunk.lines)
        most = self._state.config.limits.max_tasks_per_run
        if offset + count > most:
            raise UserError(
                f"records: records {offset}..{offset + count - 1} go past this server's limit "
                f"of {most} records per run (limits.maxTasksPerRun in its evalsi.yaml)"
            )
        store = self._state.store
        files = IngestFiles(self._state.config.data_dir, info.id)
        files.check(offset, count)
        if info.status != RunStatus.RUNNING:  # a server since stopped owned it: ours now
            store.reopen_run(info.id)
        store.write_batches(info.id, ingest_batches(info.evaluators, offset, chunk.results))
        part = Part(offset, count, chunk.trials, chunk.missing, tuple(chunk.missing_examples))
        files.write(part, chunk.lines)
        received = files.received()
        store.set_progress(info.id, received)
        return received

    def _finalize(self, info: RunInfo) -> RunInfo:
        """Join the records, summarise the stored results as a Score run does, end it done."""
        store = self._state.store
        files = IngestFiles(self._state.config.data_dir, info.id)
        parts = files.parts()
        if not parts:
            raise ConnectError(
                Code.FAILED_PRECONDITION,
                f"run {info.id} holds no record yet: append records (AppendIngest) before "
                "finalizing it",
            )
        path = files.join(parts)
        dataset = open_dataset(str(path), fields=FieldMap())
        count = sum(len(batch) for batch in dataset.iter_batches(READ_BATCH))
        if count != parts[-1].end or dataset.version is None:
            raise RunError(
                f"the records of run {info.id} read back as {count}, not {parts[-1].end}"
            )
        warnings = [w.to_dict() for w in dataset.warnings]
        missing = sum(p.missing for p in parts)
        if missing:
            examples = [e for p in parts for e in p.missing_examples][:MISSING_EXAMPLES]
            warnings.append(
                {
                    "kind": "missing_results",
                    "message": f"{missing} (record, evaluator) pair(s) came without a result: "
                    "stored as skipped, they count in no metric's n",
                    "count": missing,
                    "examples": examples,
                }
            )
        trials = max(p.trials for p in parts)
        summary, manifest = conclude_ingest(
            store,
            info.id,
            info.spec,
            records=count,
            trials=trials,
            version=dataset.version,
            warnings=warnings,
        )
        row = RunRow(
            store, kind=info.kind, spec=info.spec, name=info.name, project_id=info.project_id
        )
        row.adopt(info.id)
        row.finish(RunStatus.DONE, records=count, summary=summary, manifest=manifest)
        files.discard_parts()
        return store.get_run(info.id, project_id=info.project_id)

    # -- helpers --------------------------------------------------------------------------------
    def _find(self, run_id: str, project_id: str) -> RunInfo | None:
        try:
            return self._state.store.get_run(run_id, project_id=project_id)
        except NotFoundError:
            return None

    def _ingested(self, run_id: str, project_id: str) -> RunInfo:
        """The ingest run ``run_id`` of ``project_id`` (404 when there is none)."""
        project = project_id or DEFAULT_PROJECT
        try:
            check_project_id(project)
        except UserError as e:
            e.message = f"project_id: {e.message}"
            e.args = (e.message,)
            raise
        if not _RUN_ID.fullmatch(run_id):
            raise UserError(
                f"run_id: expected the id StartIngest answered (ing- and 24 hex digits), got "
                f"{run_id[:80]!r}"
            )
        info = self._state.store.get_run(run_id, project_id=project)
        if not is_ingested(info.spec):
            raise UserError(f"run_id: run {run_id} was not started by StartIngest")
        return info

    @contextlib.contextmanager
    def _lock(self, run_id: str) -> Iterator[None]:
        """One call at a time on a run (in this process)."""
        with self._guard:
            lock = self._locks.get(run_id)
            if lock is None:
                lock = self._locks[run_id] = threading.Lock()
        with lock:
            yield

    async def _off_loop(self, fn: Callable[[Any], T], request: Any) -> T:
        """``fn(request)`` in a worker thread (an in-memory SQLite store serves its own thread
        only: inline there)."""
        if self._state.store.any_thread:
            return await asyncio.to_thread(fn, request)
        return fn(request)


def _check_open(info: RunInfo) -> None:
    if info.status == RunStatus.DONE:
        raise ConnectError(
            Code.FAILED_PRECONDITION,
            f"run {info.id} is finalized: it takes no more records (start another ingest, "
            "with another client_key)",
        )
    if info.status not in OPEN:
        raise ConnectError(
            Code.FAILED_PRECONDITION, f"run {info.id} is {info.status}: it takes no more records"
        )


__all__ = ["IngestHandler"]
