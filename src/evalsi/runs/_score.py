"""Score: grade records that already hold outputs, streaming, and persist every result.

The data is read in batches; each batch goes through every evaluator (record scope: results
upserted under their task key and committed per batch; dataset scope: mapped values kept for
the reduce at the end). Statistics are computed once, at the end, from the packed values.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalsi.core import Record, RunStatus, UserError, startup_mark
from evalsi.datasets import FieldMap, open_dataset
from evalsi.evaluators import RecordRunner, Registry
from evalsi.runs._failures import judged_nothing, stored_reasons
from evalsi.runs._gate_data import stored_gate_data
from evalsi.runs._gc import young_gc_relaxed
from evalsi.runs._judges import JudgeLike, build_judges, check_judges, judge_specs, judges_manifest
from evalsi.runs._plan import EvaluatorLike, bind_all, require_sandboxes
from evalsi.runs._result import ScoreResult
from evalsi.runs._run_row import RunRow, StoreLike
from evalsi.runs._session import ScoreSession
from evalsi.runs._test_plan import register_plan
from evalsi.runs.gates import parse_gates

if TYPE_CHECKING:  # SQLAlchemy loads when the store opens: after the first graded batch
    from evalsi.specs import Declaration
    from evalsi.store import BackgroundWriter

PROGRESS_EVERY = 16
"""Batches between updates of the run's record count in the store."""

Progress = Callable[[int, int], None]
"""Called after each batch with (records done, bad records skipped)."""


async def score_async(
    data: Any,
    evaluators: Iterable[EvaluatorLike],
    *,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    fields: FieldMap | None = None,
    cluster_by: str | None = None,
    bootstrap: Literal["percentile", "bca"] | None = None,
    seed: int = 0,
    store: StoreLike = None,
    on_bad_record: Literal["fail", "skip"] = "fail",
    batch_size: int = 2048,
    name: str = "",
    registry: Registry,
    progress: Progress | None = None,
    gates: str | Sequence[str] = (),
    min_completion_rate: float = 0.8,
    max_evaluator_error_rate: float = 0.1,
    judges: Mapping[str, JudgeLike] | None = None,
    clock: Callable[[], float] = time.time,
    declaration: Declaration | None = None,
) -> ScoreResult:
    """Grade ``data`` with ``evaluators``; see ``evalsi.evaluate`` for the arguments
    (``clock``: unix seconds, for when the run was created and ended)."""
    if declaration is not None and declaration.exclude:
        raise UserError(
            "a Score run grades every record it is given: its declaration cannot exclude "
            f"scenarios ({', '.join(repr(s) for s, _ in declaration.exclude[:3])})",
            hint="leave the records out of the data, or exclude them in an EvalRun",
        )
    if declaration is not None and isinstance(data, Iterator):
        raise UserError(
            "a declared run reads its data twice (the test plan lists it first): pass a file "
            "or a list, not an iterator"
        )
    if bootstrap is not None and cluster_by is not None:
        raise UserError(
            "--bootstrap and --cluster-by cannot be combined yet: a record-level bootstrap "
            "would ignore the clusters and understate the uncertainty",
            hint="use --cluster-by alone (cluster-wilson for pass rates, cluster-t for numbers) "
            "or --bootstrap alone",
        )
    bound = bind_all(evaluators, registry=registry, params=params)
    require_sandboxes(bound)
    rates = {
        "min_completion_rate": min_completion_rate,
        "max_evaluator_error_rate": max_evaluator_error_rate,
    }
    parsed_gates = parse_gates(gates, bound, **rates)  # every gate checked before any data
    specs = judge_specs(judges)
    check_judges(bound, specs)  # no default judge: a missing one stops the run before data
    dataset = open_dataset(data, fields=fields, on_bad_record=on_bad_record)
    spec: dict[str, Any] = {
        "evaluators": [b.spec() for b in bound],
        "data": _data_location(data, dataset.name),
        "fields": dataclasses.asdict(fields or FieldMap()),
        "cluster_by": cluster_by,
        "bootstrap": bootstrap,
        "seed": seed,
        "on_bad_record": on_bad_record,
    }
    if parsed_gates:
        spec["gates"] = [g.expr for g in parsed_gates]
        spec.update(rates)
    plan = register_plan(
        kind="score",
        name=name,
        declaration=declaration,
        thresholds=(),
        dataset=open_dataset(data, fields=fields, on_bad_record=on_bad_record)
        if declaration is not None and isinstance(data, str | os.PathLike)
        else dataset,
        evaluators=spec["evaluators"],
        trials=1,
        seed=seed,
        spec_hash=None,
        rates=rates,
    )
    spec["test_plan"] = plan.stored()
    row = RunRow(store, kind="score", spec=spec, name=name, clock=clock)
    if plan.declared:  # registered in the store before the first record is graded
        row.open()
    clients: dict[str, Any] = {}
    if specs:  # judges cache their answers in the store: open it before any record
        clients = build_judges(specs, row.store(), bound)
        spec["judges"] = judges_manifest(clients)
        row.open()
    session = ScoreSession(
        bound,
        spec=spec,
        cluster_by=cluster_by,
        bootstrap=bootstrap,
        seed=seed,
        gates=parsed_gates,
        rates=rates,
        judges=clients,
    )
    try:
        with young_gc_relaxed(), contextlib.ExitStack() as stack:
            writer: BackgroundWriter | None = None  # made once the first batch is graded
            for batch in dataset.iter_batches(batch_size):
                graded = (
                    await session.grade(batch) if session.has_async else session.grade_sync(batch)
                )
                startup_mark("first-record")  # bench/startup.py: time to the first graded batch
                db, run_id = row.open()
                if writer is None:
                    from evalsi.store import BackgroundWriter

                    writer = stack.enter_context(BackgroundWriter(db, run_id))
                writer.submit(graded)
                if writer.submitted % PROGRESS_EVERY == 0:
                    db.set_progress(run_id, session.records)  # a killed run says how far it got
                if progress is not None:
                    progress(session.records, dataset.bad_count)
                await asyncio.sleep(0)  # let Ctrl-C (task cancellation) reach us between batches
        if session.records == 0:  # nothing to grade: metrics over no record would read clean
            raise dataset.nothing_read()
        db, run_id = row.open()
        scope = [i for i, r in enumerate(session.runners) if isinstance(r, RecordRunner)]
        end = session.conclude(
            source=dataset.name,
            version=dataset.version,
            warnings=[w.to_dict() for w in dataset.warnings],
            bad_records=dataset.bad_count,
            bad_examples=dataset.bad_records[:10],
            data=stored_gate_data(db, run_id, trials=1, record_scope=scope),
        )
        db.write_batches(run_id, end.dataset_rows)
    except BaseException as e:  # record why the run stopped, then let the error go on
        row.fail(e, records=session.records)
        raise
    finally:
        if clients:  # the judges' HTTP session belongs to this event loop
            from evalsi.connectors import close_shared_session

            await close_shared_session()
    nothing = judged_nothing(end.metrics, stored_reasons(db, run_id))
    end.summary["warnings"].extend(nothing)
    row.finish(RunStatus.DONE, records=session.records, summary=end.summary, manifest=end.manifest)
    return ScoreResult(
        run_id=run_id,
        status="done",
        records=session.records,
        metrics=end.metrics,
        dataset_source=dataset.name,
        dataset_version=dataset.version,
        bad_records=dataset.bad_count,
        bad_examples=list(dataset.bad_records[:10]),
        evaluators=[b.spec() for b in bound],
        store=db,
        gates=end.gates,
        dataset_results=end.dataset_results,
        isolation=end.isolation,
        warnings=end.summary["warnings"],
    )


def _data_location(data: Any, name: str) -> str:
    """Where the data can be read again (reports re-read it): an absolute path for local files."""
    if isinstance(data, (str, os.PathLike)) and "://" not in str(data):
        return str(Path(data).resolve())
    return name


__all__ = ["Progress", "Record", "score_async"]
