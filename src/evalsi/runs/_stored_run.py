"""The end of a run whose results are in the store: a Run, or a grade of one.

Both end the same way: figures recomputed from the store (so a resumed run reports what an
uninterrupted one would), the dataset-scope evaluators over every answered sample, the gates,
the status that follows from what was scored, and the run's summary and manifest stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalsi.core import Record, RunManifest, RunStatus
from evalsi.evaluators import BoundEvaluator, RecordRunner, Runner
from evalsi.runs._dataset_scope import dataset_scope_of_outputs, in_run_order
from evalsi.runs._failures import (
    describe_causes,
    failure_causes,
    failure_warnings,
    judged_nothing,
    nothing_scored,
    stored_reasons,
)
from evalsi.runs._gate_data import stored_gate_data
from evalsi.runs._judges import judges_manifest, judges_summary
from evalsi.runs._outputs import FINISHED
from evalsi.runs._run_result import RunResult
from evalsi.runs._stored import summarize_stored
from evalsi.runs.gates import Gate, evaluate_gates

if TYPE_CHECKING:
    from evalsi.runs._run_row import RunRow


def conclude_stored_run(
    row: RunRow,
    *,
    bound: Sequence[BoundEvaluator],
    runners: Sequence[Runner],
    gates: Sequence[Gate],
    rates: Mapping[str, float],
    trials: int,
    seed: int,
    answered: Iterable[Record],
    dataset: tuple[str, str | None],
    samples: int,
    stopped_reason: str | None,
    spend: Mapping[str, Any],
    manifest: RunManifest,
    judges: Mapping[str, Any],
    warnings: Sequence[dict[str, Any]] = (),
    bad_records: int = 0,
    extra: Mapping[str, Any] | None = None,
    lost_is_incomplete: bool = False,
) -> RunResult:
    """Summarise, gate, settle the status of and store the run of ``row``; its result.

    ``answered`` yields every answered sample x trial (read lazily, only when a dataset-scope
    evaluator needs them); ``dataset`` is (name, version); ``stopped_reason`` says why the
    tasks stopped early (a budget); ``extra`` adds keys to the stored summary. With
    ``lost_is_incomplete`` (a Run), a run whose every task was lost to infrastructure ends
    ``incomplete`` (exit 3, resumable) rather than ``failed``.
    """
    db, run_id = row.open()
    counts = db.output_counts(run_id)
    stored = summarize_stored(
        db,
        run_id,
        [(b.name, b.manifest.ref.name, b.manifest.outputs) for b in bound],
        trials=trials,
        task_counts=counts,
    )
    corpus, reduced = dataset_scope_of_outputs(runners, bound, answered, trials=trials, seed=seed)
    db.write_batches(run_id, reduced.rows)
    metrics = in_run_order(bound, stored.without(corpus), corpus)
    data = stored_gate_data(
        db,
        run_id,
        trials=trials,
        record_scope=[i for i, r in enumerate(runners) if isinstance(r, RecordRunner)],
    )
    gate_results = evaluate_gates(gates, metrics, **rates, isolation=stored.isolation, data=data)
    status = RunStatus.STOPPED if stopped_reason else RunStatus.DONE
    causes = failure_causes(db, run_id)
    unscored = nothing_scored(counts, causes) if status is RunStatus.DONE else None
    lost = counts.get("infra_error", 0) and not any(counts.get(s, 0) for s in FINISHED)
    if unscored is not None and lost_is_incomplete and lost:
        # Every task was lost to infrastructure: nothing was judged, so this run could not
        # finish (exit 3), whatever the gates say; --resume retries the lost tasks.
        status = RunStatus.INCOMPLETE
        stopped_reason = (
            f"every task failed on infrastructure ({counts['infra_error']}): "
            + describe_causes(causes.infra)
        )
    elif unscored is not None:
        # Every call failed on the target's side (a rejected key, a wrong model name), or no
        # sample could be sent: there is nothing to judge (exit 2) until that is fixed.
        status, stopped_reason = RunStatus.FAILED, unscored
    found = list(warnings)
    if unscored is None:
        found.extend(failure_warnings(counts, causes))
        found.extend(judged_nothing(metrics, stored_reasons(db, run_id)))
    pass_k = stored.pass_k_samples()
    isolation = [i.to_dict() for i in stored.isolation]
    summary: dict[str, Any] = {
        "metrics": [m.to_dict() for m in metrics],
        "gates": gate_results,
        "dataset": {"source": dataset[0], "version": dataset[1]},
        "tasks": counts,
        "infra_errors": counts.get("infra_error", 0),
        "stopped_reason": stopped_reason,
        "spend": dict(spend),
        "trials": trials,
        "pass_k_samples": pass_k,
        "isolation": isolation,
        **(extra or {}),
        "warnings": found,
        "infra_error_causes": causes.infra,
        "target_error_causes": causes.target,
    }
    if judges:
        summary["judges"] = judges_summary(judges)
    finished = manifest.finished(
        isolation=isolation, judges=judges_manifest(judges) if judges else None
    )
    row.finish(
        status,
        records=samples,
        summary=summary,
        manifest=finished.to_dict(),
        error=stopped_reason,
    )
    return RunResult(
        run_id=run_id,
        status=status,
        records=samples,
        metrics=metrics,
        dataset_source=dataset[0],
        dataset_version=dataset[1],
        bad_records=bad_records,
        evaluators=[b.spec() for b in bound],
        store=db,
        gates=gate_results,
        trials=trials,
        tasks=counts,
        infra_errors=counts.get("infra_error", 0),
        stopped_reason=stopped_reason,
        spend=dict(spend),
        pass_k_samples=pass_k,
        isolation=stored.isolation,
        warnings=found,
        infra_error_causes=causes.infra,
        target_error_causes=causes.target,
        graded_by=tuple(bound),
    )
