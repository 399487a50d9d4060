"""A stored run's tasks as its evaluators graded them, read back streaming.

A Score run's tasks are its dataset's records (trial 0), re-read from the file; a Run's (and a
grade run's, which copies its source's outputs) are its stored sample x trial outputs joined
with the samples of its dataset. Either way the dataset must be the version the run read.
Shared by bundles and review files, which must show the same evidence for the same task.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias

from evalsi.core import Record
from evalsi.datasets import FieldMap, open_dataset
from evalsi.runs import check_version, join_outputs, rebuild, source_dataset

if TYPE_CHECKING:
    from evalsi.core import RunInfo
    from evalsi.store import SqlStore

StoredTask: TypeAlias = tuple[int, int, str, str | None, Record]
"""``(seq, trial, status, error, record as graded)``."""


def stored_tasks(store: SqlStore, info: RunInfo) -> Generator[StoredTask]:
    """Every stored task of ``info``, in (seq, trial) order; closing the generator lets the
    dataset file and the store's cursor go at once.

    Raises:
        UserError: the dataset cannot be opened, or changed since the run read it.
    """
    if info.kind == "score":
        fields = FieldMap(**(info.spec.get("fields") or {}))
        dataset = open_dataset(str(info.spec.get("data", "")), fields=fields)
        check_version(info, dataset)
        trials = range(score_trials(info))  # results ingested with trials: a task each
        batches = dataset.iter_batches(1024)
        try:
            seq = 0
            for batch in batches:
                for record in batch:
                    for trial in trials:
                        yield seq, trial, "ok", None, record
                    seq += 1
        finally:
            batches.close()
        return
    dataset, limit = source_dataset(info)
    check_version(info, dataset)
    # A few hundred rows at a time: an agent task's row holds its whole trajectory.
    outputs = store.iter_outputs(info.id, batch=256)
    joined = join_outputs(dataset, outputs, limit)
    try:
        for seq, record, rows in joined:
            for row in rows:
                ok = row.status == "ok"
                graded = rebuild(record, row) if ok else replace(record, trajectory=None)
                yield seq, row.trial, row.status, row.error, graded
    finally:
        _close(joined, outputs)


def score_trials(info: RunInfo) -> int:
    """A Score run's trials: 1, unless results computed elsewhere came in with more."""
    return int((info.summary or {}).get("trials") or 1) if info.kind == "score" else 1


def _close(*streams: Iterator[Any]) -> None:
    for stream in streams:
        close = getattr(stream, "close", None)  # generators typed as plain iterators
        if close is not None:
            close()


__all__ = ["StoredTask", "score_trials", "stored_tasks"]
