"""``write_bundle``: a stored run sealed into a bundle directory (``evalsi bundle RUN -o DIR``).

Everything streams: the run's samples are read again from its dataset (checked against the
version the run recorded) and joined with its stored outputs and results, both in (seq, trial)
order, and each line goes straight to its file, hashed as it is written. Memory holds one
scenario at a time, whatever the run's size. ``manifest.json`` is written last.

A Score run's tasks are its records (trial 0); a Run's are its sample x trial outputs, with the
trajectory, tool calls and end state of an agent run. A grade run is not bundled: bundle the
Run it graded, whose outputs the evidence is about.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

import evalsi.evidence._format as fmt
from evalsi.core import VERSION, Outcome, Record, UserError, code_sha256
from evalsi.datasets import record_to_row
from evalsi.evidence._read import end_state_line, tool_call_lines
from evalsi.evidence._report import render_report
from evalsi.evidence._stored import StoredTask, score_trials, stored_tasks
from evalsi.runs import (
    Case,
    CaseBuilder,
    CategoryFigures,
    TestPlan,
    pass_threshold,
    with_unattempted,
)

if TYPE_CHECKING:
    from evalsi.core import RunInfo
    from evalsi.store import SqlStore

BUNDLED = ("done", "stopped", "incomplete", "failed", "interrupted", "cancelled")
"""Run statuses a bundle may seal: over, whatever the outcome (the status is recorded)."""
SEALED = {"done": "sealed", "stopped": "partial", "incomplete": "partial"}


@dataclass(frozen=True, slots=True)
class Written:
    """A bundle just written: where, the run, its files, and its size."""

    path: Path
    run_id: str
    files: int
    bytes: int
    tasks: int
    declared: bool


def write_bundle(store: SqlStore, run_id: str, out: str | os.PathLike[str]) -> Written:
    """Seal run ``run_id`` of ``store`` into the new directory ``out``.

    Raises:
        UserError: the run is still running, is a grade run, its dataset changed since it
            ran, or ``out`` exists and is not an empty directory.
    """
    info = store.get_run(run_id)
    if info.status not in BUNDLED:
        raise UserError(
            f"run {info.id} is {info.status}; a bundle seals a finished run",
            hint="wait for it to end (evalsi runs show RUN), then bundle it",
        )
    if info.kind not in ("score", "run"):
        source = info.spec.get("source_run", "?")
        raise UserError(
            f"run {info.id} is a {info.kind} run: bundle the Run it graded ({source})",
            hint="a bundle seals the outputs a Run or Score run recorded",
        )
    directory = _new_directory(Path(out))
    try:
        return _Writer(store, info, directory).write()
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)  # never leave half a bundle behind
        raise


def check_output(path: str | os.PathLike[str]) -> None:
    """A ``UserError`` unless ``path`` can take a bundle (new, or an empty directory): the
    check ``--bundle DIR`` makes before a run starts, not after it."""
    _new_directory(Path(path), create=False)


def _new_directory(path: Path, *, create: bool = True) -> Path:
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link; a bundle is written into a new directory")
    if path.exists():
        if not path.is_dir():
            raise UserError(f"{path} exists and is not a directory")
        if any(path.iterdir()):
            raise UserError(
                f"{path} is not empty; a bundle is written into a new or empty directory",
                hint="choose another directory",
            )
    elif create:
        path.mkdir(parents=True)
    return path


class _Writer:
    def __init__(self, store: SqlStore, info: RunInfo, directory: Path) -> None:
        self.store = store
        self.info = info
        self.dir = directory
        self.entries: list[fmt.Entry] = []
        self.trials = int(info.spec.get("trials", 1)) if info.kind == "run" else score_trials(info)
        registered = TestPlan.from_stored(info.spec)
        self.registered = registered is not None
        self.plan = registered or _unregistered_plan(info)
        self.files: dict[str, fmt.HashedFile] = {}
        self._last_seq = -1
        self.counts = {"records": 0, "tasks": 0, "scores": 0, "tool_calls": 0, "end_states": 0}

    def write(self) -> Written:
        config = {
            "kind": self.info.kind,
            "name": self.info.name,
            "spec": {k: v for k, v in self.info.spec.items() if k != "test_plan"},
            "manifest": self.info.manifest,
            "evaluators": self.info.evaluators,
        }
        plan_file = fmt.HashedFile(self.dir, fmt.PLAN)
        plan_file.write(self.plan.text.encode())
        plan_entry = plan_file.close()
        figures = self._tasks()
        summary = self._summary(figures)
        gates = {"gates": (self.info.summary or {}).get("gates", [])}
        self._json(fmt.CONFIG, config)
        self.entries.append(plan_entry)
        self._json(fmt.SUMMARY, summary)
        self._json(fmt.GATES, gates)
        report = render_report(self.plan.document(), summary, gates, self.info)
        self._bytes(fmt.REPORT, report.encode())
        self._json(fmt.METADATA, self._metadata())
        ordered = sorted(self.entries, key=lambda e: fmt.REQUIRED.index(e.path))
        manifest = {
            "format": fmt.FORMAT,
            "format_version": fmt.FORMAT_VERSION,
            "run_id": self.info.id,
            "writer": f"evalsi {VERSION}",
            "required": list(fmt.REQUIRED),
            "files": [e.to_dict() for e in ordered],
        }
        data = fmt.dumps(manifest)
        self._bytes(fmt.MANIFEST, data)  # last: its checksums cover every file above
        return Written(
            path=self.dir,
            run_id=self.info.id,
            files=len(ordered) + 1,
            bytes=sum(e.size for e in self.entries),
            tasks=self.counts["tasks"],
            declared=self.plan.declared,
        )

    # -- files ---------------------------------------------------------------------------------
    def _json(self, name: str, value: Any) -> None:
        self._bytes(name, fmt.dumps(value))

    def _bytes(self, name: str, data: bytes) -> None:
        f = fmt.HashedFile(self.dir, name)
        f.write(data)
        self.entries.append(f.close())

    def _metadata(self) -> dict[str, Any]:
        manifest = self.info.manifest or {}
        recorded = manifest.get("code_sha256")
        return {
            "format": fmt.FORMAT,
            "format_version": fmt.FORMAT_VERSION,
            "run_id": self.info.id,
            "kind": self.info.kind,
            "name": self.info.name,
            "run_status": self.info.status,
            "status": SEALED.get(self.info.status, "interrupted"),
            "created_at": self.info.created_at,
            "finished_at": self.info.finished_at,
            "run_evalsi_version": manifest.get("evalsi_version"),
            "evalsi_version": VERSION,
            # The code that graded the run, recorded when it ended; a run from before that
            # was recorded carries the bundling code's, and says so.
            "code_sha256": recorded or code_sha256(),
            "code_sha256_recorded": recorded is not None,
            "test_plan_sha256": self.plan.sha256,
            "test_plan_registered": self.registered,
            "declared": self.plan.declared,
            "trials": self.trials,
            "counts": dict(self.counts),
            "external": bool((self.info.summary or {}).get("external")),
        }

    # -- tasks ---------------------------------------------------------------------------------
    def _tasks(self) -> dict[str | None, Any]:
        """Write records, trajectories, tool calls, end states, scores and cases in one pass;
        the figures per category."""
        names = (fmt.RECORDS, fmt.TRAJECTORIES, fmt.TOOL_CALLS, fmt.END_STATES, fmt.SCORES)
        self.files = {name: fmt.HashedFile(self.dir, name) for name in names}
        cases_file = fmt.HashedFile(self.dir, fmt.CASES)
        figures = _Cases()
        selected = self.plan.document().get("scenarios", {}).get("selected", ())
        try:
            for case in with_unattempted(self._cases(), selected, self.trials):
                cases_file.write(fmt.line(case.to_dict()))
                figures.add(case)
        except BaseException:
            for f in (*self.files.values(), cases_file):
                f.abandon()
            raise
        for f in (*self.files.values(), cases_file):
            self.entries.append(f.close())
        return figures.figures()

    def _cases(self) -> Iterator[Case]:
        """Each stored task's lines written, and its scenario's case once complete."""
        builder = CaseBuilder(self.trials)
        results = _peekable(self.store.iter_results(self.info.id))
        for seq, index, result in results.take_while(lambda item: item[0] < 0):
            self._score(seq, index, result)
        for seq, trial, status, error, record in self._stored_tasks():
            category = record.metadata.get("category")
            builder.task(seq, trial, record.id, category, status, pass_threshold(record.metadata))
            self._task_lines(seq, trial, status, error, record)
            for rseq, index, result in results.take_while(
                lambda item, s=seq, t=trial: (item[0], item[2].trial) == (s, t)
            ):
                self._score(rseq, index, result)
                builder.result(
                    rseq,
                    result.trial,
                    Outcome(result.outcome).name.lower(),
                    [{"passed": s.passed} for s in result.scores if s.passed is not None],
                )
            yield from builder.ready()
        yield from builder.finish()
        left = results.peek()
        if left is not None:
            raise UserError(
                f"run {self.info.id} stored a result for task ({left[0]}, {left[2].trial}) "
                "that has no stored sample: its store is inconsistent"
            )

    def _score(self, seq: int, index: int, result: Any) -> None:
        self.files[fmt.SCORES].write(fmt.line(_score_line(seq, index, result)))
        self.counts["scores"] += 1

    def _stored_tasks(self) -> Iterator[StoredTask]:
        """``(seq, trial, status, error, record as graded)`` of every stored task, in order."""
        return stored_tasks(self.store, self.info)

    def _task_lines(
        self,
        seq: int,
        trial: int,
        status: str,
        error: str | None,
        record: Record,
    ) -> None:
        files = self.files
        trajectory = record.trajectory
        row = record_to_row(replace(record, trajectory=None))
        line: dict[str, Any] = {"seq": seq, "trial": trial, "status": status, "record": row}
        if error:
            line["error"] = error
        files[fmt.RECORDS].write(fmt.line(line))
        self.counts["tasks"] += 1
        if seq != self._last_seq:  # tasks come in (seq, trial) order
            self.counts["records"] += 1
            self._last_seq = seq
        if trajectory is None:
            return
        value = trajectory.to_value()
        files[fmt.TRAJECTORIES].write(fmt.line({"seq": seq, "trial": trial, "trajectory": value}))
        for call in tool_call_lines(seq, trial, value):  # the views validate derives again
            files[fmt.TOOL_CALLS].write(call)
            self.counts["tool_calls"] += 1
        end = end_state_line(seq, trial, value)
        if end is not None:
            files[fmt.END_STATES].write(end)
            self.counts["end_states"] += 1

    def _summary(self, figures: Mapping[str | None, Any]) -> dict[str, Any]:
        summary = self.info.summary or {}
        return {
            "run_id": self.info.id,
            "status": self.info.status,
            "trials": self.trials,
            "records": self.counts["records"],
            "tasks": self.counts["tasks"],
            "metrics": summary.get("metrics", []),
            "task_statuses": summary.get("tasks") or {"ok": self.counts["tasks"]},
            "categories": [f.to_dict() for key, f in figures.items() if key is not None],
            "overall": figures[None].to_dict(),
            "stopped_reason": summary.get("stopped_reason"),
            "external": bool(summary.get("external")),
        }


class _Cases:
    """Category figures folded case by case (the cases themselves are not kept)."""

    def __init__(self) -> None:
        self._by: dict[str | None, CategoryFigures] = {}
        self._overall = CategoryFigures(None)

    def add(self, case: Case) -> None:
        if case.category is not None:
            self._by.setdefault(case.category, CategoryFigures(case.category)).add(case)
        self._overall.add(case)

    def figures(self) -> dict[str | None, Any]:
        out: dict[str | None, Any] = dict(sorted(self._by.items(), key=lambda kv: str(kv[0])))
        out[None] = self._overall
        return out


def _score_line(seq: int, index: int, result: Any) -> dict[str, Any]:
    from evalsi.store import score_dict

    return {
        "seq": seq,
        "trial": result.trial,
        "evaluator": index,
        "name": result.evaluator,
        "outcome": Outcome(result.outcome).name.lower(),
        "scores": [score_dict(s) for s in result.scores],
        "reason": result.reason,
    }


class _peekable:
    """An iterator whose next item can be looked at without taking it."""

    _END: Any = object()

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items
        self._next: Any = next(items, self._END)

    def peek(self) -> Any:
        return None if self._next is self._END else self._next

    def take_while(self, keep: Any) -> Iterator[Any]:
        while self._next is not self._END and keep(self._next):
            item, self._next = self._next, next(self._items, self._END)
            yield item


def _unregistered_plan(info: RunInfo) -> TestPlan:
    """The plan of a run from before plans were registered: it says so, and a gate cannot
    judge it."""
    doc = {
        "format": "evalsi-test-plan",
        "version": 1,
        "declared": False,
        "registered": False,
        "not_declared": f"run {info.id} was made before evalsi registered test plans; this "
        "plan was written when the bundle was, not before the first task",
        "run": {"kind": info.kind, "name": info.name},
        "written_at": round(time.time(), 3),
    }
    text = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
    return TestPlan.of_text(text)


class Receiver:
    """A bundle arriving in chunks (``ExportBundle``), written into a new directory.

    Only the format's own file names are accepted, each once, in one run of chunks, created
    with ``O_EXCL | O_NOFOLLOW``: a server cannot make the client write outside the directory
    or over a file. ``finish`` validates what arrived; a bundle that does not validate is
    removed and refused.
    """

    def __init__(self, out: str | os.PathLike[str]) -> None:
        self.dir = _new_directory(Path(out))
        self._file: fmt.HashedFile | None = None
        self._done: set[str] = set()
        self.run_id = ""
        self.bytes = 0

    def chunk(self, path: str, data: bytes, run_id: str) -> None:
        try:
            if self._file is None or self._file.name != path:
                self._close()
                if path not in fmt.REQUIRED and path != fmt.MANIFEST:
                    raise UserError(f"the server sent {path[:80]!r}, not a file of a bundle")
                if path in self._done:
                    raise UserError(f"the server sent {path} twice")
                self._file = fmt.HashedFile(self.dir, path)
            self._file.write(data)
            self.bytes += len(data)
            self.run_id = self.run_id or run_id
        except BaseException:
            self.abandon()
            raise

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._done.add(self._file.name)
            self._file = None

    def abandon(self) -> None:
        if self._file is not None:
            self._file.abandon()
            self._file = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def finish(self) -> Written:
        from evalsi.evidence._validate import validate_bundle

        self._close()
        v = validate_bundle(self.dir)
        if not v.valid:
            self.abandon()
            first = v.unreadable or "; ".join(v.findings[:3])
            raise UserError(f"the bundle the server sent does not validate: {first}")
        meta = fmt.read_json(self.dir, fmt.METADATA)
        return Written(
            path=self.dir,
            run_id=self.run_id,
            files=len(self._done),
            bytes=self.bytes,
            tasks=int(meta.get("counts", {}).get("tasks", 0)),
            declared=bool(meta.get("declared")),
        )


__all__ = ["Receiver", "Written", "check_output", "write_bundle"]
