"""A Run's stored outputs joined back with its dataset: the samples as the target answered them.

Grading a Run again (``grade_run``) and its dataset-scope phase both read a Run this way; the
dataset must be the one the run read (each sample's id is checked against the stored one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import orjson

from evalsi.core import Content, Record, Trajectory, Usage, UserError
from evalsi.datasets import Dataset, read_trajectory
from evalsi.store import OutputRow

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
        read_trajectory(orjson.loads(row.trajectory)) if row.trajectory is not None else None,
    )


def answered(dataset: Dataset, rows: Iterator[OutputRow], limit: int | None) -> Iterator[Record]:
    """Every sample x trial the target answered (status ok), with its output and usage."""
    for _, record, found in join_outputs(dataset, rows, limit):
        for row in found:
            if row.status == "ok":
                yield rebuild(record, row)
