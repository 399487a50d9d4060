"""Scoring one generation exactly as an lm-evaluation-harness task does: the task's filter
pipeline over the response, then the task's ``process_results`` for the document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lm_eval.api.instance import Instance
from lm_eval.api.metrics import mean
from lm_eval.api.task import Task

from evalsi_lm_eval._tasks import TaskError


@dataclass(frozen=True)
class Verdict:
    value: float
    filtered: Any  # the response after the filter pipeline, as the metric saw it


def metric_names(task: Any) -> tuple[list[str], list[str]]:
    """The task's filter pipelines and its metrics, in the order the task declares them."""
    return [f.name for f in task._filters], list(task.aggregation())


def check_metric(task: Any, filter_name: str, metric: str) -> None:
    """Refuse a pipeline or metric the task lacks, and a metric whose aggregate is not a mean
    of per-document values (a corpus score such as BLEU cannot be split per record)."""
    filters, metrics = metric_names(task)
    if filter_name not in filters:
        raise TaskError(f"task {task.config.task!r} has no filter {filter_name!r}: {filters}")
    if metric not in metrics:
        raise TaskError(f"task {task.config.task!r} has no metric {metric!r}: {metrics}")
    if task.aggregation()[metric] is not mean:
        raise TaskError(
            f"metric {metric!r} of task {task.config.task!r} is aggregated over the corpus, "
            "not as a mean of per-document values: it cannot be graded record by record"
        )
    if (task.config.repeats or 1) != 1:
        raise TaskError(f"task {task.config.task!r} repeats each request: not served")


def score(task: Task, doc_id: int, response: str, filter_name: str, metric: str) -> Verdict:
    """The task's value of ``metric`` for document ``doc_id`` answered with ``response``."""
    docs: Any = task.eval_docs
    if not 0 <= doc_id < len(docs):
        raise TaskError(f"task {task.config.task!r} has no document {doc_id} (0..{len(docs) - 1})")
    doc = docs[doc_id]
    instance = Instance(
        request_type="generate_until",
        doc=doc,
        arguments=("", dict(task.config.generation_kwargs or {})),
        idx=0,
        metadata=(task.config.task, doc_id, 1),
        resps=[response],
    )
    next(f for f in task._filters if f.name == filter_name).apply([instance])
    filtered = instance.filtered_resps[filter_name]
    return Verdict(float(task.process_results(doc, [filtered])[metric]), filtered)


def target_of(task: Task, doc_id: int) -> Any:
    return task.doc_to_target(task.eval_docs[doc_id])
