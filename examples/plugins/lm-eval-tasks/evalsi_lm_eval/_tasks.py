"""Loading an lm-evaluation-harness task by name, as ``lm_eval.simple_evaluate`` sets it up."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

# Tasks here read local files; never reach for a hub, nor write a cache in the user's home.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lm_eval.api.task import Task
from lm_eval.defaults import DEFAULT_OTHER_SEED
from lm_eval.tasks import TaskManager


class TaskError(ValueError):
    """A task that cannot be loaded or served: the message says which and why."""


@functools.cache
def _manager(include_path: str) -> TaskManager:
    if include_path and not Path(include_path).is_dir():
        raise TaskError(f"include_path {include_path!r} is not a folder of task YAML files")
    return TaskManager(include_path=include_path or None)


def load_task(name: str, include_path: str = "", num_fewshot: int | None = None) -> Task:
    """A fresh task object, with ``num_fewshot`` and the few-shot seed applied the way
    ``simple_evaluate`` applies them (so prompts and few-shot picks are the harness's own)."""
    manager = _manager(include_path)
    if name not in manager.all_tasks:
        where = f" (built-in tasks and {include_path})" if include_path else ""
        raise TaskError(f"no lm-eval task named {name!r}{where}")
    tasks = manager.load([name])["tasks"]
    if len(tasks) != 1:
        raise TaskError(f"{name!r} is a group of {len(tasks)} tasks: name one of {sorted(tasks)}")
    task: Any = next(iter(tasks.values()))
    if task.get_config("output_type") != "generate_until":
        raise TaskError(
            f"task {name!r} is {task.get_config('output_type')}: only generate_until tasks "
            "are served (a chat endpoint gives no log-probabilities to score choices with)"
        )
    if num_fewshot is not None and task.get_config("num_fewshot") != 0:
        task.set_config(key="num_fewshot", value=num_fewshot)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=DEFAULT_OTHER_SEED)
    return task  # type: ignore[no-any-return]


@functools.cache
def cached_task(name: str, include_path: str = "") -> Task:
    """One loaded task per (name, include path), for grading (prompts do not matter there)."""
    return load_task(name, include_path)
