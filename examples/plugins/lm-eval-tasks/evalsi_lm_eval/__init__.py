"""lm-evaluation-harness tasks through evalsi (``lm-eval/task-metric``), for ``evalsi plugin
install``: the harness and its pins live in this plugin's venv.

Two halves: ``evalsi-lm-eval export`` turns a task into evalsi records (each document's prompt
as the harness builds it, its target as the reference), so evalsi's own run engine calls its
own connector for the generations; ``lm-eval/task-metric`` scores each output as the task
does, through its filter pipeline and its metric."""

from __future__ import annotations

from typing import Any

from evalsi.core import Score
from evalsi.evaluators import Skip, evaluator
from evalsi_lm_eval._export import records, target_params
from evalsi_lm_eval._metric import check_metric, metric_names, score, target_of
from evalsi_lm_eval._tasks import TaskError, cached_task

__all__ = ["EVALUATORS", "TaskError", "records", "target_params", "task_metric"]


@evaluator(
    name="lm-eval/task-metric",
    version="0.4.13",
    output="number",
    requires=("output", "metadata.lm_eval_doc_id"),
)
def task_metric(
    record: Any,
    *,
    task: str,
    include_path: str = "",
    filter: str = "",
    metric: str = "",
) -> Score:
    """An lm-eval task's per-document metric (after its filter pipeline) for the output."""
    loaded: Any = cached_task(task, include_path)
    filters, metrics = metric_names(loaded)
    filter_name, metric_name = filter or filters[0], metric or metrics[0]
    check_metric(loaded, filter_name, metric_name)
    named = record.metadata.get("lm_eval_task")
    if named is not None and named != task:
        raise Skip(f"the record comes from task {named!r}, not {task!r}")
    doc_id = record.metadata["lm_eval_doc_id"]
    if not isinstance(doc_id, int) or isinstance(doc_id, bool):
        raise TaskError(f"metadata.lm_eval_doc_id must be a document index, not {doc_id!r}")
    if record.reference is not None:
        want = target_of(loaded, doc_id)
        want = want if isinstance(want, str) else str(want)
        if record.reference.as_text() != want:
            raise TaskError(
                f"the record's reference {record.reference.as_text()!r} is not document "
                f"{doc_id}'s target {want!r}: was the dataset exported from another task version?"
            )
    verdict = score(loaded, doc_id, record.output.as_text(), filter_name, metric_name)
    return Score(
        number=verdict.value,
        explanation=f"{metric_name}={verdict.value:g} on {verdict.filtered!r} ({filter_name})",
        metadata={"filtered": verdict.filtered, "filter": filter_name, "metric": metric_name},
    )


EVALUATORS = (task_metric,)
