"""Inspect AI tasks and logs as evalsi data (``pip install 'evalsi[inspect]'``).

``import_inspect_task`` turns an Inspect ``Task``'s samples into rows (``input``; ``target`` as
the reference; ``choices`` and the sample's metadata as metadata) and writes an EvalRun spec
that runs them on a model through evalsi's harness, graded by the evaluators that score as the
task's scorers do: ``includes()`` is ``contains`` (case-insensitive, as Inspect's default), and
``exact()`` is ``exact-match``. Other scorers are named in the spec's header, not guessed.

``import_inspect_log`` turns an Inspect ``.eval`` (or ``.json``) log into scored records: each
sample × epoch becomes a row with the model's answer as ``output``, the target as
``reference``, and Inspect's own scores in ``metadata.inspect_scores`` (value, answer,
explanation), so ``evalsi eval`` grades the same answers and the two verdicts sit side by side.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalsi.benchmarks._imported import Imported, unique_ids, write_rows, write_spec
from evalsi.core import UserError

SCORERS: Mapping[str, dict[str, Any]] = {
    "inspect_ai/includes": {"ref": "contains", "params": {"ignore_case": True}},
    "inspect_ai/exact": {"ref": "exact-match"},
}
"""Inspect scorers whose rule an evalsi evaluator applies the same way."""

_PLACEHOLDER_MODEL = {
    "connector": "openai-compatible",
    "baseUrl": "http://127.0.0.1:8000/v1",
    "model": "m",
}


def _inspect() -> Any:
    try:
        import inspect_ai
    except ImportError:
        raise UserError(
            "Inspect AI is not installed", hint="pip install 'evalsi[inspect]'"
        ) from None
    return inspect_ai


def load_task(ref: Any) -> Any:
    """An Inspect ``Task``: given as one, or as ``FILE.py@NAME`` / ``module:NAME`` naming a
    ``Task`` or a ``@task`` function (called with no arguments)."""
    inspect_ai = _inspect()
    if isinstance(ref, inspect_ai.Task):
        return ref
    if not isinstance(ref, str):
        raise UserError(f"an Inspect task is a Task or 'file.py@name', got {type(ref).__name__}")
    if "@" in ref:
        file, _, name = ref.rpartition("@")
        path = Path(file)
        if not path.is_file():
            raise UserError(f"{path}: no such Inspect task file")
        spec = importlib.util.spec_from_file_location(f"_evalsi_inspect_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise UserError(f"{path}: cannot load it as Python")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - the user's file: reported with its name
            raise UserError(f"{path}: importing it failed: {type(e).__name__}: {e}") from None
    else:
        module_name, _, name = ref.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise UserError(f"Inspect task {ref!r}: cannot import {module_name!r}: {e}") from None
    value = getattr(module, name, None)
    if value is None:
        raise UserError(f"Inspect task {ref!r}: no {name!r} in it")
    if callable(value) and not isinstance(value, inspect_ai.Task):
        value = value()
    if not isinstance(value, inspect_ai.Task):
        raise UserError(f"Inspect task {ref!r}: {name} is not a Task ({type(value).__name__})")
    return value


def import_inspect_task(
    task: Any,
    out_dir: Path,
    *,
    model: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> Imported:
    """Write an Inspect task's samples to ``out_dir/samples.jsonl`` and an EvalRun spec
    ``out_dir/run.yaml`` that asks ``model`` each one and grades it as the task's scorers do.

    Raises:
        UserError: Inspect is not installed, the task cannot be loaded, a sample has no
            input, or two samples share an id.
    """
    loaded = load_task(task)
    rows = []
    for i, sample in enumerate(loaded.dataset, 1):
        sid = str(sample.id) if sample.id is not None else str(i)
        meta = dict(sample.metadata or {})
        if sample.choices:
            meta["choices"] = list(sample.choices)
        row: dict[str, Any] = {"id": sid, "input": _text(sample.input, f"sample {sid!r}")}
        if sample.target not in ("", [], None):
            row["reference"] = sample.target
        if meta:
            row["metadata"] = meta
        rows.append(row)
    unique_ids((r["id"] for r in rows), f"Inspect task {loaded.name!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    dataset = out_dir / "samples.jsonl"
    count = write_rows(dataset, rows)
    mapped, unmapped = _evaluators(loaded)
    spec = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name or _name(loaded.name)},
        "spec": {
            "target": {"model": dict(model or _PLACEHOLDER_MODEL)},
            "dataset": {"path": dataset.name},
            "evaluators": mapped or [{"ref": "exact-match"}],
        },
    }
    header = f"The Inspect task {loaded.name!r}, imported by evalsi.benchmarks.import_inspect_task."
    if unmapped:
        header += f"\nScorers with no evalsi equivalent (not graded here): {', '.join(unmapped)}"
    spec_path = out_dir / "run.yaml"
    write_spec(spec_path, spec, header)
    return Imported(dataset, spec_path, count)


def _evaluators(task: Any) -> tuple[list[dict[str, Any]], list[str]]:
    from inspect_ai._util.registry import registry_info  # the scorer's registered name

    scorers = task.scorer if isinstance(task.scorer, list) else [task.scorer] if task.scorer else []
    mapped: list[dict[str, Any]] = []
    unmapped: list[str] = []
    for scorer in scorers:
        try:
            name = registry_info(scorer).name
        except Exception:  # noqa: BLE001 - an unregistered scorer has no name to map
            name = getattr(scorer, "__name__", "scorer")
        if name in SCORERS and SCORERS[name] not in mapped:
            mapped.append(dict(SCORERS[name]))
        elif name not in SCORERS:
            unmapped.append(name)
    return mapped, unmapped


def import_inspect_log(log: Path, out_dir: Path) -> Imported:
    """Write an Inspect log's samples, with their answers and Inspect's scores, to
    ``out_dir/records.jsonl`` for ``evalsi eval``. A sample that failed inside Inspect (an
    error, no answer) is left out: it is not the model's wrong answer.

    Raises:
        UserError: Inspect is not installed, the log cannot be read, it holds no samples, or
            every sample failed.
    """
    _inspect()
    from inspect_ai.log import read_eval_log

    try:
        read = read_eval_log(str(log))
    except FileNotFoundError:
        raise UserError(f"{log}: no such Inspect log") from None
    except Exception as e:  # noqa: BLE001 - Inspect's reader: a broken file, wrapped
        raise UserError(f"{log}: not a readable Inspect log: {type(e).__name__}: {e}") from None
    samples = read.samples or []
    if not samples:
        raise UserError(f"{log}: the log holds no samples (status {read.status!r})")
    epochs = max(s.epoch for s in samples) > 1
    failed = [s for s in samples if getattr(s, "error", None) is not None]
    if len(failed) == len(samples):
        first = str(getattr(failed[0].error, "message", failed[0].error)).splitlines()[0][:200]
        raise UserError(
            f"{log}: every sample failed inside Inspect (status {read.status!r}): {first}",
            hint="Inspect got no answer to grade; run the task again",
        )
    rows = []
    for s in samples:
        if getattr(s, "error", None) is not None:
            continue  # Inspect got no answer: not the model's wrong answer
        sid = f"{s.id}@{s.epoch}" if epochs else str(s.id)
        scores = {
            k: {"value": v.value, "answer": v.answer, "explanation": v.explanation}
            for k, v in (s.scores or {}).items()
        }
        meta: dict[str, Any] = {
            **(s.metadata or {}),
            "epoch": s.epoch,
            "inspect_scores": scores,
            "inspect": {"task": read.eval.task, "model": read.eval.model, "sample_id": s.id},
        }
        row: dict[str, Any] = {
            "id": sid,
            "input": _text(s.input, f"{log}: sample {sid!r}"),
            "output": s.output.completion if s.output is not None else "",
            "metadata": meta,
        }
        if s.target not in ("", [], None):
            row["reference"] = s.target
        rows.append(row)
    unique_ids((r["id"] for r in rows), str(log))
    dataset = out_dir / "records.jsonl"
    return Imported(dataset, None, write_rows(dataset, rows))


def _text(value: Any, where: str) -> str:
    """A sample's input as text: a string, or its messages' text in order."""
    if isinstance(value, str):
        if not value:
            raise UserError(f"{where}: the input is empty")
        return value
    parts = [m.text for m in value if getattr(m, "text", "")]
    if not parts:
        raise UserError(f"{where}: the input has no text")
    return "\n".join(parts)


def _name(text: str) -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    return cleaned or "inspect-task"
