"""The server's run scheduler: every Run executes in its own thread with its own event loop.

Why threads: a CPU-heavy grader must not stall the API's event loop, and connector HTTP
sessions are kept per loop, so each run gets ``asyncio.run`` in a thread of its own.

Queueing: at most ``config.max_concurrent_runs`` runs execute at once. A run over the limit is
stored ``queued`` (so a restart resumes it too) and waits, before its first task, for a slot in
FIFO order; it is marked ``running`` in the store when it gets one.

Ownership and restarts: a run created here stores ``origin: {server: true, host, project_id}``
in its spec and the run's project. The store records which process owns a queued or running run
and reads it ``interrupted`` once that owner is gone (a dead pid on the same host, a heartbeat
older than 90 s from another host). On start, every ``kind == "run"`` server run that reads
``interrupted`` is claimed (``store.claim_run``: atomic, one process wins) and the claimed ones
are resumed with ``execute_run(resume=...)``: tasks already stored are kept, only the missing
ones run. Any server sharing the store may so pick up another server's orphan, not only this
host's: that is the point of the claim, and the heartbeat keeps a live server's runs its own.

Cancel: the run's task is cancelled on its own loop; it ends ``cancelled`` in the store (results
stored so far are kept) and ``resume`` completes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalsi.connectors import Resilience
from evalsi.core import MetricSummary, RunError, UserError
from evalsi.runs import (
    RunResult,
    RunSpec,
    bind_all,
    cassettes_of,
    check_branch,
    execute_run,
    replay_spec,
    stored_spec,
    summarize_stored,
)
from evalsi.server._egress import check_run_egress, server_egress
from evalsi.server._run_checks import servable
from evalsi.server._state import DEFAULT_PROJECT, ServerState
from evalsi.store import RunInfo, SqlStore, new_run_id
from evalsi.wire import Progress

if TYPE_CHECKING:
    from evalsi.agents import Replay

log = logging.getLogger("evalsi.server.runs")

PROGRESS_EVERY_S = 0.25
"""WatchRun sends at most this often (progress of a fast run changes many times a second)."""
METRICS_EVERY_S = 2.0
"""Partial metrics of a running run are recomputed from the store at most this often."""
CANCEL_WAIT_S = 30.0
STOP_WAIT_S = 30.0
LIVE = ("queued", "running")
RESUMABLE = ("stopped", "cancelled", "interrupted", "incomplete", "failed")
FINISHED = ("done", *RESUMABLE)
STATUSES = (*LIVE, *FINISHED)
"""Every status the store gives a run (ListRuns filters on them)."""


@dataclass
class RunSnapshot:
    """A run as WatchRun/GetRun show it: the stored row, plus what only the scheduler knows."""

    info: RunInfo
    status: str
    progress: Progress | None = None
    metrics: list[MetricSummary] | None = None  # partial metrics while running
    final: bool = False


@dataclass
class _Live:
    """A run this server is executing (or holding in its queue)."""

    run_id: str
    spec: RunSpec
    state: str = "starting"  # starting -> queued -> running -> finished
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    cancel_requested: bool = False
    holds_slot: bool = False
    grant: asyncio.Future[None] | None = None
    done: int = 0
    total: int = 0
    infra: int = 0
    stored: asyncio.Future[None] | None = None  # on the API loop
    finished: asyncio.Future[None] | None = None  # on the API loop
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    partial: tuple[float, list[MetricSummary]] | None = None
    evaluators: list[tuple[str, str, Any]] | None = None
    replay: Replay | None = None  # the cassettes a replay plays


class RunManager:
    """Creates, queues, executes, cancels, resumes and watches the server's runs."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.host = socket.gethostname()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._live: dict[str, _Live] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._waiting: deque[_Live] = deque()
        self._active = 0
        self._tasks: Counter[str] = Counter()
        self._judge_hits = 0
        self._stopping = False
        self._adopter: asyncio.Task[None] | None = None
        if state.config.cluster is not None:  # every replica of a cluster keeps the same lease
            from evalsi.store import set_lease

            set_lease(state.config.cluster.lease_ttl_s)

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> list[str]:
        """Claim and resume the server runs whose process is gone; their ids (oldest first).
        With a cluster, keep doing it every third of the lease: a replica that stops has its
        runs adopted by another within about ``leaseTtl``."""
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        resumed = await self._adopt()
        cluster = self.state.config.cluster
        if cluster is not None and self._adopter is None:
            self._adopter = asyncio.create_task(
                self._adopt_forever(cluster.lease_ttl_s / 3), name="evalsi-run-adopter"
            )
        return resumed

    async def _adopt_forever(self, every_s: float) -> None:
        while not self._stopping:
            await asyncio.sleep(every_s)
            try:
                for run_id in await self._adopt():
                    log.info("adopted run %s from a server replica now gone", run_id)
            except Exception:
                log.exception("looking for runs to adopt failed")

    async def _adopt(self) -> list[str]:
        resumed: list[str] = []
        for info in await asyncio.to_thread(self._orphans):
            try:
                claimed = await asyncio.to_thread(self.state.store.claim_run, info.id)
                if claimed is None:
                    continue  # another server sharing the store took it first
                spec = servable(self.state.config, stored_spec(claimed))
                await self._launch(spec, resume=info.id, run_id=info.id)
            except Exception as e:  # noqa: BLE001 - one bad run must not stop the server
                log.warning("run %s cannot be resumed on start: %s", info.id, e)
                await asyncio.to_thread(self._give_back, info.id, _describe(e))
                continue
            log.info("resumed run %s left unfinished by a server process now gone", info.id)
            resumed.append(info.id)
        return resumed

    async def stop(self) -> None:
        """Interrupt every live run (each ends ``interrupted`` and resumes on the next start)."""
        self._stopping = True
        if self._adopter is not None:
            self._adopter.cancel()
            await asyncio.gather(self._adopter, return_exceptions=True)
            self._adopter = None
        with self._lock:
            lives = list(self._live.values())
        for live in lives:
            self._cancel_task(live)
        waits = [live.finished for live in lives if live.finished is not None]
        if waits:
            await asyncio.wait(waits, timeout=STOP_WAIT_S)
        for thread in list(self._threads.values()):
            await asyncio.to_thread(thread.join, 1.0)

    # -- the RPCs ---------------------------------------------------------------------------
    async def create(
        self, spec: RunSpec, *, project_id: str = "", dry_run: bool = False, created_by: str = ""
    ) -> RunSnapshot | RunResult:
        """Start ``spec``; answers once the run is stored (a dry run returns its plan)."""
        spec = servable(self.state.config, spec)
        check_run_egress(spec, server_egress(self.state.config))  # literal addresses: a 400
        if dry_run:
            return await asyncio.to_thread(
                asyncio.run, execute_run(spec, dry_run=True, registry=self.state.registry)
            )
        origin = {"server": True, "host": self.host, "project_id": project_id or DEFAULT_PROJECT}
        if created_by:  # the principal's provider/subject, never its credential
            origin["created_by"] = created_by
        live = await self._launch(spec, origin=origin, admit=True)
        return await self.get(live.run_id)

    async def get(self, ref: str, project: str | None = None) -> RunSnapshot:
        """The run ``ref`` names; with ``project``, only a run of that project (else 404):
        every by-id read of the API passes the request's project."""
        info = await asyncio.to_thread(self.state.store.get_run, ref, project_id=project)
        return self.snapshot(info)

    async def cancel(self, ref: str, project: str | None = None) -> RunSnapshot:
        """Stop a live run; it ends ``cancelled`` with its stored results kept."""
        info = await asyncio.to_thread(self.state.store.get_run, ref, project_id=project)
        live = self._live.get(info.id)
        if live is None:
            if info.status in LIVE:
                raise UserError(
                    f"run {info.id} is not executed by this server "
                    f"(host {info.host}, pid {info.pid})",
                    hint="cancel it where it runs (Ctrl-C for `evalsi run`)",
                )
            return self.snapshot(info)  # already finished: nothing to stop
        live.cancel_requested = True
        self._cancel_task(live)
        if live.finished is not None:
            await asyncio.wait([live.finished], timeout=CANCEL_WAIT_S)
        return await self.get(info.id)

    async def replay(
        self,
        ref: str,
        project: str | None = None,
        *,
        evaluators: list[str] | None = None,
        params: dict[str, Any] | None = None,
        gates: list[str] | None = None,
        branch_from_step: int | None = None,
        created_by: str = "",
    ) -> RunSnapshot:
        """Replay agent run ``ref`` from its cassettes as a new run of its project."""
        info = await asyncio.to_thread(self.state.store.get_run, ref, project_id=project)
        if info.kind != "run":
            raise UserError(f"run {info.id} is a {info.kind} run; replay plays an agent run")
        spec = replay_spec(
            info, stored_spec(info), evaluators=evaluators, params=params, gates=gates
        )
        spec = servable(self.state.config, spec)
        check_branch(spec, branch_from_step)
        check_run_egress(spec, server_egress(self.state.config))
        cassettes = await asyncio.to_thread(cassettes_of, self.state.store, info, branch_from_step)
        origin = {"server": True, "host": self.host, "project_id": info.project_id}
        if created_by:
            origin["created_by"] = created_by
        live = await self._launch(spec, origin=origin, admit=True, replay=cassettes)
        return await self.get(live.run_id)

    async def resume(self, ref: str, project: str | None = None) -> RunSnapshot:
        """Complete a stopped, cancelled, interrupted, incomplete or failed run."""
        info = await asyncio.to_thread(self.state.store.get_run, ref, project_id=project)
        if info.id in self._live:
            raise UserError(f"run {info.id} is already running on this server")
        if info.kind != "run":
            raise UserError(f"run {info.id} is a {info.kind} run; only Run runs can be resumed")
        if info.status not in RESUMABLE:
            raise UserError(
                f"run {info.id} is {info.status}; only a run that is "
                + ", ".join(RESUMABLE)
                + " can be resumed"
            )
        spec = servable(self.state.config, stored_spec(info))
        await self._launch(spec, resume=info.id, run_id=info.id, admit=True)
        return await self.get(info.id)

    async def watch(self, ref: str, project: str | None = None) -> AsyncIterator[RunSnapshot]:
        """The run's state on every change (at most every ``PROGRESS_EVERY_S``), partial
        metrics at most every ``METRICS_EVERY_S``, then the final state; a run that is not
        live sends its current state once."""
        info = await asyncio.to_thread(self.state.store.get_run, ref, project_id=project)
        live = self._live.get(info.id)
        if live is None:
            yield self.snapshot(info, final=True)
            return
        last: tuple[Any, ...] | None = None
        while live.finished is not None and not live.finished.done():
            changed = live.changed
            metrics = await self._partial(live)
            key = (live.state, live.done, live.total, live.infra, id(metrics))
            if key != last:
                last = key
                row = await asyncio.to_thread(self.state.store.get_run, info.id)
                # ``live`` itself, not a lookup: the run may leave ``_live`` meanwhile, and
                # only the last message of the stream may show a settled status
                yield self._live_snapshot(row, live, metrics)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), METRICS_EVERY_S)
            await asyncio.sleep(PROGRESS_EVERY_S)
        info = await asyncio.to_thread(self.state.store.get_run, info.id)
        yield self.snapshot(info, final=True)

    def stats(self) -> dict[str, Any]:
        """Counters for /metrics (runs by state come from the store): tasks by state in this
        server's sessions, and judge cache hits of the runs finished here (their summaries)."""
        with self._lock:
            tasks = Counter({"completed": 0, "infra_error": 0, "pending": 0, **self._tasks})
            for live in self._live.values():
                tasks["completed"] += live.done - live.infra
                tasks["infra_error"] += live.infra
                tasks["pending"] += max(live.total - live.done, 0)
        return {"tasks": dict(tasks), "judge_cache_hits": self._judge_hits}

    # -- launching --------------------------------------------------------------------------
    def _admit(self) -> None:
        """Refuse a new run when the queue is full (under ``_lock``): every live run beyond the
        execution slots is waiting for one."""
        config = self.state.config
        waiting = len(self._live) - config.max_concurrent_runs
        if waiting >= config.limits.max_queued_runs:
            raise UserError(
                f"run queue: {max(waiting, 0)} runs already wait for a slot, this server's limit "
                f"of queued runs is {config.limits.max_queued_runs} (limits.maxQueuedRuns in "
                "its evalsi.yaml)",
                hint="try again once runs have finished, or cancel some",
            )

    async def _launch(
        self,
        spec: RunSpec,
        *,
        resume: str | None = None,
        run_id: str | None = None,
        origin: dict[str, Any] | None = None,
        admit: bool = False,
        replay: Replay | None = None,
    ) -> _Live:
        """Start ``spec`` in a thread of its own. ``admit``: a caller's request, refused when
        ``limits.max_queued_runs`` runs already wait for a slot (runs resumed on start are
        not: they were admitted before)."""
        loop = self._api_loop()
        if self._stopping:
            raise RunError("the server is shutting down; try again once it is back")
        live = _Live(run_id=run_id or new_run_id(), spec=spec, replay=replay)
        live.stored, live.finished = loop.create_future(), loop.create_future()
        with self._lock:
            if live.run_id in self._live:
                raise UserError(f"run {live.run_id} is already running on this server")
            if admit:
                self._admit()
            self._live[live.run_id] = live
        thread = threading.Thread(
            target=self._thread_main,
            args=(live, resume, origin),
            name=f"evalsi-run-{live.run_id}",
            daemon=True,
        )
        self._threads[live.run_id] = thread
        thread.start()
        await asyncio.shield(live.stored)  # raises what stopped the run before it was stored
        return live

    def _thread_main(self, live: _Live, resume: str | None, origin: dict[str, Any] | None) -> None:
        db: SqlStore | None = None
        error: BaseException | None = None
        try:
            # Inside the try: a store that cannot be opened must still settle the run below,
            # or its creator (and a starting server) would wait for it forever.
            db = self._open_store()
            asyncio.run(self._execute(live, db, resume, origin))
        except BaseException as e:  # noqa: BLE001 - reported to the API loop below
            error = e
        finally:
            try:
                self._after(live, db or self.state.store, error)
            finally:
                if db is not None and db is not self.state.store:
                    db.close()

    async def _execute(
        self, live: _Live, db: SqlStore, resume: str | None, origin: dict[str, Any] | None
    ) -> None:
        task = asyncio.current_task()
        with self._lock:
            live.loop, live.task = asyncio.get_running_loop(), task
            stop_now = live.cancel_requested or self._stopping
        if stop_now:
            raise asyncio.CancelledError

        def progress(done: int, infra: int, _text: str) -> None:
            live.done, live.infra = done, infra
            self._notify(live)

        await execute_run(
            live.spec,
            store=db,
            resume=resume,
            run_id=None if resume else live.run_id,
            origin=origin,
            progress=progress,
            registry=self.state.registry,
            resilience=Resilience(egress=server_egress(self.state.config)),
            started=lambda run_id, total: self._started(live, db, total),
            cancelled=lambda: live.cancel_requested,
            time_limit=float(self.state.config.limits.evaluator_seconds),
            span_exporter=_span_exporter if live.spec.telemetry is not None else None,
            replay=live.replay,
            # a replay plays recorded cassettes: it stays here (a worker would call live)
            dispatch=self._dispatch(db) if live.replay is None else None,
        )

    def _dispatch(self, db: SqlStore) -> Any:
        """Where a run's tasks go: the cluster's work queue when ``cluster:`` is configured,
        else this process (None)."""
        cluster = self.state.config.cluster
        if cluster is None:
            return None
        from evalsi.cluster import ClusterDispatch

        return ClusterDispatch(
            cluster,
            db,
            name=f"evalsi-serve {self.state.config.host}",
            objects=self.state.object_store(),  # large shards by reference (None: none)
        )

    async def _started(self, live: _Live, db: SqlStore, total: int | None) -> None:
        """The run is stored: answer CreateRun, then wait for a slot (FIFO), stored ``queued``
        while it waits."""
        live.total = total or 0
        loop = asyncio.get_running_loop()
        live.grant = loop.create_future()
        with self._lock:
            if self._active < max(self.state.config.max_concurrent_runs, 1):
                self._active += 1
                live.holds_slot = True
                live.grant.set_result(None)
                live.state = "running"
            else:
                self._waiting.append(live)
                live.state = "queued"
        if live.state == "queued":
            db.mark_status(live.run_id, "queued")  # before CreateRun answers with it
        self._resolve(live.stored)
        self._notify(live)
        if not live.grant.done():
            await live.grant
            db.mark_status(live.run_id, "running")
        live.state = "running"
        self._notify(live)

    def _release(self, live: _Live) -> None:
        """Hand this run's slot to the next queued run (or free it)."""
        with self._lock:
            if not live.holds_slot:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(live)
                return
            live.holds_slot = False
            while self._waiting:
                nxt = self._waiting.popleft()
                nxt.holds_slot = True
                if nxt.loop is not None and nxt.grant is not None:
                    # Its loop may have closed already (cancelled while queued); its own
                    # `_after` settles it, and the slot stays held by it until then.
                    with contextlib.suppress(RuntimeError):
                        nxt.loop.call_soon_threadsafe(_grant, nxt.grant)
                return
            self._active -= 1

    def _after(self, live: _Live, db: SqlStore, error: BaseException | None) -> None:
        """The run's thread ends: free its slot, settle its status, wake every waiter."""
        try:
            self._release(live)
        except Exception:
            log.warning("run %s: could not hand its slot on", live.run_id, exc_info=True)
        status = "failed"
        try:
            info = db.get_run(live.run_id)
            status = info.status
            if status in LIVE and not _owned_here(info):
                pass  # another process runs it (a resume of it was refused): not ours to settle
            elif live.cancel_requested and status in (*LIVE, "interrupted"):
                # Cancelled before its first task, or the stop raced the cancel: the user asked
                # for cancelled, and a cancelled run is not resumed on the next start.
                status = "cancelled"
                info = db.mark_status(live.run_id, status, error="cancelled on request")
            elif status in LIVE and _owned_here(info):
                # It stopped between being stored and its first task: never leave it live.
                status = "interrupted" if self._stopping else "failed"
                error_text = _describe(error) or "stopped before its first task"
                info = db.mark_status(live.run_id, status, error=error_text)
            hits = sum(
                int(j.get("cached", 0)) for j in ((info.summary or {}).get("judges") or {}).values()
            )
        except Exception:  # noqa: BLE001 - the run may never have been stored
            hits = 0
        with self._lock:
            self._live.pop(live.run_id, None)
            self._threads.pop(live.run_id, None)
            self._tasks["completed"] += live.done - live.infra
            self._tasks["infra_error"] += live.infra
            self._judge_hits += hits
            live.state = "finished"
        if error is not None and not isinstance(error, asyncio.CancelledError):
            log.warning("run %s ended with %s", live.run_id, _describe(error))
        # A creator still waiting gets the error (the run was refused before it was stored);
        # once the run is stored this is a no-op.
        self._resolve(live.stored, error)
        self._resolve(live.finished)
        self._notify(live)

    # -- helpers ----------------------------------------------------------------------------
    def _api_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _resolve(
        self, fut: asyncio.Future[None] | None, error: BaseException | None = None
    ) -> None:
        if fut is None or self._loop is None:
            return

        def settle() -> None:
            if fut.done():
                return
            if error is None:
                fut.set_result(None)
            elif isinstance(error, Exception):
                fut.set_exception(error)
            else:  # cancelled before it was stored (the server is stopping)
                fut.set_exception(RunError("the run was stopped before it started"))

        # The server may have stopped (its loop closed) while this run's thread finished:
        # nobody awaits the future any more, and the run itself is already stored.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(settle)

    def _notify(self, live: _Live) -> None:
        if self._loop is None or self._loop.is_closed():
            return

        def wake() -> None:
            event, live.changed = live.changed, asyncio.Event()
            event.set()

        self._loop.call_soon_threadsafe(wake)

    def _cancel_task(self, live: _Live) -> None:
        with self._lock:
            loop, task = live.loop, live.task
        if loop is not None and task is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                loop.call_soon_threadsafe(task.cancel)

    def snapshot(
        self, info: RunInfo, *, metrics: list[MetricSummary] | None = None, final: bool = False
    ) -> RunSnapshot:
        """``info`` as the API shows it: a live run's status (``queued``/``running``) and
        progress come from the scheduler, everything else from the store."""
        live = self._live.get(info.id)
        if live is None or final:
            return RunSnapshot(info, info.status, final=final or info.status not in LIVE)
        return self._live_snapshot(info, live, metrics)

    @staticmethod
    def _live_snapshot(
        info: RunInfo, live: _Live, metrics: list[MetricSummary] | None
    ) -> RunSnapshot:
        status = "queued" if live.state in ("queued", "starting") else "running"
        progress = Progress(done=live.done, total=live.total, infra_errors=live.infra)
        return RunSnapshot(info, status, progress=progress, metrics=metrics)

    async def _partial(self, live: _Live) -> list[MetricSummary] | None:
        """Metrics of the results stored so far, recomputed at most every ``METRICS_EVERY_S``."""
        if live.state != "running":
            return None
        now = time.monotonic()
        if live.partial is not None and now - live.partial[0] < METRICS_EVERY_S:
            return live.partial[1]
        metrics = await asyncio.to_thread(self._summarize, live)
        live.partial = (now, metrics)
        return metrics

    def _summarize(self, live: _Live) -> list[MetricSummary]:
        if live.evaluators is None:
            entries = [e.as_mapping() for e in live.spec.evaluators]
            bound = bind_all(entries, registry=self.state.registry)
            live.evaluators = [(b.name, b.manifest.ref.name, b.manifest.outputs) for b in bound]
        db = self.state.store
        counts = db.output_counts(live.run_id)
        stored = summarize_stored(
            db, live.run_id, live.evaluators, trials=live.spec.trials, task_counts=counts
        )
        return stored.metrics

    def _orphans(self) -> list[RunInfo]:
        """Server runs whose owner is gone (oldest first, so they queue in creation order)."""
        return [
            info
            for info in self.state.store.interrupted_runs(kind="run")
            if (info.spec.get("origin") or {}).get("server")
        ]

    def _give_back(self, run_id: str, why: str) -> None:
        """A claimed run this server cannot resume goes back to ``interrupted`` (another server,
        or this one once its configuration allows it, may take it)."""
        with contextlib.suppress(Exception):
            info = self.state.store.get_run(run_id)
            if info.status in LIVE and _owned_here(info) and run_id not in self._live:
                self.state.store.mark_status(run_id, "interrupted", error=why)

    def _open_store(self) -> SqlStore:
        """A store of the run's own (its writer connection is not shared between threads)."""
        shared = self.state.store
        if shared.is_sqlite_file:
            return SqlStore.open(shared.sqlite_path)
        if shared.engine.dialect.name == "sqlite":  # in memory: one connection for all
            return shared
        return SqlStore.open(shared.engine.url.render_as_string(hide_password=False))


def _owned_here(info: RunInfo) -> bool:
    """Whether this process owns a live run (the store reads it ``interrupted`` otherwise once
    the owner is gone, so a live row on this host with our pid is ours)."""
    return info.host in (None, socket.gethostname()[:255]) and info.pid == os.getpid()


def _grant(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _describe(error: BaseException | None) -> str:
    if error is None:
        return ""
    return str(error) if isinstance(error, UserError) else f"{type(error).__name__}: {error}"


__all__ = ["STATUSES", "RunManager", "RunSnapshot"]


def _span_exporter(endpoint: str, **options: Any) -> Any:
    """``spec.telemetry``'s exporter (the OTel SDK loads only for a run that exports)."""
    from evalsi.sinks import OtlpSpanExporter

    return OtlpSpanExporter(endpoint, **options)
