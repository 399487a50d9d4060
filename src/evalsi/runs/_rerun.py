"""Replay a stored run from the spec it stored: a Run calls its target again, a grade run grades
its source's outputs again. The result is a new run; the original is left as it was.

A Run stores the spec document it was started with (``spec.document``: the YAML as written, or
the fields of a spec built in code) and the file it came from (``spec.source``); the dataset is
the resolved path the run read (``spec.data``), so a rerun reads the same file wherever it is
started. What cannot be pinned (closed API models, unversioned services) is listed by
``unpinned``: a rerun of those is not fully reproducible.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalsi.connectors import Resilience
from evalsi.core import SpecError, UserError
from evalsi.evaluators import Registry
from evalsi.runs._execute import execute_run
from evalsi.runs._grade import grade_run
from evalsi.runs._run_result import RunResult

if TYPE_CHECKING:
    from evalsi.agents import RemoteHarness
from evalsi.runs._run_row import StoreLike, open_store
from evalsi.runs._scheduler import RunProgress
from evalsi.specs import BudgetSpec, DatasetSpec, EvaluatorEntry, JudgeSpec, RunSpec, TargetSpec
from evalsi.store import RunInfo


def unpinned(store: StoreLike, run_id: str) -> list[str]:
    """What about a stored run cannot be pinned (from its manifest), so a rerun may differ."""
    info = open_store(store, create=False).get_run(run_id)
    return list((info.manifest or {}).get("unpinned") or [])


async def rerun_run(
    store: StoreLike,
    run_id: str,
    *,
    progress: RunProgress | None = None,
    registry: Registry,
    resilience: Resilience | None = None,
    remote_harness: RemoteHarness | None = None,
) -> RunResult:
    """Replay run ``run_id`` (a Run or a grade run) from its stored spec, as a new run.

    An execute-only Run is replayed execute-only. Raises ``UserError`` for a Score run (rerun
    it with ``evalsi eval``) or a run that did not store its spec.
    """
    db = open_store(store, create=False)
    info = db.get_run(run_id)
    if info.kind == "grade":
        spec = info.spec
        return await grade_run(
            db,
            str(spec["source_run"]),
            list(spec.get("evaluators") or []),
            gates=list(spec.get("gates") or []),
            min_completion_rate=float(spec.get("min_completion_rate", 0.8)),
            max_evaluator_error_rate=float(spec.get("max_evaluator_error_rate", 0.1)),
            name=info.name,
            registry=registry,
        )
    if info.kind != "run":
        raise UserError(
            f"run {info.id} is a {info.kind} run; rerun replays Run and grade runs",
            hint="grade the data again with `evalsi eval`",
        )
    return await execute_run(
        stored_spec(info),
        store=db,
        progress=progress,
        registry=registry,
        resilience=resilience,
        execute_only=info.spec.get("graded", True) is False,
        remote_harness=remote_harness,
    )


def stored_spec(info: RunInfo) -> RunSpec:
    """The ``RunSpec`` a Run was started with, rebuilt from what it stored."""
    stored = info.spec
    document = stored.get("document")
    if not isinstance(document, dict) or not document:
        raise UserError(f"run {info.id} did not store its spec; it cannot be rerun")
    if "apiVersion" in document:  # the YAML document as written
        from evalsi.specs import run_spec_from_dict

        source = str(stored.get("source") or "")
        base = Path(source).parent if source else None
        spec = run_spec_from_dict(document, source=source, base_dir=base)
    else:  # a spec built in code: its fields
        spec = _from_fields(info.id, document, stored)
    data = stored.get("data")
    if data and spec.dataset.source != data:  # the path the run read, wherever we are now
        spec = dataclasses.replace(spec, dataset=dataclasses.replace(spec.dataset, source=data))
    return spec


def _from_fields(run_id: str, doc: dict[str, Any], stored: dict[str, Any]) -> RunSpec:
    try:
        budget = stored.get("budget")
        return RunSpec(
            name=str(doc.get("name", "")),
            target=TargetSpec(**doc["target"]),
            dataset=DatasetSpec(**doc["dataset"]),
            evaluators=tuple(EvaluatorEntry(**e) for e in doc.get("evaluators", [])),
            trials=int(doc.get("trials", 1)),
            max_concurrency=int(stored.get("max_concurrency", 16)),
            gates=tuple(doc.get("gates", [])),
            min_completion_rate=float(stored.get("min_completion_rate", 0.8)),
            max_evaluator_error_rate=float(stored.get("max_evaluator_error_rate", 0.1)),
            budget=BudgetSpec(**budget) if isinstance(budget, dict) else None,
            seed=int(doc.get("seed", 0)),
            judges={k: JudgeSpec(**v) for k, v in doc.get("judges", {}).items()},
        )
    except (KeyError, TypeError, ValueError) as e:
        raise SpecError(f"run {run_id}: the stored spec cannot be rebuilt: {e}") from e


__all__ = ["rerun_run", "stored_spec", "unpinned"]
