"""Some of a stored run's tasks executed here: what a cluster worker does with each shard.

The run was created and planned by the server that owns it (its spec document, evaluators and
test plan are stored). A worker rebuilds from that document the same target, renderer,
evaluators and judges (``RunContext``, kept while shards of the run keep coming) and runs the
shard's (seq, trial, record) tasks through the run's own ``Executor``: the same calls, the same
grading and the same writes as an embedded run. Writes are upserts keyed by (run, seq, trial
[, evaluator]), so a shard delivered twice stores each task once; the figures are computed from
the store by the run's owner when every shard is in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from evalsi.connectors import Resilience
from evalsi.core import UserError
from evalsi.evaluators import Registry, Runner, use_judges
from evalsi.runs._judges import build_judges, judge_totals
from evalsi.runs._plan import bind_all, require_sandboxes, runners_for
from evalsi.runs._run_row import RunRow
from evalsi.runs._scheduler import Executor, Spend, TaskKey
from evalsi.runs._targets import build_target, renderer
from evalsi.specs import BudgetSpec, RunSpec, run_spec_from_dict

if TYPE_CHECKING:
    from evalsi.store import SqlStore


@dataclasses.dataclass(frozen=True, slots=True)
class Dispatched:
    """What the processes a run's tasks went to spent, summed, and why they stopped early (the
    run's budget), if they did."""

    spend: Spend
    stopped_reason: str | None = None


class Dispatch(Protocol):
    """Where a run's tasks go when other processes execute them (``evalsi.cluster``): called
    by ``execute_run`` in place of its own pipeline with the run's id, its pending tasks (read
    lazily from the dataset) and its budget; returns once every task is stored or given up
    (or the budget is spent: the tasks not started are not run, as embedded), calling
    ``progress(tasks stored, infra errors)`` as shards finish. The run's figures are then
    computed from the store, as for an embedded run."""

    async def __call__(
        self,
        run_id: str,
        tasks: Iterator[TaskKey],
        progress: Callable[[int, int], None] | None,
        budget: BudgetSpec | None,
    ) -> Dispatched: ...


@dataclasses.dataclass
class RunContext:
    """What executing any task of one run needs, built once per run in a worker."""

    run_id: str
    spec: RunSpec
    runners: list[Runner]
    target: Any
    render: Any
    judges: dict[str, Any]
    tools: contextlib.AsyncExitStack

    async def close(self) -> None:
        await self.tools.aclose()

    def judge_spend(self) -> tuple[int, float]:
        """Tokens and USD this process's judges of the run used so far."""
        return judge_totals(self.judges)


async def open_run_context(
    db: SqlStore,
    run_id: str,
    *,
    registry: Registry,
    resilience: Resilience | None = None,
) -> RunContext:
    """The run's target, renderer, evaluators and judges, rebuilt from its stored spec (an
    agent's tools started); a ``UserError`` when the run is not a Run or its spec no longer
    loads here (an evaluator not installed on this worker, say)."""
    info = db.get_run(run_id)
    stored = info.spec or {}
    document = stored.get("document")
    if info.kind != "run" or not isinstance(document, dict) or "apiVersion" not in document:
        raise UserError(
            f"run {run_id} has no EvalRun document stored (a Score run, or a RunSpec built in "
            "code): a worker rebuilds a run from its document, so none of its tasks runs here"
        )
    source = str(stored.get("source") or "")
    spec = run_spec_from_dict(document, source=source)
    graded = stored.get("graded", True)
    bound = bind_all(list(stored.get("evaluators") or []), registry=registry) if graded else []
    require_sandboxes(bound)
    target = build_target(
        spec.target,
        resilience=resilience or Resilience(),
        environment=spec.environment,
    )
    tools = contextlib.AsyncExitStack()
    if isinstance(target, contextlib.AbstractAsyncContextManager):
        await tools.enter_async_context(target)
    judges = (
        build_judges(spec.judges, db, bound, resilience=resilience) if bound and spec.judges else {}
    )
    return RunContext(
        run_id, spec, runners_for(bound), target, renderer(spec.target), judges, tools
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ShardOutcome:
    tasks: int
    infra_errors: int
    seconds: float
    stopped_reason: str | None = None  # the run's budget was spent: the rest was not run


async def execute_shard(
    context: RunContext,
    db: SqlStore,
    tasks: Iterable[TaskKey],
    *,
    time_limit: float | None = None,
    share: int = 1,
    spend: Spend | None = None,
    spent_elsewhere: Callable[[Spend], tuple[int, float]] | None = None,
) -> ShardOutcome:
    """Run ``tasks`` of the context's run and store them (outputs and results together, per
    grading batch): the run's own pipeline, with the shard in place of the dataset. ``share``
    shards of the run running at once in this process split its ``maxConcurrency``, so a
    worker calls the target as many times at once as an embedded run would.

    The shard's calls are counted in ``spend`` (the caller's, so it can share them while the
    shard runs); ``spent_elsewhere(spend)`` is the (tokens, USD) the rest of the run spent —
    judges, other shards, other workers — so the run's budget holds across all of them."""
    row = RunRow(db, kind="run", spec={})
    row.adopt(context.run_id)
    spec = context.spec
    if share > 1:
        spec = dataclasses.replace(spec, max_concurrency=-(-spec.max_concurrency // share))
    executor = Executor(
        spec,
        context.target,
        context.render,
        context.runners,
        row,
        None,
        {},
        None,
        judge_spend=(lambda: spent_elsewhere(executor.spend)) if spent_elsewhere else None,
        time_limit=time_limit,
        tasks=tasks,
    )
    if spend is not None:
        executor.spend = spend
    began = time.monotonic()
    with use_judges(context.judges):
        await executor.run()
    return ShardOutcome(
        executor.done_tasks, executor.infra, time.monotonic() - began, executor.stopped_reason
    )


__all__ = [
    "Dispatch",
    "Dispatched",
    "RunContext",
    "ShardOutcome",
    "execute_shard",
    "open_run_context",
]
