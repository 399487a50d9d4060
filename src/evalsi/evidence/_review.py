"""Review files: a run's results handed to people with the evidence each was judged on, and
their approvals brought back (``evalsi review export | import | list``, docs/guides/review.md).

``export_review`` writes one JSONL line per result (sample, trial, evaluator): the evidence
(input, output, reference, context; for an agent task the trajectory's tool calls and checks),
the automatic verdict, the evaluator's identity as the run recorded it, an empty ``review`` to
fill in, and a **fingerprint**: the sha256 of the canonical JSON of all but the review.
``import_review`` recomputes every filled item's fingerprint twice, from the item as the file
holds it (an item edited in the file is refused) and from what the store and the dataset hold
now (an item whose evidence or verdict changed since export is refused, naming what changed),
then stores the accepted reviews in ``reviews`` in one transaction. ``results`` is never
written: a review stands beside the automatic score, it does not overwrite it.

Choices, and why:

- **One pass each way, memory flat.** Export streams the run's tasks joined with its results
  (``_stored``), one item at a time. Import keeps only the filled items' keys and a few hashes
  (reviews are written by people: thousands, not millions), then streams the run once, in key
  order, building items only for those keys, and stops after the last one.
- **The count sits in the header.** The header's ``items`` is written last, into space kept
  for it (the number right-aligned in 19 blanks, still valid JSON), so every line after the
  first is an item, and a reader knows the count before reading them.
- **Numbers canonical as every surface shows them** (``runs.task_json``: keys sorted, 1.0 as
  1): a tool that rewrites the file on the reviewer's side (``jq``, a spreadsheet plug-in)
  leaves the fingerprint intact.
- **Partial imports.** A file's accepted items are stored even when others are refused (each
  refusal is named, and the CLI exits 1); a line that is not JSON, or not an item, stores
  nothing (exit 2): a file damaged in transit is not half read.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import tempfile
import time
from collections.abc import Collection, Generator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.core import VERSION, EvaluationResult, Outcome, Record, UserError
from evalsi.evidence._stored import StoredTask, stored_tasks
from evalsi.runs import task_json
from evalsi.store import score_dict

if TYPE_CHECKING:
    from evalsi.core import RunInfo
    from evalsi.store import SqlStore

FORMAT = "evalsi-review"
FORMAT_VERSION = 1
REVIEWABLE = ("score", "run", "grade")
"""Run kinds with per-task evidence (a watch run's results are about traces, not tasks)."""
_COUNT_WIDTH = 19  # the digits of the largest 64-bit count
_MAX_REVIEWER = 256  # reviews.reviewer

INSTRUCTIONS = (
    'For each item you review, set review.approval to "approved" (the automatic verdict is '
    'right) or "rejected" (it is wrong), and write review.rationale and review.reviewer; '
    "review.verdict may hold your own verdict (any JSON value). Leave approval null to skip an "
    "item. Do not edit evidence, automatic, evaluator_spec or fingerprint: an edited item is "
    "refused on import."
)
_FINGERPRINTED = (
    "run_id",
    "seq",
    "trial",
    "record_id",
    "evaluator",
    "evaluator_spec",
    "automatic",
    "evidence",
)
"""The fields of an item its fingerprint covers: everything but the item id (made of them)
and the review."""
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "item": str,
    "run_id": str,
    "seq": int,
    "trial": int,
    "record_id": str,
    "evaluator": str,
    "evaluator_spec": dict,
    "automatic": dict,
    "evidence": dict,
    "fingerprint": str,
    "review": dict,
}


def fingerprint(item: Mapping[str, Any]) -> str:
    """``sha256:`` of the canonical JSON of an item's task, evaluator, verdict and evidence.

    Example:
        >>> a = fingerprint({"seq": 1, "evidence": {"output": 1.0}})
        >>> a == fingerprint({"evidence": {"output": 1}, "seq": 1})
        True
    """
    return _sha({k: item.get(k) for k in _FINGERPRINTED})


def _sha(value: Any) -> str:
    return "sha256:" + hashlib.sha256(orjson.dumps(task_json(value))).hexdigest()


# -- export -----------------------------------------------------------------------------------
def export_review(
    store: SqlStore,
    run_id: str,
    out_path: str | os.PathLike[str],
    *,
    evaluators: Collection[str] | None = None,
    only_failing: bool = False,
    limit: int | None = None,
) -> int:
    """Write the review file of run ``run_id`` (an id, a unique prefix or ``latest``) to the
    new file ``out_path``; returns how many items it holds.

    Args:
        evaluators: only the results of these evaluators (instance names); default all.
        only_failing: only results that errored or have a score that did not pass (what
            ``evalsi runs show`` lists as failures).
        limit: at most this many items, the first in (sample, trial, evaluator) order.

    Raises:
        UserError: the run is still running or has no tasks to review (a watch run), an
            evaluator is not the run's, ``out_path`` exists, or the run's dataset cannot be
            read again as the run read it.
    """
    info = _reviewable(store, run_id)
    chosen = _chosen(info, evaluators)
    if limit is not None and limit < 0:
        raise UserError(f"limit is {limit}; give 0 or more items")
    out = Path(out_path)
    if out.exists() or out.is_symlink():
        raise UserError(
            f"{out} exists; a review file is never overwritten (it may hold reviews)",
            hint="choose another -o FILE, or remove it first",
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "run_id": info.id,
        "run_kind": info.kind,
        "created_at": round(time.time(), 3),
        "evalsi_version": VERSION,
        "selection": {
            "evaluators": sorted(chosen.values()) if chosen is not None else None,
            "only_failing": only_failing,
            "limit": limit,
        },
        "instructions": INSTRUCTIONS,
    }
    head = orjson.dumps(header)[:-1] + b',"items":'
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    count = 0
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as f:
            f.write(head + b" " * _COUNT_WIDTH + b"}\n")
            with contextlib.closing(_results(store, info)) as results:
                selected = (
                    (task, index, result)
                    for task, index, result in results
                    if (chosen is None or index in chosen)
                    and (not only_failing or _failing(result))
                )
                for task, index, result in itertools.islice(selected, limit):
                    f.write(orjson.dumps(_item(info, task, index, result)) + b"\n")
                    count += 1
            f.seek(len(head))
            f.write(str(count).rjust(_COUNT_WIDTH).encode())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # as a bundle's files (mkstemp made it private)
        os.replace(tmp, out)  # a failed export leaves no half file under the name
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return count


def _reviewable(store: SqlStore, run_id: str) -> RunInfo:
    info = store.get_run(run_id)
    if info.kind not in REVIEWABLE:
        raise UserError(
            f"run {info.id} is a {info.kind} run; review files hold the tasks of a Score run, "
            "a Run or a grade run"
        )
    if info.status in ("running", "queued"):
        raise UserError(
            f"run {info.id} is {info.status}; its results are still changing",
            hint="wait for it to end (evalsi runs show RUN), then export it",
        )
    return info


def _chosen(info: RunInfo, evaluators: Collection[str] | None) -> dict[int, str] | None:
    """The chosen evaluators by index, or None for all."""
    if evaluators is None:
        return None
    names = _names(info)
    unknown = sorted(set(evaluators) - set(names))
    if unknown:
        raise UserError(
            f"run {info.id} has no evaluator {', '.join(map(repr, unknown))}",
            hint=f"its evaluators: {', '.join(names) or 'none'}",
        )
    return {names[n]: n for n in evaluators}


def _names(info: RunInfo) -> dict[str, int]:
    return {str(e.get("name", "")): i for i, e in enumerate(info.evaluators)}


def _failing(result: EvaluationResult) -> bool:
    return result.outcome == Outcome.ERROR or any(s.passed is False for s in result.scores)


def _results(store: SqlStore, info: RunInfo) -> Generator[tuple[StoredTask, int, EvaluationResult]]:
    """Every per-task result with its task, in (seq, trial, evaluator) order. Dataset-scope
    results (seq -1) belong to no task and are left out."""
    tasks = stored_tasks(store, info)
    results = store.iter_results(info.id)
    try:
        pending = next(results, None)
        while pending is not None and pending[0] < 0:
            pending = next(results, None)
        for task in tasks:
            if pending is None:
                return  # the tasks left have no results (a run stopped early)
            key = (task[0], task[1])
            if (pending[0], pending[2].trial) < key:
                break
            while pending is not None and (pending[0], pending[2].trial) == key:
                yield task, pending[1], pending[2]
                pending = next(results, None)
        if pending is not None:
            raise UserError(
                f"run {info.id} stored a result for task ({pending[0]}, {pending[2].trial}) "
                "that has no stored sample: its store is inconsistent"
            )
    finally:
        tasks.close()
        close = getattr(results, "close", None)
        if close is not None:
            close()


def _item(info: RunInfo, task: StoredTask, index: int, result: EvaluationResult) -> dict[str, Any]:
    seq, trial, status, error, record = task
    spec = info.evaluators[index] if index < len(info.evaluators) else {}
    name = str(spec.get("name", result.evaluator))
    item: dict[str, Any] = {
        "item": _item_id(info.id, seq, trial, name),
        "run_id": info.id,
        "seq": seq,
        "trial": trial,
        "record_id": record.id,
        "evaluator": name,
        "evaluator_spec": task_json(spec),
        "automatic": task_json(
            {
                "outcome": Outcome(result.outcome).name.lower(),
                "scores": [score_dict(s) for s in result.scores],
                "reason": result.reason,
            }
        ),
        "evidence": task_json(_evidence(status, error, record)),
    }
    item["fingerprint"] = fingerprint(item)
    item["review"] = {"approval": None, "verdict": None, "rationale": "", "reviewer": ""}
    return item


def _item_id(run_id: str, seq: int, trial: int, evaluator: str) -> str:
    return f"{run_id}:{seq}:{trial}:{evaluator}"


def _evidence(status: str, error: str | None, record: Record) -> dict[str, Any]:
    """What the evaluator was shown: the record as graded (for a Run, with the target's
    output, and the dataset's trajectory as the reference), and what the agent did."""
    out: dict[str, Any] = {
        "input": None if record.input is None else record.input.to_value(),
        "output": None if record.output is None else record.output.to_value(),
        "reference": None if record.reference is None else record.reference.to_value(),
    }
    if record.context:
        out["context"] = [c.to_value() for c in record.context]
    if status != "ok":
        out["status"] = status
    if error:
        out["error"] = error
    trajectory = record.trajectory
    if trajectory is not None:
        calls = []
        for step_index, step in enumerate(trajectory.steps):
            if step.tool_call is None:
                continue
            call: dict[str, Any] = {
                "step": step_index,
                "tool": step.tool_call.name,
                "arguments": step.tool_call.arguments,
                "result": step.output,
            }
            if step.error:
                call["error"] = step.error
            calls.append(call)
        out["tool_calls"] = calls
        out["checks"] = [c.to_value() for c in trajectory.checks]
        if trajectory.stop_reason:
            out["stop_reason"] = trajectory.stop_reason
    return out


def _parts(item: Mapping[str, Any]) -> dict[str, str]:
    """Hashes of an item's parts, to say what changed when its fingerprint no longer holds."""
    evidence = item.get("evidence") or {}
    parts = {f"evidence.{k}": _sha(v) for k, v in evidence.items()}
    parts.update(
        automatic=_sha(item.get("automatic")),
        evaluator=_sha([item.get("evaluator"), item.get("evaluator_spec")]),
        record_id=_sha(item.get("record_id")),
    )
    return parts


# -- import -----------------------------------------------------------------------------------


__all__ = ["FORMAT", "FORMAT_VERSION", "INSTRUCTIONS", "export_review", "fingerprint"]
