"""Grade the stored outputs of a Run into a new run (kind ``grade``), never calling the target.

Each task's ``Record`` is rebuilt from the source run's dataset (re-read with its field map and
joined by position, ``seq``) plus the output and usage the source stored; the evaluators then
grade it with the task's ``trial``. Task statuses carry over as the executor defines them
(``_execute``): ``target_error`` tasks are ERROR and ``skipped`` ones SKIPPED for every
evaluator; ``infra_error`` and ``cancelled`` tasks are copied as they are, counted in their own
columns and never graded. The outputs are copied into the new run too, so reports, ``compare``
and ``runs show`` read it like any Run; its figures come from the store (``_stored``), exactly
as a one-shot run's do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from evalsi.connectors import close_shared_session
from evalsi.core import (
    DatasetPin,
    Record,
    RunManifest,
    SourceRun,
    SpecError,
    UserError,
)
from evalsi.datasets import Dataset, FieldMap, open_dataset
from evalsi.evaluators import Registry, use_judges
from evalsi.runs._judges import build_judges, check_judges, judge_specs, run_judges
from evalsi.runs._outputs import answered, grade_tasks, join_outputs, rebuild
from evalsi.runs._plan import EvaluatorLike, bind_all, require_sandboxes, runners_for
from evalsi.runs._run_result import RunResult
from evalsi.runs._run_row import RunRow, StoreLike, open_store
from evalsi.runs._stored_run import conclude_stored_run
from evalsi.runs.gates import parse_gates
from evalsi.store import OutputRow, RunInfo

BATCH = 256
READ_BATCH = 256
GRADABLE = ("done", "stopped")


async def grade_run(
    store: StoreLike,
    source_run: str,
    evaluators: Iterable[EvaluatorLike],
    *,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    gates: str | Sequence[str] = (),
    min_completion_rate: float = 0.8,
    max_evaluator_error_rate: float = 0.1,
    name: str = "",
    registry: Registry,
    judges: Mapping[str, Any] | None = None,
    clock: Callable[[], float] = time.time,
) -> RunResult:
    """Grade the outputs stored by Run ``source_run`` with ``evaluators``, into a new run.

    Args:
        store: the store holding the source run (a path, ``":memory:"`` or an open store); the
            new run goes there too.
        source_run: a Run's id (or unique prefix, or ``latest``), typically one made with
            ``execute_only=True``; any finished Run can be graded again with other evaluators.
        evaluators, params, gates, min_completion_rate, max_evaluator_error_rate: as for
            ``evalsi.evaluate``.
        name: a label for the new run (default: the source run's name).
        registry: the evaluators to resolve names against, chosen by the caller.
        judges: judges for judge-pack evaluators (as for ``evalsi.evaluate``); default: the
            judges of the source run's spec.
        clock: unix seconds, for when the run was created and ended and how long it took.

    Raises:
        UserError: the source is not a finished Run, or its dataset changed since it ran.

    The target is never called. Trials are preserved, so pass@k and pass^k come out as for a
    one-shot run of the same spec with these evaluators.
    """
    db = open_store(store)
    source = db.get_run(source_run)
    _check_source(source)
    bound = bind_all(evaluators, registry=registry, params=params)
    require_sandboxes(bound)
    runners = runners_for(bound)
    rates = {
        "min_completion_rate": min_completion_rate,
        "max_evaluator_error_rate": max_evaluator_error_rate,
    }
    parsed_gates = parse_gates(gates, bound, **rates)
    # Default: the judges the source run's spec configured.
    specs = judge_specs(
        judges if judges is not None else run_judges(source.spec.get("document") or {})
    )
    check_judges(bound, specs)  # no default judge: refuse before reading anything
    dataset, limit = source_dataset(source)
    version = check_version(source, dataset)
    trials = int(source.spec.get("trials", 1))
    spec: dict[str, Any] = {
        "source_run": source.id,
        "evaluators": [b.spec() for b in bound],
        "data": source.spec.get("data", dataset.name),
        "dataset": source.spec.get("dataset"),
        "trials": trials,
        "seed": source.spec.get("seed", 0),
    }
    if parsed_gates:
        spec["gates"] = [g.expr for g in parsed_gates]
        spec.update(rates)
    row = RunRow(db, kind="grade", spec=spec, name=name or source.name, clock=clock)
    db, run_id = row.open()
    started = clock()
    samples = 0
    built = build_judges(specs, db, bound)

    async def grade(pending: list[tuple[Record, OutputRow]]) -> None:
        tasks = [(rebuild(r, row) if row.status == "ok" else r, row) for r, row in pending]
        db.write_tasks(run_id, [row for _, row in pending], await grade_tasks(runners, tasks))

    try:
        pending: list[tuple[Record, OutputRow]] = []
        with use_judges(built):
            for seq, record, rows in join_outputs(dataset, db.iter_outputs(source.id), limit):
                samples = seq + 1
                pending.extend((record, row) for row in rows)
                if len(pending) >= BATCH:
                    await grade(pending)
                    pending = []
            if pending:
                await grade(pending)
        if samples == 0:
            raise dataset.nothing_read()
    except BaseException as e:
        row.fail(e, records=samples)
        raise
    finally:
        if built:  # the judges' HTTP session belongs to this event loop
            await close_shared_session()
    spend = {"tokens": 0, "usd": 0.0, "calls": 0, "seconds": round(clock() - started, 3)}
    before = RunManifest.from_dict(source.manifest or {})
    manifest = RunManifest.capture(
        spec_hash=source.spec.get("spec_hash"),
        source_run=SourceRun(source.id, source.spec.get("spec_hash"), version),
        evaluators=[b.manifest_entry() for b in bound],
        dataset=DatasetPin(dataset.name, version, samples),
        target=before.target,
        trials=trials,
        seeds=before.seeds,
        unpinned=before.unpinned,
    )
    return conclude_stored_run(
        row,
        bound=bound,
        runners=runners,
        gates=parsed_gates,
        rates=rates,
        trials=trials,
        seed=int(source.spec.get("seed", 0)),
        answered=answered(dataset, db.iter_outputs(source.id), limit),
        dataset=(dataset.name, version),
        samples=samples,
        stopped_reason=None,
        spend=spend,
        manifest=manifest,
        judges=built,
        warnings=[w.to_dict() for w in dataset.warnings],
        extra={"source_run": source.id},
    )


def _check_source(source: RunInfo) -> None:
    if source.kind != "run":
        raise UserError(
            f"run {source.id} is a {source.kind} run; only Run runs (evalsi run) hold target "
            "outputs to grade"
        )
    if source.status not in GRADABLE:
        raise UserError(
            f"run {source.id} is {source.status}; only a finished run can be graded",
            hint=f"complete it first: evalsi run -f SPEC --resume {source.id}",
        )


def source_dataset(source: RunInfo) -> tuple[Dataset, int | None]:
    """The source run's dataset, opened as the run opened it (path, field map, limit)."""
    data = source.spec.get("data")
    described = source.spec.get("dataset")
    if not isinstance(described, dict):  # a run stored before the dataset was recorded
        document = source.spec.get("document") or {}
        described = document.get("dataset") if "target" in document else None
    if not data or not isinstance(described, dict):
        raise UserError(
            f"run {source.id} does not record its dataset's field map; it cannot be graded again",
            hint="run the spec again with this evalsi version",
        )
    fields = described.get("fields") or {}
    limit = described.get("limit")
    try:
        dataset = open_dataset(str(data), fields=FieldMap(**fields))
    except TypeError as e:
        raise SpecError(f"run {source.id}: bad stored field map {fields!r}: {e}") from e
    return dataset, int(limit) if limit is not None else None


def check_version(source: RunInfo, dataset: Dataset) -> str | None:
    """Read the dataset once for its content version; it must be the one the source read."""
    for _ in dataset.iter_batches(READ_BATCH):
        pass
    current = dataset.version
    recorded = ((source.summary or {}).get("dataset") or {}).get("version")
    if recorded is not None and current != recorded:
        raise UserError(
            f"the dataset {dataset.name} changed since run {source.id} read it "
            f"(version {recorded}, now {current}); its outputs no longer match the samples",
            hint="restore the dataset the run used, or run the spec again",
        )
    return current if recorded is None else recorded


__all__ = ["check_version", "grade_run", "source_dataset"]
