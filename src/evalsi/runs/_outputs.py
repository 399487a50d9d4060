"""A Run's outputs: the stored ones joined back with its dataset, and finished tasks graded.

Grading a Run again (``grade_run``) and its dataset-scope phase both read a Run this way; the
dataset must be the one the run read (each sample's id is checked against the stored one). The
executor and ``grade_run`` grade finished tasks alike (``grade_tasks``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Sequence

import orjson

from evalsi.core import Content, Outcome, Record, ResultBatch, Trajectory, Usage, UserError
from evalsi.datasets import Dataset, read_trajectory
from evalsi.evaluators import RecordRunner, Runner
from evalsi.store import OutputRow, TaskResults

READ_BATCH = 256


def join_outputs(
    dataset: Dataset, rows: Iterator[OutputRow], limit: int | None
) -> Iterator[tuple[int, Record, list[OutputRow]]]:
    """``(seq, record, its stored output rows)`` for every sample the source run stored."""
    row = next(rows, None)
    seq = 0
    batches = dataset.iter_batches(READ_BATCH)
    try:
        for batch in batches:
            for record in batch:
                if row is None or (limit is not None and seq >= limit):
                    return
                found: list[OutputRow] = []
                while row is not None and row.seq == seq:
                    if row.record_id != record.id:
                        raise UserError(
                            f"the dataset {dataset.name} changed since its run: sample {seq} is "
                            f"{record.id!r}, the run stored {row.record_id!r}",
                            hint="restore the dataset the run used, or run the spec again",
                        )
                    found.append(row)
                    row = next(rows, None)
                if found:
                    yield seq, record, found
                seq += 1
    finally:
        batches.close()
    if row is not None:
        raise UserError(
            f"the dataset {dataset.name} changed since its run: it has {seq} samples, the run "
            f"stored outputs for sample {row.seq}",
            hint="restore the dataset the run used, or run the spec again",
        )


def as_answered(
    record: Record, output: Content | None, usage: Usage | None, trajectory: Trajectory | None
) -> Record:
    """The sample as its target answered it: the target's output, usage and trajectory.

    A dataset's trajectory is never graded as the agent's (a target that returned none has
    none): it is the reference, so when the sample has no reference, its tool calls become
    one (``{"tool_calls": [...]}``, the answer key the agent pack reads).
    """
    reference = record.reference
    if reference is None and record.trajectory is not None:
        calls = [s.tool_call for s in record.trajectory.steps if s.tool_call is not None]
        reference = Content.from_value(
            {"tool_calls": [{"name": c.name, "arguments": c.arguments} for c in calls]}
        )
    return dataclasses.replace(
        record, output=output, usage=usage, trajectory=trajectory, reference=reference
    )


def rebuild(record: Record, row: OutputRow) -> Record:
    """The record as the executor graded it: the sample plus the stored output, usage and
    trajectory."""
    return as_answered(
        record,
        Content.from_value(orjson.loads(row.output)) if row.output is not None else None,
        Usage(**orjson.loads(row.usage)) if row.usage is not None else None,
        read_trajectory(orjson.loads(row.trajectory), stored=True)
        if row.trajectory is not None
        else None,
    )


def answered(dataset: Dataset, rows: Iterator[OutputRow], limit: int | None) -> Iterator[Record]:
    """Every sample x trial the target answered (status ok), with its output and usage."""
    for _, record, found in join_outputs(dataset, rows, limit):
        for row in found:
            if row.status == "ok":
                yield rebuild(record, row)


FINISHED = ("ok", "target_error", "skipped")
"""The statuses of a finished task: it gets results, and a resume skips it. Tasks lost to
infrastructure or cancelled are redone, never graded."""


async def grade_tasks(
    runners: Sequence[Runner],
    tasks: Sequence[tuple[Record, OutputRow]],
    time_limit: float | None = None,
) -> list[TaskResults]:
    """Results of finished tasks, trial by trial, by evaluator index in the run: an ``ok``
    task's record (holding its output) goes through every record runner; a ``target_error``
    one is ERROR and a ``skipped`` one SKIPPED for each, with the reason. Dataset-scope runners
    grade apart, over every answered sample, once the run is graded. With ``time_limit``, sync
    evaluators grade in a thread, each call stopped after it."""
    record_runners = [(i, r) for i, r in enumerate(runners) if isinstance(r, RecordRunner)]
    by_trial: dict[int, list[tuple[Record, OutputRow]]] = {}
    for record, row in tasks:
        if row.status in FINISHED:
            by_trial.setdefault(row.trial, []).append((record, row))
    graded: list[TaskResults] = []
    for trial, group in by_trial.items():
        ok = [(record, row.seq) for record, row in group if row.status == "ok"]
        if ok:
            records, seqs = [r for r, _ in ok], [s for _, s in ok]
            for index, runner in record_runners:
                if runner.is_async:
                    batch = await runner.run_async(records, trial=trial)
                elif time_limit is None:
                    batch = runner.run(records, trial=trial)
                else:
                    batch = await asyncio.to_thread(
                        runner.run, records, trial=trial, time_limit=time_limit
                    )
                graded.append((index, seqs, batch))
        failed = [row for _, row in group if row.status != "ok"]
        if failed:
            seqs = [row.seq for row in failed]
            for index, runner in record_runners:
                graded.append((index, seqs, _unscored(runner, failed, trial)))
    return graded


def _unscored(runner: RecordRunner, rows: list[OutputRow], trial: int) -> ResultBatch:
    ids = [row.record_id for row in rows]
    batch = ResultBatch(runner.name, runner.ref, runner.metric, ids, trial=trial)
    for j, row in enumerate(rows):
        if row.status == "skipped":
            batch.set_outcome(j, Outcome.SKIPPED, row.error or "sample not sent")
        else:
            batch.set_outcome(j, Outcome.ERROR, f"target error: {row.error}")
    return batch
