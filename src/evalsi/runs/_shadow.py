"""Shadow replay: promoted production inputs run against a candidate agent, compared with what
was recorded, paired per row.

Two runs go into the store: the *recorded* run grades the rows' behaviour as it is (a Score
run over the rows' ``output``/``trajectory``/``usage``) and the *candidate* run calls the
candidate spec's target on the rows' inputs (its dataset replaced by the rows, one trial, the
recorded fields left out). Both use the candidate spec's evaluators, so ``compare_runs``
pairs them by row id: per metric a delta with its paired bootstrap interval, McNemar's test for
pass/fail. A *regression* is a metric whose verdict is ``regressed`` (the interval lies wholly
on the worse side of 0), never a change the pairs cannot tell from noise.

The candidate reads an *inputs* file, not the rows: the rows without their recorded fields
(``candidate_inputs``). A field map that only leaves a key unread keeps it in the sample's
``metadata``, where a judge or a metadata-reading evaluator would see the recorded answer; the
inputs file keeps the row's own metadata (``promoted`` provenance included) and nothing else.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from evalsi.core import UserError
from evalsi.datasets import FieldMap, open_dataset, record_to_row
from evalsi.evaluators import Registry
from evalsi.runs._run_result import RunResult
from evalsi.runs._run_row import StoreLike, open_store
from evalsi.runs._score import score_async
from evalsi.runs.compare import Comparison, MetricComparison, compare_runs
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec
from evalsi.store import SqlStore

EXIT_OK: Final = 0
EXIT_REGRESSION: Final = 1
EXIT_CANNOT_JUDGE: Final = 2
EXIT_INFRA: Final = 3

RECORDED_FIELDS: Final = ("output", "trajectory", "usage")
"""The row fields holding recorded behaviour: graded in the recorded run, never read as the
candidate's samples (the candidate produces its own)."""

READ_BATCH: Final = 512
VERSIONS_DIFFER: Final = "dataset versions differ"

Execute = Callable[[RunSpec, SqlStore], Awaitable[RunResult]]
"""Runs a spec into a store: the caller's choice of harness and exporters (``evalsi.run``)."""


@dataclass(frozen=True, slots=True)
class ShadowResult:
    """The recorded run, the candidate run and their paired comparison."""

    recorded_run: str
    candidate_run: str
    rows: int
    comparison: Comparison
    candidate: RunResult

    @classmethod
    def of(
        cls, recorded_run: str, rows: int, comparison: Comparison, candidate: RunResult
    ) -> ShadowResult:
        """The result, without the comparison's warning that the two runs read different
        dataset versions: by design (the candidate reads the rows' inputs file), and its
        rows are the same ids."""
        kept = [w for w in comparison.warnings if not w.startswith(VERSIONS_DIFFER)]
        comparison = dataclasses.replace(comparison, warnings=kept)
        return cls(recorded_run, candidate.run_id, rows, comparison, candidate)

    @property
    def regressions(self) -> list[MetricComparison]:
        """Metrics significantly worse in the candidate (paired interval wholly below 0 for a
        higher-is-better metric)."""
        return [m for m in self.comparison.metrics if m.verdict == "regressed"]

    @property
    def exit_code(self) -> int:
        """0 no significant regression; 1 a metric regressed or the candidate failed on a row
        (``target_errors``); 3 the candidate run lost tasks to infrastructure or did not finish
        (its comparison would be unfair)."""
        if self.candidate.infra_errors or self.candidate.status not in ("done", "failed"):
            return EXIT_INFRA
        return EXIT_REGRESSION if self.regressions or self.target_errors else EXIT_OK

    @property
    def target_errors(self) -> int:
        """Rows the candidate failed on its own side (it raised, a 4xx): never scored, so no
        metric pairs them, yet a production input the candidate cannot answer is a regression."""
        return int(self.candidate.tasks.get("target_error", 0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "recorded_run": self.recorded_run,
            "candidate_run": self.candidate_run,
            "rows": self.rows,
            "candidate": {
                "status": self.candidate.status,
                "tasks": dict(self.candidate.tasks),
                "infra_errors": self.candidate.infra_errors,
            },
            "comparison": self.comparison.to_dict(),
            "regressions": [_regression(m) for m in self.regressions]
            + (
                [{"metric": "target_error", "count": self.target_errors}]
                if self.target_errors
                else []
            ),
        }


def _regression(m: MetricComparison) -> dict[str, Any]:
    return {
        "evaluator": m.evaluator,
        "metric": m.metric,
        "delta": m.delta,
        "ci": [m.ci.low, m.ci.high],
        "mean_recorded": m.mean_a,
        "mean_candidate": m.mean_b,
        "n_paired": m.n_paired,
    }


def check_rows(path: str) -> int:
    """How many rows ``path`` holds; refused when empty or when a row id repeats (the pairing
    is by id), streaming, ids kept as a set."""
    dataset = open_dataset(path)
    seen: set[str] = set()
    for batch in dataset.iter_batches(READ_BATCH):
        for record in batch:
            if record.id in seen:
                raise UserError(
                    f"{path}: row id {record.id!r} repeats; shadow pairs the recorded and the "
                    "candidate behaviour by row id",
                    hint="promote again (its ids are unique), or give each row its own id",
                )
            seen.add(record.id)
    if not seen:
        raise UserError(f"{path}: no rows to replay", hint="promote some first: evalsi promote")
    return len(seen)


def candidate_inputs(rows: str, folder: str | os.PathLike[str]) -> str:
    """The rows without their recorded behaviour, as a JSONL file in ``folder``: named by its
    content (``<stem>-<sha256 prefix>.jsonl``), so the same rows give the same file and a run
    that names it still reads it later (``evalsi promote --run`` of the candidate run)."""
    lines = []
    for batch in open_dataset(rows).iter_batches(READ_BATCH):
        for record in batch:
            bare = dataclasses.replace(record, output=None, trajectory=None, usage=None)
            row = record_to_row(bare)
            for key in RECORDED_FIELDS:  # a row's own metadata may carry them too
                if isinstance(row.get("metadata"), dict):
                    row["metadata"].pop(key, None)
            lines.append(orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n")
    content = b"".join(lines)
    stem = Path(rows).name.split(".", 1)[0] or "rows"
    target = Path(folder) / f"{stem}-{hashlib.sha256(content).hexdigest()[:16]}.jsonl"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(content)
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return str(target)


def candidate_spec(spec: RunSpec, rows: str, evaluators: Sequence[str] | None = None) -> RunSpec:
    """``spec`` with ``rows`` (``candidate_inputs``: no recorded fields) as its dataset read
    with the default field map, one trial, and only ``evaluators`` (by instance name or ref)."""
    entries = _chosen(spec, evaluators)
    dataset = DatasetSpec(source=rows)  # canonical keys, as promote writes them
    raw = spec.raw
    if raw:
        body = {
            **raw.get("spec", {}),
            "dataset": {"path": rows},
            "trials": 1,
            "evaluators": [e.as_mapping() for e in entries],
        }
        if evaluators:
            body.pop("gates", None)
        raw = {**raw, "spec": body}
    return dataclasses.replace(
        spec,
        name=f"{spec.name} (shadow)",
        dataset=dataset,
        trials=1,
        evaluators=entries,
        gates=() if evaluators else spec.gates,
        raw=raw,
    )


def _chosen(spec: RunSpec, names: Sequence[str] | None) -> tuple[EvaluatorEntry, ...]:
    if not names:
        if not spec.evaluators:
            raise UserError("the candidate spec has no evaluators: nothing to compare on")
        return spec.evaluators
    by_name = {e.name or e.ref: e for e in spec.evaluators}
    picked = []
    for name in names:
        entry = by_name.get(name) or next((e for e in spec.evaluators if e.ref == name), None)
        picked.append(entry if entry is not None else EvaluatorEntry(ref=name))
    return tuple(picked)


async def shadow_async(
    spec: RunSpec,
    rows: str,
    *,
    execute: Execute,
    registry: Registry,
    store: StoreLike = None,
    evaluators: Sequence[str] | None = None,
    judges: Mapping[str, Any] | None = None,
    level: float = 0.95,
    seed: int = 0,
    inputs_dir: str | os.PathLike[str] | None = None,
) -> ShadowResult:
    """Grade the rows' recorded behaviour, run the candidate on their inputs, compare.

    Args:
        spec: the candidate's ``EvalRun`` (its target, evaluators and judges are used; its
            dataset is replaced by ``rows``).
        rows: a JSONL file of promoted rows (``evalsi promote``).
        execute: runs the candidate spec into the store (e.g. ``evalsi.run_async``).
        registry: evaluators to resolve refs against.
        store: where both runs go (default ``.evalsi/evalsi.db``).
        evaluators: compare on these only (instance names or refs; default the spec's).
        judges: judges for judge-pack evaluators (default: the spec's).
        level, seed: the comparison's confidence level and bootstrap seed.
        inputs_dir: where the candidate's inputs file goes (default ``.evalsi/shadow``).

    Raises:
        UserError: no rows, a repeated row id, a level outside (0, 1), no evaluators.
    """
    if not 0.0 < level < 1.0:
        raise UserError(f"the confidence level must be strictly between 0 and 1, got {level}")
    count = check_rows(rows)
    folder = inputs_dir if inputs_dir is not None else Path.cwd() / ".evalsi" / "shadow"
    candidate = candidate_spec(spec, candidate_inputs(rows, folder), evaluators)
    db = open_store(store)
    recorded = await score_async(
        rows,
        [e.as_mapping() for e in candidate.evaluators],
        fields=FieldMap(),
        seed=seed,
        store=db,
        name=f"{spec.name} (recorded)",
        registry=registry,
        judges=judges if judges is not None else dict(spec.judges),
    )
    result = await execute(candidate, db)
    comparison = compare_runs(db, recorded.run_id, result.run_id, seed=seed, level=level)
    return ShadowResult.of(recorded.run_id, count, comparison, result)


__all__ = [
    "EXIT_CANNOT_JUDGE",
    "EXIT_INFRA",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "RECORDED_FIELDS",
    "ShadowResult",
    "candidate_inputs",
    "candidate_spec",
    "check_rows",
    "shadow_async",
]
