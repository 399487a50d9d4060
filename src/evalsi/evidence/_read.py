"""Reading a bundle's tasks back: its JSONL files joined by task, streaming.

``records.jsonl`` lists every stored task in (seq, trial) order; ``scores.jsonl`` (after the
dataset-scope rows, ``seq`` -1) and ``trajectories.jsonl`` follow the same order.
``read_tasks`` walks the three at once and yields each task with its lines, so validate, gate
and rescore hold one task at a time. A line out of order, or one whose task is not in
``records.jsonl``, is reported to ``problem`` and skipped. ``tool_calls.jsonl`` and
``end_states.jsonl`` are views of the trajectories: validate derives their lines from them
(``derived_lines``) and compares bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evalsi.evidence._format as fmt

Problem = Callable[[str, str], None]
"""Called with (file, what is wrong)."""


@dataclass(slots=True)
class TaskLines:
    """One task (seq, trial) as the bundle holds it."""

    seq: int
    trial: int
    status: str
    record: dict[str, Any]
    error: str | None = None
    trajectory: dict[str, Any] | None = None
    scores: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> tuple[int, int]:
        return (self.seq, self.trial)


def _key(value: Any) -> tuple[int, int] | None:
    if not isinstance(value, dict):
        return None
    seq, trial = value.get("seq"), value.get("trial")
    if type(seq) is not int or type(trial) is not int:
        return None
    return (seq, trial)


class _Stream:
    """One JSONL file's lines in task order, looked at one task ahead."""

    _END: Any = object()

    def __init__(self, directory: Path, name: str, problem: Problem) -> None:
        self.name = name
        self.problem = problem
        self._lines = fmt.iter_lines(directory, name)
        self._next: Any = self._END
        self._advance()

    def _advance(self) -> None:
        while True:
            try:
                number, value = next(self._lines)
            except StopIteration:
                self._next = self._END
                return
            key = _key(value)
            if key is None:
                self.problem(
                    self.name, f"line {number}: expected an object with integer seq, trial"
                )
                continue
            self._next = (number, key, value)
            return

    def peek_key(self) -> tuple[int, int] | None:
        return None if self._next is self._END else self._next[1]

    def take(self, key: tuple[int, int]) -> Iterator[dict[str, Any]]:
        """The lines of task ``key``, after reporting the lines before it as orphans."""
        while self._next is not self._END and self._next[1] < key:
            number, k, _ = self._next
            self.problem(self.name, f"line {number}: task {k} is not in {fmt.RECORDS}")
            self._advance()
        while self._next is not self._END and self._next[1] == key:
            number, k, value = self._next
            yield value
            self._advance()

    def rest(self) -> None:
        """Report every line left (tasks after the last record) as an orphan."""
        while self._next is not self._END:
            number, k, _ = self._next
            self.problem(self.name, f"line {number}: task {k} is not in {fmt.RECORDS}")
            self._advance()


def dataset_scores(directory: Path) -> list[dict[str, Any]]:
    """The dataset-scope score lines (``seq`` -1) at the head of ``scores.jsonl``."""
    out = []
    for _, value in fmt.iter_lines(directory, fmt.SCORES):
        if not isinstance(value, dict) or value.get("seq") != -1:
            break
        out.append(value)
    return out


def read_tasks(
    directory: Path, problem: Problem, *, trajectories: bool = True
) -> Iterator[TaskLines]:
    """Every task of the bundle with its lines, in order (without its trajectory unless
    ``trajectories``); ``ValueError`` when a file cannot be parsed (a line that is not JSON)."""
    scores = _Stream(directory, fmt.SCORES, problem)
    while (k := scores.peek_key()) is not None and k[0] == -1:
        for _ in scores.take(k):
            pass
    steps = _Stream(directory, fmt.TRAJECTORIES, problem) if trajectories else None
    last: tuple[int, int] | None = None
    for number, value in fmt.iter_lines(directory, fmt.RECORDS):
        key = _key(value)
        if key is None or not isinstance(value.get("record"), dict):
            problem(fmt.RECORDS, f"line {number}: expected seq, trial, status and record")
            continue
        if key[0] < 0 or key[1] < 0:
            problem(fmt.RECORDS, f"line {number}: negative seq or trial {key}")
            continue
        if last is not None and key <= last:
            problem(fmt.RECORDS, f"line {number}: task {key} out of order (after {last})")
            continue
        last = key
        task = TaskLines(
            seq=key[0],
            trial=key[1],
            status=str(value.get("status", "")),
            record=value["record"],
            error=value.get("error"),
        )
        task.scores = list(scores.take(key))
        if steps is not None:
            found = list(steps.take(key))
            if len(found) > 1:
                problem(fmt.TRAJECTORIES, f"task {key} has {len(found)} trajectories")
            task.trajectory = found[0].get("trajectory") if found else None
        yield task
    scores.rest()
    if steps is not None:
        steps.rest()


def tool_call_lines(seq: int, trial: int, trajectory: Mapping[str, Any]) -> list[bytes]:
    """The ``tool_calls.jsonl`` lines of one task's trajectory, as the writer writes them."""
    out = []
    for index, step in enumerate(trajectory.get("steps") or ()):
        call = step.get("tool_call") if type(step) is dict else None
        if type(call) is not dict:
            continue
        line: dict[str, Any] = {
            "seq": seq,
            "trial": trial,
            "step": index,
            "kind": step.get("kind"),
            "tool": call.get("name"),
            "arguments": call.get("arguments"),
            "result": step.get("output"),
        }
        if step.get("error"):
            line["error"] = step["error"]
        out.append(fmt.line(line))
    return out


def end_state_line(seq: int, trial: int, trajectory: Mapping[str, Any]) -> bytes | None:
    """The ``end_states.jsonl`` line of one task's trajectory (None when it holds neither
    checks nor an end state)."""
    checks, end = trajectory.get("checks") or [], trajectory.get("end_state")
    if not checks and end is None:
        return None
    return fmt.line({"seq": seq, "trial": trial, "checks": checks, "end_state": end})


__all__ = [
    "Problem",
    "TaskLines",
    "dataset_scores",
    "end_state_line",
    "read_tasks",
    "tool_call_lines",
]
