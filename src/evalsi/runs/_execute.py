"""Run: call the target for every sample x trial, grade each output as it arrives, store both.

Tasks are produced lazily from the dataset into a bounded queue consumed by
``max_concurrency`` workers, so memory does not grow with the dataset. Finished generations
go to one grader that batches them (up to ``GRADE_BATCH`` or ``GRADE_WAIT_S``) through the
record runners with the task's trial, and commits outputs and results of a batch in one
transaction: grading overlaps generation, and a killed process leaves every task either
complete or absent.

How a task ends (an infrastructure failure is never scored):

- ``ok``: the target answered; every evaluator grades the output.
- ``target_error``: the target itself failed on the sample (a Python target raised, a 4xx):
  that is the system's behaviour, so the output is stored with the error and every evaluator's
  result is ERROR with the reason (counted in ``errors``, never scored).
- ``skipped``: the sample cannot become a request (no input, the template fails on it); every
  result is SKIPPED with the reason.
- ``infra_error(kind)``: retries exhausted on a 429/5xx/timeout/..., or a crash in our own code
  (kind ``internal``): not graded, never part of n, counted in ``infra_errors``, redone on resume.
- ``cancelled``: in flight when the run was interrupted or a budget's grace period ran out;
  redone on resume.

The final figures are always computed from the store (``_stored``), so a resumed run reports
exactly what an uninterrupted one would.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.connectors import (
    DEFAULT_CONNECTION_LIMIT,
    Resilience,
    close_shared_session,
    shared_session,
)
from evalsi.core import (
    PER_TASK_SEED,
    DatasetPin,
    RunManifest,
    Seeds,
    SpecError,
    UserError,
    content_hash,
    startup_mark,
)
from evalsi.datasets import FieldMap, open_dataset
from evalsi.evaluators import Registry, use_judges
from evalsi.runs._gc import young_gc_relaxed
from evalsi.runs._judges import build_judges, check_judges, judge_totals
from evalsi.runs._outputs import FINISHED, answered
from evalsi.runs._plan import bind_all, require_sandboxes, runners_for
from evalsi.runs._run_result import RunResult
from evalsi.runs._run_row import RunRow, StoreLike, open_store
from evalsi.runs._scheduler import Executor, RunProgress, task_seed
from evalsi.runs._shard import Dispatch
from evalsi.runs._targets import build_target, identity, renderer
from evalsi.runs._telemetry import SpanExporterFactory, open_telemetry
from evalsi.runs._test_plan import TestPlan, register_plan
from evalsi.runs._user_sim import attach_cache
from evalsi.runs.gates import parse_gates
from evalsi.specs import RunSpec, work_document

if TYPE_CHECKING:  # SQLAlchemy loads when the store opens: after the first target calls
    from evalsi.agents import RemoteHarness, Replay
    from evalsi.store import RunInfo, SqlStore

log = logging.getLogger("evalsi.runs")

DEFAULT_PROJECT = "default"  # the store's project for runs that name none


async def execute_run(
    spec: RunSpec,
    *,
    store: StoreLike = None,
    resume: str | None = None,
    dry_run: bool = False,
    progress: RunProgress | None = None,
    registry: Registry,
    resilience: Resilience | None = None,
    execute_only: bool = False,
    run_id: str | None = None,
    origin: Mapping[str, Any] | None = None,
    started: Callable[[str, int | None], Awaitable[None]] | None = None,
    cancelled: Callable[[], bool] | None = None,
    time_limit: float | None = None,
    clock: Callable[[], float] = time.time,
    remote_harness: RemoteHarness | None = None,
    span_exporter: SpanExporterFactory | None = None,
    replay: Replay | None = None,
    dispatch: Dispatch | None = None,
) -> RunResult:
    """Execute ``spec``: generate, grade, store, summarise, gate.

    Args:
        spec: the run (``load_run_spec`` builds it from YAML; tests build it in code).
        store: a SQLite path, ``":memory:"`` or an open store (default ``.evalsi/evalsi.db``).
        resume: the id of a run of the same spec to complete: tasks already stored with their
            output and every result are skipped, the rest (infra errors, cancelled, never
            started) are run.
        dry_run: return the plan (tasks, projected tokens and cost, budget checks) without
            calling the target or writing anything.
        progress: called after each graded batch with (tasks done, infra errors).
        registry: evaluators to resolve refs against; the caller chooses (the Python API and
            the CLI hand over the built-ins plus entry points, the server its own).
        resilience: retry policy, breakers and rate limiters shared by this run's calls
            (default: a fresh one per run, with the default policies).
        execute_only: call the target and store its outputs, grade nothing (no evaluators, no
            gates; the run's spec and summary say ``graded: false``); grade them later with
            ``grade_run``. Resuming an execute-only run stays execute-only.
        run_id: create the new run under this id (a server answers with it before the run
            ends); default a fresh one.
        origin: who started the run (a server stores its host and project here, so it knows
            which runs to resume when it restarts); stored in the run's spec as ``origin``.
        started: awaited once the run is stored (created or reopened), with its id and the
            tasks this session will run (None when unknown), before any task runs; a server
            queues runs here. Cancelling while it waits stops the run like any cancellation.
        cancelled: asked when the run's task is cancelled: True records the run ``cancelled``
            (stopped on request), False ``interrupted`` (the process is going away).
        time_limit: seconds a sync evaluator's call may take before its records are ERROR
            ``timed out``; with it, sync evaluators grade in a thread, off the run's loop (the
            server passes ``limits.evaluatorSeconds``; embedded runs grade inline, unlimited).
        clock: unix seconds, for when the run was created and ended and how long it took.
        remote_harness: connects an agent's harness in another process (``harness: {grpc}`` or
            ``{command}``); the entry points pass ``evalsi.wire.connect_harness``.
        span_exporter: builds the exporter of ``spec.telemetry`` (the callers at the edges
            hand in ``evalsi.sinks.OtlpSpanExporter``; the SDK is never imported here); a spec
            with telemetry and no exporter is refused.
        replay: play an agent's tasks from a recorded run's cassettes (``replay_run``); the
            run stores where they came from as ``spec.replay``, and a resumed replay finds
            them there.
        dispatch: hand the run's tasks to other processes (a cluster's work queue,
            ``evalsi.cluster``) instead of running them here; the run is created, planned and
            concluded here, from what the workers stored.

    Budgets count this session's spend only, so a run stopped by its budget can be resumed.
    """
    if spec.trials < 1:
        raise SpecError(f"spec.trials must be at least 1, got {spec.trials}")
    if spec.max_concurrency < 1:
        raise SpecError(f"spec.maxConcurrency must be at least 1, got {spec.max_concurrency}")
    opened = None
    if resume is not None and not dry_run:
        opened = open_store(store)
        resumed = opened.get_run(resume)
        execute_only = _resume_execute_only(resumed, execute_only)
        replay = replay or _stored_replay(opened, resumed)
    entries = [e.as_mapping() for e in spec.evaluators]
    bound = [] if execute_only else bind_all(entries, registry=registry)
    runners = runners_for(bound)
    rates = {
        "min_completion_rate": spec.min_completion_rate,
        "max_evaluator_error_rate": spec.max_evaluator_error_rate,
    }
    gates = parse_gates(() if execute_only else spec.gates, bound, **rates)
    check_judges(bound, spec.judges)  # no default judge: refuse before calling anything
    target = build_target(
        spec.target,
        resilience=resilience or Resilience(),
        environment=spec.environment,
        remote=remote_harness,
        replay=replay,
    )
    render = renderer(spec.target)
    dataset = open_dataset(spec.dataset.source, fields=FieldMap(**spec.dataset.fields))
    if dry_run:
        from evalsi.runs._dry_run import plan_run

        plan = plan_run(spec, target, render, dataset, bound)
        return RunResult(
            run_id="",
            status="planned",
            records=plan["samples"],
            metrics=[],
            dataset_source=dataset.name,
            dataset_version=None,
            evaluators=[b.spec() for b in bound],
            trials=spec.trials,
            plan=plan,
        )

    require_sandboxes(bound)  # before the store or the target: nothing spent
    telemetry = open_telemetry(spec.telemetry, span_exporter, agent=spec.name)
    document = spec_document(spec)
    completed: dict[tuple[int, int], str] = {}
    if resume is not None:
        db = opened or open_store(store)
        info = db.get_run(resume)
        if info.kind != "run":
            raise UserError(f"run {info.id} is a {info.kind} run; only Run runs can be resumed")
        _check_same_spec(info.spec, spec, document)
        info = _take_over(db, info)
        run_id = info.id
        completed = (
            _executed_tasks(db, run_id) if execute_only else db.completed_tasks(run_id, len(bound))
        )
        _check_same_samples(dataset, completed, run_id)  # before the run is touched
        db.reopen_run(run_id)
        row = RunRow(db, kind="run", spec=info.spec, clock=clock)
        row.adopt(run_id)
        test_plan = TestPlan.from_stored(info.spec)  # the plan registered when the run began
    else:
        stored_spec = {
            "evaluators": [b.spec() for b in bound],
            "data": spec.dataset.source,
            "spec_hash": spec.spec_hash,
            "document": document,
            "trials": spec.trials,
            "seed": spec.seed,
            "graded": not execute_only,
            "source": spec.source,
            "dataset": dataclasses.asdict(spec.dataset),
            "max_concurrency": spec.max_concurrency,
            "budget": dataclasses.asdict(spec.budget) if spec.budget is not None else None,
        }
        if gates:
            stored_spec["gates"] = [g.expr for g in gates]
            stored_spec.update(rates)
        test_plan = register_plan(
            kind="run",
            name=spec.name,
            declaration=spec.declaration,
            thresholds=spec.thresholds,
            dataset=(
                open_dataset(spec.dataset.source, fields=FieldMap(**spec.dataset.fields))
                if spec.declaration is not None
                else dataset
            ),
            evaluators=[b.spec() for b in bound],
            trials=spec.trials,
            seed=spec.seed,
            spec_hash=spec.spec_hash,
            limit=spec.dataset.limit,
            environment=spec.environment.identity() if spec.environment is not None else None,
            per_task_seed=PER_TASK_SEED,
            case_policy=spec.case_policy,
            rates=rates,
        )
        stored_spec["test_plan"] = test_plan.stored()
        if origin is not None:
            stored_spec["origin"] = dict(origin)
        if replay is not None:
            stored_spec["replay"] = replay.provenance()
        project = (origin or {}).get("project_id") or DEFAULT_PROJECT
        row = RunRow(
            store,
            kind="run",
            spec=stored_spec,
            name=spec.name,
            run_id=run_id,
            project_id=project,
            created_by=str((origin or {}).get("created_by") or ""),
            clock=clock,
        )
        if started is not None or test_plan.declared:
            # A server answers with the stored run before it runs; a declared plan is
            # registered in the store before the first task.
            row.open()
    # Judges cache their verdicts in the store: it opens now. Otherwise it opens (and the run
    # is created) at the first write, while the first target calls are in flight.
    judges = (
        build_judges(spec.judges, row.store(), bound, resilience=resilience)
        if bound and spec.judges
        else {}
    )
    if spec.target.agent is not None and spec.target.agent.user is not None:
        attach_cache(target, row.store())  # the simulated user's answers, like a judge's
    executor = Executor(
        spec,
        target,
        render,
        runners,
        row,
        dataset,
        completed,
        progress,
        judge_spend=(lambda: judge_totals(judges)) if judges else None,
        total_tasks=_count_tasks(spec, len(completed)),
        time_limit=time_limit,
        telemetry=telemetry,
        excluded=test_plan.excluded if test_plan is not None else frozenset(),
    )
    began = clock()
    tools = contextlib.AsyncExitStack()  # an agent's tools: started before its first task
    here = dispatch is None  # the tasks run in this process (else: the cluster's workers)
    if here and started is None and isinstance(target, contextlib.AbstractAsyncContextManager):
        await tools.enter_async_context(target)  # a bad tool fails here, nothing recorded
    try:
        if started is not None:
            await started(row.open()[1], executor.total_tasks)
            # Time spent queued is neither spend nor part of the ETA.
            began, executor.started = clock(), time.monotonic()
            if here and isinstance(target, contextlib.AbstractAsyncContextManager):
                await tools.enter_async_context(target)
        if dispatch is not None:
            sent = (lambda done, infra: progress(done, infra, "")) if progress else None
            out = await dispatch(row.open()[1], executor.pending(), sent, spec.budget)
            executor.spend = out.spend  # the workers' calls and judges, summed
            if out.stopped_reason is not None:
                executor.stop(out.stopped_reason)
        else:
            if spec.target.kind != "python" or judges:  # enough connections for every worker
                await shared_session(limit=max(DEFAULT_CONNECTION_LIMIT, spec.max_concurrency))
            with use_judges(judges), young_gc_relaxed():  # contextvars reach the grader task
                startup_mark("first-call")  # bench/startup.py: workers start calling the target
                await executor.run()
        if executor.samples == 0 and executor.stopped_reason is None:
            raise dataset.nothing_read()  # nothing to call the target on: not a clean run
    except BaseException as e:
        asked = isinstance(e, asyncio.CancelledError) and cancelled is not None and cancelled()
        row.fail(e, records=executor.samples, on_request=asked)
        raise
    finally:
        await tools.aclose()
        await close_shared_session()
        # Flushed on every ending: spans of the tasks stored before a failure still tell of them.
        lost = await asyncio.to_thread(telemetry.close) if telemetry is not None else None
    warnings = [_in_a_run(w.to_dict()) for w in dataset.warnings]
    if lost is not None:
        log.warning("%s", lost)
        warnings.append({"kind": "telemetry", "message": lost})
    # Statistics (NumPy) import after the calls, not before the first one.
    from evalsi.runs._stored_run import conclude_stored_run

    target_id, unpinned = identity(target, spec.target)
    spend = {
        "tokens": executor.spend.tokens,
        "usd": executor.spend.usd if not executor.spend.usd_unknown else None,
        "calls": executor.spend.calls,
        "seconds": round(clock() - began, 3),
    }
    manifest = RunManifest.capture(
        spec_hash=spec.spec_hash,
        evaluators=[b.manifest_entry() for b in bound],
        dataset=DatasetPin(dataset.name, dataset.version, executor.samples, spec.dataset.limit),
        target=target_id,
        trials=spec.trials,
        seeds=Seeds(spec.seed, PER_TASK_SEED, target.supports_seed),
        unpinned=tuple(unpinned),
        spec_source=spec.source or None,
        spec_document_hash=content_hash(document),
    )
    db, run_id = row.open()
    result = conclude_stored_run(
        row,
        bound=bound,
        runners=runners,
        gates=gates,
        rates=rates,
        trials=spec.trials,
        seed=spec.seed,
        answered=answered(dataset, db.iter_outputs(run_id), spec.dataset.limit),
        dataset=(dataset.name, dataset.version),
        samples=executor.samples,
        stopped_reason=executor.stopped_reason,
        spend=spend,
        manifest=manifest,
        judges=judges,
        warnings=warnings,
        bad_records=dataset.bad_count,
        extra={"graded": not execute_only},
        lost_is_incomplete=True,
    )
    if spec.sinks and not execute_only:  # the results are stored: now they may go out
        from evalsi.runs._export import export_run

        exports = await asyncio.to_thread(export_run, db, run_id, spec.sinks)
        result.exports = [e.to_dict() for e in exports]
    return result


def _stored_replay(db: SqlStore, info: RunInfo) -> Replay | None:
    """The cassettes a resumed replay plays (``spec.replay``), or ``None`` for a plain run."""
    stored = info.spec.get("replay")
    if not isinstance(stored, dict):
        return None
    from evalsi.runs._cassettes import StoredCassettes

    branch = stored.get("branch_from_step")
    return StoredCassettes(db, str(stored["of"]), int(branch) if branch is not None else None)


def _in_a_run(warning: dict[str, Any]) -> dict[str, Any]:
    """A dataset warning as a Run words it: repeated ids also share the target's seed."""
    if warning["kind"] == "duplicate_ids":
        warning["message"] += (
            "; in a Run they also share the seed sent to the target (it derives from the "
            "sample id and the trial), so their calls are not independent samples"
        )
    return warning


def _resume_execute_only(info: RunInfo, execute_only: bool) -> bool:
    """An execute-only run resumes execute-only; a graded run cannot resume without grading."""
    stored = info.spec.get("graded", True) is False
    if execute_only and not stored and info.kind == "run":
        raise UserError(
            f"run {info.id} grades its outputs; it cannot be resumed with --execute-only",
            hint="resume it without --execute-only",
        )
    return stored or execute_only


def _take_over(db: SqlStore, info: RunInfo) -> RunInfo:
    """Refuse a run another live process holds; claim an interrupted one first, so two
    processes resuming it at once cannot both run it (the store's claim is atomic)."""
    mine = info.host in (None, socket.gethostname()[:255]) and info.pid == os.getpid()
    if info.status == "running" or (info.status == "queued" and not mine):
        where = f"host {info.host}, pid {info.pid}" if info.host else f"pid {info.pid}"
        raise UserError(
            f"run {info.id} is still {info.status} in another process ({where})",
            hint="wait for it to finish, or cancel it where it runs",
        )
    if info.status == "interrupted":
        claimed = db.claim_run(info.id)
        if claimed is None:
            raise UserError(
                f"run {info.id} was just taken over by another process",
                hint="`evalsi runs show` tells where it runs now",
            )
        return claimed
    return info


def _executed_tasks(db: SqlStore, run_id: str) -> dict[tuple[int, int], str]:
    """``(seq, trial)`` → record id of the tasks of an execute-only run a resume may skip."""
    return {(r.seq, r.trial): r.record_id for r in db.iter_outputs(run_id) if r.status in FINISHED}


def _check_same_samples(
    dataset: Any, completed: Mapping[tuple[int, int], str], run_id: str
) -> None:
    """Resume skips tasks by position: refuse when the samples at those positions changed."""
    if not completed:
        return
    stored: dict[int, str] = {seq: rid for (seq, _trial), rid in completed.items()}
    last = max(stored)
    for seq, record in enumerate(itertools.chain.from_iterable(dataset.iter_batches(1024))):
        expected = stored.get(seq)
        if expected is not None and expected != record.id:
            raise SpecError(
                f"cannot resume run {run_id}: the dataset changed since it ran (position "
                f"{seq} holds sample {record.id!r}, the run stored {expected!r})",
                hint="start a new run instead of --resume",
            )
        if seq == last:
            return
    raise SpecError(
        f"cannot resume run {run_id}: the dataset is shorter than when it ran",
        hint="start a new run instead of --resume",
    )


def _count_tasks(spec: RunSpec, done: int) -> int | None:
    """Tasks this session will run, when the source says how many samples it has (JSONL/CSV
    lines, or a limit): enough for an ETA; None otherwise. Never reads more than a line count."""
    samples: int | None = None
    path = Path(spec.dataset.source)
    if path.suffix in (".jsonl", ".ndjson", ".csv") and path.is_file():
        with path.open("rb") as f:
            samples = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        if path.suffix == ".csv":
            samples = max(samples - 1, 0)  # the header
    if spec.dataset.limit is not None:
        samples = spec.dataset.limit if samples is None else min(samples, spec.dataset.limit)
    return None if samples is None else max(samples * spec.trials - done, 0)


def spec_document(spec: RunSpec) -> dict[str, Any]:
    """What the spec hash covers, as data (for naming differences on resume)."""
    if spec.raw:
        return dict(spec.raw)
    return {
        "name": spec.name,
        "target": dataclasses.asdict(spec.target),
        "dataset": dataclasses.asdict(spec.dataset),
        "evaluators": [e.as_mapping() for e in spec.evaluators],
        "trials": spec.trials,
        "gates": list(spec.gates),
        "seed": spec.seed,
        **(
            {"judges": {k: dataclasses.asdict(j) for k, j in spec.judges.items()}}
            if spec.judges
            else {}
        ),
        **({"environment": spec.environment.identity()} if spec.environment else {}),
    }


def _check_same_spec(stored: dict[str, Any], spec: RunSpec, document: dict[str, Any]) -> None:
    if stored.get("spec_hash") == spec.spec_hash:
        return
    before = stored.get("document") or {}
    now = orjson.loads(orjson.dumps(document, default=str))
    paths = _differences(work_document(before), work_document(now))  # never the budget
    named = ", ".join(paths[:6]) + (" ..." if len(paths) > 6 else "") if paths else "its content"
    raise SpecError(
        f"cannot resume run: the spec differs from the one the run was started with ({named})",
        hint="resume with the original spec, or start a new run",
    )


def _differences(a: Any, b: Any, path: str = "spec") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            out.extend(_differences(a.get(key), b.get(key), f"{path}.{key}"))
        return out
    return [] if a == b else [path]


__all__ = ["RunProgress", "RunResult", "execute_run", "task_seed"]
