"""The scheduler of one Run session: producer -> workers (target calls) -> grader -> store.

See ``_execute`` for how each task ends. The producer reads the dataset lazily into a bounded
queue; ``max_concurrency`` workers call the target; one grader batches finished generations
through the record runners and commits outputs and results together.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson

from evalsi.connectors import InfraError, Target, TargetError, TargetOutput, TaskInfo
from evalsi.core import Record, Usage
from evalsi.datasets import Dataset
from evalsi.evaluators import Runner
from evalsi.runs._outputs import as_answered, grade_tasks
from evalsi.runs._pricing import costing
from evalsi.runs._run_row import RunRow
from evalsi.runs._targets import Render, RenderError
from evalsi.runs._telemetry import RunTelemetry
from evalsi.specs import BudgetSpec, RunSpec
from evalsi.store import OutputRow

GRADE_BATCH = 64
GRADE_WAIT_S = 0.05
GRACE_S = 10.0
"""Seconds in-flight calls may still finish after a budget is hit, before they are cancelled."""
READ_BATCH = 256

RunProgress = Callable[[int, int, str], None]
"""Called after each graded batch with (tasks done, infra errors, spend so far as text)."""
TaskKey = tuple[int, int, Record]
"""A task as the run's queue carries it: (sample's seq, trial, the sample's record)."""


@dataclasses.dataclass(slots=True)
class _Task:
    seq: int
    trial: int
    record: Record


@dataclasses.dataclass(slots=True)
class _Done:
    task: _Task
    status: str
    output: TargetOutput | None = None  # when ok
    kind: str | None = None
    error: str | None = None
    attempts: int = 1
    started_ns: int = 0  # the target's invocation, for the task's span
    ended_ns: int = 0


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return (
        f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
    )


def task_seed(seed: int, sample_id: str, trial: int) -> int:
    """The seed passed to the target for one (sample, trial): stable across runs and resumes."""
    digest = hashlib.blake2b(f"{seed}\0{sample_id}\0{trial}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


@dataclasses.dataclass(slots=True)
class Spend:
    """What this session's calls used, checked against the budget after every call."""

    tokens: int = 0
    usd: float = 0.0
    usd_unknown: int = 0  # calls whose cost could not be known
    calls: int = 0


def over_budget(budget: BudgetSpec | None, tokens: int, usd: float) -> str | None:
    """Why a run that spent ``tokens`` and ``usd`` stops (its budget's tokens or USD reached),
    or None."""
    if budget is None:
        return None
    if budget.tokens is not None and tokens >= budget.tokens:
        return f"budget(tokens): {tokens} >= {budget.tokens}"
    if budget.usd is not None and usd >= budget.usd:
        return f"budget(usd): {usd:.4f} >= {budget.usd:g}"
    return None


class Executor:
    """The scheduler of one session: producer -> workers (target calls) -> grader -> store."""

    def __init__(
        self,
        spec: RunSpec,
        target: Target,
        render: Render,
        runners: list[Runner],
        row: RunRow,
        dataset: Dataset | None,
        completed: Mapping[tuple[int, int], str],
        progress: RunProgress | None,
        *,
        judge_spend: Callable[[], tuple[int, float]] | None = None,
        total_tasks: int | None = None,
        time_limit: float | None = None,
        telemetry: RunTelemetry | None = None,
        excluded: frozenset[str] = frozenset(),
        tasks: Iterable[TaskKey] | None = None,
    ) -> None:
        self.spec = spec
        # given tasks (a cluster worker's shard) rather than the dataset's pending ones
        self.given = tasks
        self.target = target
        self.render = render
        self.runners = runners
        self.row = row  # the store opens at the first write, while the first calls are out
        self.dataset = dataset
        self.completed = completed
        self.progress = progress
        self.model = spec.target.model
        self.cost_usd = costing()
        self.budget = spec.budget
        self.spend = Spend()
        self.judge_spend = judge_spend  # (tokens, usd) the judges used: budgets count them too
        self.total_tasks = total_tasks  # known up front only for some sources: gives an ETA
        # With a limit (a server's run), sync evaluators grade in a thread, each call stopped
        # after it: the run's loop keeps calling the target meanwhile. Without one (embedded),
        # they grade inline, which is faster for the cheap ones.
        self.time_limit = time_limit
        self.telemetry = telemetry  # spans of each stored task, when spec.telemetry is set
        self.excluded = excluded  # scenario ids the test plan leaves out: never run
        self.started = time.monotonic()
        self.samples = 0
        self.done_tasks = 0
        self.infra = 0
        self.stopped_reason: str | None = None
        self._stop = asyncio.Event()
        n = spec.max_concurrency
        self._todo: asyncio.Queue[_Task | None] = asyncio.Queue(maxsize=2 * n)
        self._done: asyncio.Queue[_Done | None] = asyncio.Queue(maxsize=max(4 * n, 4 * GRADE_BATCH))
        self._inflight: dict[tuple[int, int], _Task] = {}

    # -- budget ---------------------------------------------------------------------------------
    def stop(self, reason: str) -> None:
        if self.stopped_reason is None:
            self.stopped_reason = reason
        self._stop.set()

    def _account(self, usage: Usage) -> None:
        spend = self.spend
        spend.calls += 1
        spend.tokens += usage.tokens() or 0
        cost = self.cost_usd(self.model, usage)
        if cost is None:
            spend.usd_unknown += 1
        else:
            spend.usd += cost
        self._check_budget()

    def _totals(self) -> tuple[int, float]:
        """Tokens and USD of this session: the target's calls plus the judges'."""
        tokens, usd = self.spend.tokens, self.spend.usd
        if self.judge_spend is not None:
            judge_tokens, judge_usd = self.judge_spend()
            tokens, usd = tokens + judge_tokens, usd + judge_usd
        return tokens, usd

    def _check_budget(self) -> None:
        if self.budget is None:
            return
        reason = over_budget(self.budget, *self._totals())
        if reason is not None:
            self.stop(reason)

    async def _wall_clock(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.stop(f"budget(wall_clock): {seconds:g}s")

    # -- the pipeline ---------------------------------------------------------------------------
    async def run(self) -> None:
        n = self.spec.max_concurrency
        producer = asyncio.create_task(self._produce(n), name="evalsi-run-producer")
        workers = [asyncio.create_task(self._work(), name="evalsi-run-worker") for _ in range(n)]
        grader = asyncio.create_task(self._grade_loop(), name="evalsi-run-grader")
        stop_wait = asyncio.create_task(self._stop.wait())
        timers: list[asyncio.Task[Any]] = [stop_wait]
        if self.budget is not None and self.budget.wall_clock_s is not None:
            timers.append(asyncio.create_task(self._wall_clock(self.budget.wall_clock_s)))
        everything = [producer, *workers, grader, *timers]
        workers_done = asyncio.gather(*workers)
        try:
            watch: set[asyncio.Future[Any]] = {producer, grader, workers_done, stop_wait}
            while True:
                done, _ = await asyncio.wait(watch, return_when=asyncio.FIRST_COMPLETED)
                if grader in done:
                    grader.result()
                    raise RuntimeError("the grader stopped before the workers")
                if producer in done:
                    producer.result()  # a dataset error surfaces here
                    watch.discard(producer)
                if workers_done in done:
                    workers_done.result()
                    break
                if stop_wait in done:
                    watch.discard(stop_wait)
                    grace: set[asyncio.Future[Any]] = {workers_done, grader}
                    finished, _ = await asyncio.wait(
                        grace, timeout=GRACE_S, return_when=asyncio.FIRST_COMPLETED
                    )
                    if grader in finished:
                        grader.result()
                    if not workers_done.done():
                        producer.cancel()
                        for w in workers:
                            w.cancel()
                        await asyncio.gather(producer, *workers, return_exceptions=True)
                    break
            if not producer.done():
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)
            await self._done.put(None)
            await grader
        except BaseException:
            for task in everything:
                task.cancel()
            # workers_done too: an unretrieved gather would log its CancelledError at exit.
            await asyncio.gather(*everything, workers_done, return_exceptions=True)
            self._record_unfinished()
            raise
        finally:
            for timer in timers:
                timer.cancel()
            await asyncio.gather(*timers, return_exceptions=True)
        self._record_unfinished()

    async def _produce(self, workers: int) -> None:
        for task in self._tasks():
            if self._stop.is_set():
                break
            await self._todo.put(task)
        for _ in range(workers):  # then every worker ends once the queue drains
            await self._todo.put(None)

    def _tasks(self) -> Iterator[_Task]:
        if self.given is not None:
            for seq, trial, record in self.given:
                yield _Task(seq, trial, record)
            return
        for seq, trial, record in self.pending():
            yield _Task(seq, trial, record)

    def pending(self) -> Iterator[TaskKey]:
        """Every (sample, trial) not already complete, read lazily from the dataset
        (``samples`` counts the samples read); a cluster's dispatcher queues these."""
        assert self.dataset is not None
        limit = self.spec.dataset.limit
        trials = range(self.spec.trials)
        completed = self.completed
        excluded = self.excluded
        seq = 0
        batches = self.dataset.iter_batches(READ_BATCH)
        try:
            for batch in batches:
                for record in batch:
                    if limit is not None and seq >= limit:
                        return
                    for trial in trials if record.id not in excluded else ():
                        if (seq, trial) not in completed:
                            yield seq, trial, record
                    seq += 1
                    self.samples = seq
        finally:
            batches.close()

    async def _work(self) -> None:
        while True:
            task = await self._todo.get()
            if task is None:
                return
            if self._stop.is_set():
                continue  # never started: redone on resume
            key = (task.seq, task.trial)
            self._inflight[key] = task
            done = await self._call(task)
            await self._done.put(done)
            # Only now: a worker cancelled while waiting to hand its result over still has the
            # task in _inflight, so it is recorded as cancelled (and redone on resume).
            del self._inflight[key]

    async def _call(self, task: _Task) -> _Done:
        record = task.record
        try:
            request = self.render(record)
        except RenderError as e:
            return _Done(task, "skipped", error=str(e), attempts=0)
        seed = task_seed(self.spec.seed, record.id, task.trial)
        began = time.time_ns()
        try:
            if getattr(self.target, "per_task", False):
                _, run_id = self.row.open()
                info = TaskInfo(run_id, record.id, task.trial, record)
                out = await self.target.invoke(request, seed=seed, task=info)  # type: ignore[call-arg]
            else:
                out = await self.target.invoke(request, seed=seed)
        except InfraError as e:
            return _Done(task, "infra_error", kind=e.kind, error=str(e), attempts=e.attempts)
        except TargetError as e:
            kind = f"http_{e.status}" if e.status is not None else None
            return _Done(task, "target_error", kind=kind, error=str(e))
        except Exception as e:  # noqa: BLE001 - a crash in our own code is infrastructure
            return _Done(task, "infra_error", kind="internal", error=f"{type(e).__name__}: {e}")
        self._account(out.usage)
        return _Done(
            task, "ok", output=out, attempts=out.attempts, started_ns=began, ended_ns=time.time_ns()
        )

    async def _grade_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self._done.get()
            if first is None:
                return
            items = [first]
            ending = False
            deadline = loop.time() + GRADE_WAIT_S
            while len(items) < GRADE_BATCH:
                try:
                    item = self._done.get_nowait()
                except asyncio.QueueEmpty:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        async with asyncio.timeout(remaining):
                            item = await self._done.get()
                    except TimeoutError:
                        break
                if item is None:
                    ending = True
                    break
                items.append(item)
            await self._grade(items)
            if ending:
                return

    async def _grade(self, items: list[_Done]) -> None:
        rows = [_output_row(item) for item in items]
        self.infra += sum(item.status == "infra_error" for item in items)
        tasks = [(_graded_record(item), row) for item, row in zip(items, rows, strict=True)]
        graded = await grade_tasks(self.runners, tasks, self.time_limit)
        blobs: dict[str, bytes] = {}
        for item in items:
            cassette = item.output.cassette if item.output is not None else None
            if cassette is not None and not cassette.stored:  # a replay's are stored already
                blobs.update(cassette.blobs())
        db, run_id = self.row.open()
        await db.write_tasks_async(run_id, rows, graded, blobs)
        if self.telemetry is not None:  # stored: now the spans may tell of it
            self._export(run_id, items)
        self.done_tasks += len(items)
        if self.judge_spend is not None:
            self._check_budget()  # judge calls happen while grading
        if self.progress is not None:
            self.progress(self.done_tasks, self.infra, self._progress_text())

    def _export(self, run_id: str, items: list[_Done]) -> None:
        assert self.telemetry is not None
        for item in items:
            if item.output is not None and item.output.trajectory is not None:
                self.telemetry.export_task(
                    run_id=run_id,
                    trial=item.task.trial,
                    record_id=item.task.record.id,
                    input=item.task.record.input,
                    output=item.output,
                    started_ns=item.started_ns,
                    ended_ns=item.ended_ns,
                )

    def _progress_text(self) -> str:
        tokens, usd = self._totals()
        text = f"{tokens:,} tokens"
        if usd or not self.spend.usd_unknown:
            text += f", ${usd:,.4f}" + ("+" if self.spend.usd_unknown else "")
        total, done = self.total_tasks, self.done_tasks
        if total and done:
            left = max(total - done, 0) * (time.monotonic() - self.started) / done
            text += f", ETA ~{_duration(left)}"
        return text

    def _record_unfinished(self) -> None:
        """Tasks in flight or generated but not graded when the session ended: ``cancelled``."""
        rows = [
            OutputRow(t.seq, t.trial, t.record.id, "cancelled", error="cancelled in flight")
            for t in self._inflight.values()
        ]
        while not self._done.empty():
            item = self._done.get_nowait()
            if item is not None:
                t = item.task
                rows.append(OutputRow(t.seq, t.trial, t.record.id, "cancelled", error="not graded"))
        self._inflight.clear()
        if rows:
            db, run_id = self.row.open()
            db.write_outputs(run_id, rows)


def _graded_record(item: _Done) -> Record:
    """The task's record, holding the target's output, usage and trajectory when it answered."""
    out = item.output
    if out is None:
        return item.task.record
    return as_answered(item.task.record, out.output, out.usage, out.trajectory)


def _output_row(item: _Done) -> OutputRow:
    task = item.task
    output = usage = trajectory = cassette = None
    if item.output is not None:
        if item.output.cassette is not None:
            cassette = item.output.cassette.index()
        output = orjson.dumps(item.output.output.to_value()).decode()
        usage = orjson.dumps(item.output.usage.known()).decode()
        if item.output.trajectory is not None:
            trajectory = orjson.dumps(item.output.trajectory.to_value()).decode()
    return OutputRow(
        task.seq,
        task.trial,
        task.record.id,
        item.status,
        item.kind,
        output,
        usage,
        item.error,
        item.attempts,
        trajectory,
        cassette,
    )
