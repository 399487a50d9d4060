"""Score: grade records that already hold outputs, streaming, and persist every result.

The data is read in batches; each batch goes through every evaluator (record scope: results
upserted under their task key and committed per batch; dataset scope: mapped values kept for
the reduce at the end). Statistics are computed once, at the end, from the packed values.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalsi.core import (
    DatasetPin,
    Record,
    ResultBatch,
    RunManifest,
    Seeds,
    UserError,
    content_hash,
    startup_mark,
)
from evalsi.datasets import FieldMap, open_dataset
from evalsi.evaluators import DatasetRunner, Registry, use_judges
from evalsi.runs._aggregate import Aggregator, ClusterKeys
from evalsi.runs._dataset_scope import cluster_dataset_runners, finish_dataset_scope
from evalsi.runs._failures import judged_nothing, stored_reasons
from evalsi.runs._gates import evaluate_gates, parse_gates
from evalsi.runs._judges import (
    JudgeLike,
    build_judges,
    check_judges,
    judge_specs,
    judges_manifest,
    judges_summary,
)
from evalsi.runs._plan import EvaluatorLike, bind_all, runners_for
from evalsi.runs._result import ScoreResult
from evalsi.runs._run_row import RunRow, StoreLike

if TYPE_CHECKING:  # SQLAlchemy loads when the store opens: after the first graded batch
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
    registry: Registry | None = None,
    progress: Progress | None = None,
    gates: str | Sequence[str] = (),
    min_completion_rate: float = 0.8,
    max_evaluator_error_rate: float = 0.1,
    judges: Mapping[str, JudgeLike] | None = None,
) -> ScoreResult:
    """Grade ``data`` with ``evaluators``; see ``evalsi.evaluate`` for the arguments."""
    if registry is None:
        from evalsi.packs import builtin_registry

        registry = builtin_registry()
    if bootstrap is not None and cluster_by is not None:
        raise UserError(
            "--bootstrap and --cluster-by cannot be combined yet: a record-level bootstrap "
            "would ignore the clusters and understate the uncertainty",
            hint="use --cluster-by alone (cluster-wilson for pass rates, cluster-t for numbers) "
            "or --bootstrap alone",
        )
    bound = bind_all(evaluators, registry=registry, params=params)
    runners = runners_for(bound)
    cluster_dataset_runners(runners, cluster_by)
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
    row = RunRow(store, kind="score", spec=spec, name=name)
    clients: dict[str, Any] = {}
    if specs:  # judges cache their answers in the store: open it before any record
        clients = build_judges(specs, row.store(), bound)
        spec["judges"] = judges_manifest(clients)
        row.open()
    aggregator = Aggregator(
        [(b.name, b.manifest.outputs) for b in bound],
        cluster_by=cluster_by,
        keep_values=bootstrap is not None,
    )
    cluster_keys = ClusterKeys(cluster_by) if cluster_by is not None else None
    done = 0
    try:
        with _young_gc_relaxed(), use_judges(clients), contextlib.ExitStack() as stack:
            writer: BackgroundWriter | None = None  # made once the first batch is graded
            for batch in dataset.iter_batches(batch_size):
                graded: list[tuple[int, int, ResultBatch]] = []
                if cluster_keys is not None:
                    cluster_keys.add(batch)
                for index, runner in enumerate(runners):
                    if isinstance(runner, DatasetRunner):
                        runner.feed(batch)
                        continue
                    results = (
                        await runner.run_async(batch) if runner.is_async else runner.run(batch)
                    )
                    aggregator.add(index, results, batch)
                    graded.append((index, done, results))
                startup_mark("first-record")  # bench/startup.py: time to the first graded batch
                db, run_id = row.open()
                if writer is None:
                    from evalsi.store import BackgroundWriter

                    writer = stack.enter_context(BackgroundWriter(db, run_id))
                writer.submit(graded)
                done += len(batch)
                if writer.submitted % PROGRESS_EVERY == 0:
                    db.set_progress(run_id, done)  # a killed run still says how far it got
                if progress is not None:
                    progress(done, dataset.bad_count)
                await asyncio.sleep(0)  # let Ctrl-C (task cancellation) reach us between batches
        if done == 0:  # nothing to grade: metrics over no record would read as a clean run
            raise dataset.nothing_read()
        cluster_warning = cluster_keys.check() if cluster_keys is not None else None
        db, run_id = row.open()
        reduced = finish_dataset_scope(runners, aggregator, seed=seed)
        db.write_batches(run_id, reduced.rows)
        metrics = aggregator.summaries(
            bootstrap=bootstrap, seed=seed, dataset_intervals=reduced.intervals
        )
        isolation = aggregator.isolation()
        gate_results = evaluate_gates(parsed_gates, metrics, **rates, isolation=isolation)
    except BaseException as e:  # record why the run stopped, then let the error go on
        row.fail(e, records=done)
        raise
    finally:
        if clients:  # the judges' HTTP session belongs to this event loop
            from evalsi.connectors import close_shared_session

            await close_shared_session()
    manifest = _manifest(spec, bound, dataset.name, dataset.version, done)
    warnings = [w.to_dict() for w in dataset.warnings]
    if cluster_warning is not None:
        warnings.append(cluster_warning)
    warnings.extend(judged_nothing(metrics, stored_reasons(db, run_id)))
    summary = {
        "metrics": [m.to_dict() for m in metrics],
        "gates": gate_results,
        "dataset": {"source": dataset.name, "version": dataset.version},
        "bad_records": dataset.bad_count,
        "bad_examples": [list(b) for b in dataset.bad_records[:10]],
        "isolation": [i.to_dict() for i in isolation],
        "warnings": warnings,
    }
    if clients:
        summary["judges"] = judges_summary(clients)
    manifest = manifest.finished(
        isolation=[i.to_dict() for i in isolation],
        judges=judges_manifest(clients) if clients else None,
    )
    db.finish_run(run_id, status="done", records=done, summary=summary, manifest=manifest.to_dict())
    return ScoreResult(
        run_id=run_id,
        status="done",
        records=done,
        metrics=metrics,
        dataset_source=dataset.name,
        dataset_version=dataset.version,
        bad_records=dataset.bad_count,
        bad_examples=list(dataset.bad_records[:10]),
        evaluators=[b.spec() for b in bound],
        store=db,
        gates=gate_results,
        dataset_results=reduced.results,
        isolation=isolation,
        warnings=warnings,
    )


def _data_location(data: Any, name: str) -> str:
    """Where the data can be read again (reports re-read it): an absolute path for local files."""
    if isinstance(data, (str, os.PathLike)) and "://" not in str(data):
        return str(Path(data).resolve())
    return name


@contextlib.contextmanager
def _young_gc_relaxed(threshold: int = 50_000) -> Iterator[None]:
    """Collect the young generation less often while a run streams batches.

    Each batch keeps thousands of fresh objects alive until it is graded and written, so the
    default threshold (700 allocations) rescans them again and again, which costs about a
    quarter of the run's time. Nothing here forms reference cycles to wait for; the older
    generations and the previous setting are left as they were and restored.
    """
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], threshold), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _manifest(
    spec: dict[str, Any],
    bound: list[Any],
    source: str,
    version: str | None,
    records: int,
) -> RunManifest:
    return RunManifest.capture(
        spec_hash=content_hash(spec),
        evaluators=[b.manifest_entry() for b in bound],
        dataset=DatasetPin(source, version, records),
        seeds=Seeds(spec.get("seed", 0)),
    )


__all__ = ["Progress", "Record", "score_async"]
