"""``rescore_bundle``: derive every verdict of a bundle again from its own records, with the code
installed now (``evalsi rescore DIR``).

Offline: the records, trajectories and end states the bundle holds are graded again by the
evaluators its config names, rebuilt from the installed packages (and, for an evaluator loaded
from a file, that file); no model, tool or network is called, and nothing is written into the
bundle. A result judged by a model (a judge-pack evaluator) cannot be derived offline: it is
carried as recorded and named. Then each result is compared with the one the bundle records
(outcome and values).

| outcome | exit | means |
|---|---|---|
| MATCH | 0 | every verdict derived again is the one recorded |
| DIFFER | 1 | the code is the code that wrote the bundle, and verdicts differ |
| cannot rescore | 2 | the bundle does not validate, or names an evaluator not installed here |
| CODE_CHANGED | 3 | the evaluating code differs from the bundle's, and verdicts differ |

A MATCH says the code installed now derives the recorded verdicts from the recorded evidence.
It does not say the records truthfully describe what the agent did (a signature says they are
unchanged since signing), that the agent would act the same way again, anything about results
a model judged, or anything about the versions of evalsi's own dependencies.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import evalsi.evidence._format as fmt
from evalsi.core import EvalsiError, Outcome, Record, code_sha256
from evalsi.datasets import FieldMap, read_trajectory, record_from_dict
from evalsi.evaluators import RecordRunner, judges_needed
from evalsi.evidence._read import TaskLines, dataset_scores, read_tasks
from evalsi.evidence._validate import validate_bundle
from evalsi.runs import bind_all, dataset_scope_of_outputs, grade_tasks, runners_for
from evalsi.store import OutputRow, score_dict

if TYPE_CHECKING:
    from evalsi.evaluators import Registry

BATCH = 512
SHOWN = 20
"""Differences listed; the rest are counted."""


@dataclass(slots=True)
class Difference:
    """One result that did not reproduce."""

    seq: int
    trial: int
    evaluator: str
    recorded: Mapping[str, Any]
    rescored: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "trial": self.trial,
            "evaluator": self.evaluator,
            "recorded": dict(self.recorded),
            "rescored": dict(self.rescored),
        }


@dataclass(slots=True)
class Rescore:
    """What ``rescore_bundle`` found."""

    path: Path
    outcome: str = "CANNOT_RESCORE"
    reason: str = ""
    run_id: str | None = None
    compared: int = 0
    differing: int = 0
    differences: list[Difference] = field(default_factory=list)
    carried: dict[str, str] = field(default_factory=dict)
    """Evaluators whose results were carried as recorded, and why."""
    code: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"MATCH": 0, "DIFFER": 1, "CANNOT_RESCORE": 2, "CODE_CHANGED": 3}[self.outcome]

    def to_dict(self) -> dict[str, Any]:
        return {
            "bundle": str(self.path),
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "run_id": self.run_id,
            "compared": self.compared,
            "differing": self.differing,
            "differences": [d.to_dict() for d in self.differences],
            "carried": self.carried,
            "code": self.code,
        }


class _Cannot(Exception):
    pass


@contextlib.contextmanager
def _young_gc_off() -> Iterator[None]:
    """No cyclic collection while a batch of parsed tasks is alive: they hold no cycles, and
    walking them at every collection cost a fifth of a large rescore (bench/bundle.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def rescore_bundle(path: str | os.PathLike[str], *, registry: Registry | None = None) -> Rescore:
    """Derive the verdicts of the bundle at ``path`` again and compare (see the module)."""
    directory = Path(path)
    out = Rescore(directory)
    v = validate_bundle(directory)
    out.run_id = v.run_id
    if not v.valid:
        out.reason = "the bundle does not validate: " + (v.unreadable or "; ".join(v.findings[:3]))
        return out
    try:
        with _young_gc_off():
            asyncio.run(_Rescorer(directory, out, registry).run())
    except _Cannot as e:
        out.outcome, out.reason = "CANNOT_RESCORE", str(e)
        out.differences.clear()
    except (AttributeError, TypeError, KeyError, ValueError) as e:
        # A bundle that validates but holds shapes rescore reads and validate does not.
        out.outcome = "CANNOT_RESCORE"
        out.reason = f"the bundle's config cannot be read: {type(e).__name__}: {str(e)[:200]}"
        out.differences.clear()
    return out


class _Rescorer:
    def __init__(self, directory: Path, out: Rescore, registry: Registry | None) -> None:
        self.dir = directory
        self.out = out
        self.config = fmt.read_json(directory, fmt.CONFIG)
        self.meta = fmt.read_json(directory, fmt.METADATA)
        self.registry = registry

    async def run(self) -> None:
        out = self.out
        entries = [dict(e) for e in self.config.get("evaluators") or ()]
        names = [str(e.get("name", "")) for e in entries]
        # Verdicts computed elsewhere (ingested) have no code here to derive them with.
        local = [i for i, e in enumerate(entries) if not e.get("external")]
        for i in sorted(set(range(len(entries))) - set(local)):
            out.carried[names[i]] = "computed outside evalsi (ingested): carried as recorded"
        registry = self._registry([entries[i] for i in local])
        try:
            bound = bind_all([entries[i] for i in local], registry=registry) if local else []
        except EvalsiError as e:
            raise _Cannot(f"the bundle's evaluators cannot be bound here: {e}") from e
        judged = {user for users in judges_needed(bound).values() for user in users}
        runners: list[Any] = [None] * len(entries)  # grade_tasks grades only RecordRunners
        for i, b, runner in zip(local, bound, runners_for(bound), strict=True):
            if b.name in judged:
                out.carried[b.name] = "judged by a model: not derived offline, carried as recorded"
            else:
                runners[i] = runner
        self._code(bound)
        trials = int(self.meta.get("trials") or 1)
        await self._tasks(runners, names)
        if any(r is not None and not isinstance(r, RecordRunner) for r in runners):
            self._dataset_scope(runners, bound, names, trials)
        changed = self.out.code["changed"]
        if out.differing == 0 and out.compared == 0:
            out.outcome = "MATCH"
            out.reason = "no verdict could be derived here: every one is carried as recorded"
        elif out.differing == 0:
            out.outcome = "MATCH"
            out.reason = "every verdict derived again is the one recorded" + (
                " (the code changed, and every verdict still reproduces)" if changed else ""
            )
        elif changed:
            out.outcome = "CODE_CHANGED"
            out.reason = (
                f"the evaluating code changed and {out.differing} of {out.compared} verdicts moved"
            )
        else:
            out.outcome = "DIFFER"
            out.reason = (
                f"{out.differing} of {out.compared} verdicts differ under the code that wrote "
                "the bundle"
            )

    def _registry(self, entries: list[dict[str, Any]]) -> Registry:
        from evalsi.evaluators import load_code_evaluator
        from evalsi.packs import builtin_registry

        registry = self.registry or builtin_registry()
        for entry in entries:
            source = entry.get("source")
            if not isinstance(source, Mapping) or "object" not in source:
                continue
            where = source.get("file") or source.get("module")
            try:
                ev = load_code_evaluator(f"{where}:{source['object']}")
            except EvalsiError as e:
                raise _Cannot(f"evaluator {entry.get('name')!r} cannot be loaded: {e}") from e
            registry.register(ev)
            entry.pop("source", None)
        return registry

    def _code(self, bound: Sequence[Any]) -> None:
        recorded = self.meta.get("code_sha256")
        now = code_sha256()
        manifest = self.config.get("manifest") or {}
        then = {str(e.get("name")): e for e in manifest.get("evaluators") or ()}
        moved = []
        for b in bound:
            entry = b.manifest_entry()
            old = then.get(b.name)
            if old is None:
                continue
            if (old.get("ref"), old.get("version")) != (entry["ref"], entry["version"]) or (
                (old.get("source") or {}).get("sha256") != (entry.get("source") or {}).get("sha256")
            ):
                moved.append(b.name)
        self.out.code = {
            "recorded": recorded,
            "now": now,
            "package_changed": recorded != now,
            "evaluators_changed": moved,
            "changed": recorded != now or bool(moved),
        }

    async def _tasks(self, runners: list[Any], names: list[str]) -> None:
        batch: list[TaskLines] = []

        def problem(_file: str, _message: str) -> None:  # validated already
            pass

        for task in read_tasks(self.dir, problem):
            batch.append(task)
            if len(batch) >= BATCH:
                await self._grade(batch, runners, names)
                batch = []
        if batch:
            await self._grade(batch, runners, names)

    async def _grade(self, tasks: list[TaskLines], runners: list[Any], names: list[str]) -> None:
        pairs = [
            (
                _record(t),
                OutputRow(t.seq, t.trial, str(t.record.get("id")), t.status, error=t.error),
            )
            for t in tasks
        ]
        graded = await grade_tasks(cast(Sequence[Any], runners), pairs)
        derived: dict[tuple[int, int, int], dict[str, Any]] = {}
        for index, seqs, result_batch in graded:
            for i, seq in enumerate(seqs):
                derived[(seq, result_batch.trial, index)] = _verdict(
                    Outcome(result_batch.outcome[i]), result_batch.score_list(i)
                )
        for task in tasks:
            for line in task.scores:
                at = line.get("evaluator")
                if type(at) is not int or runners[at] is None:
                    continue
                key = (task.seq, task.trial, at)
                self._compare(task.seq, task.trial, names[at], line, derived.get(key))

    def _dataset_scope(
        self, runners: list[Any], bound: Sequence[Any], names: list[str], trials: int
    ) -> None:
        def answered() -> Iterator[Record]:
            def problem(_file: str, _message: str) -> None:
                pass

            for task in read_tasks(self.dir, problem):
                if task.status == "ok":
                    yield _record(task)

        feeding = [r for r in runners if r is not None]
        _, reduced = dataset_scope_of_outputs(
            feeding, bound, answered(), trials=trials, seed=int(self._seed())
        )
        derived = {}
        for _, _, batch in reduced.rows:
            index = names.index(batch.evaluator)
            derived[index] = _verdict(Outcome(batch.outcome[0]), batch.score_list(0))
        for line in dataset_scores(self.dir):
            at = line.get("evaluator")
            if type(at) is int and runners[at] is not None:
                self._compare(-1, 0, names[at], line, derived.get(at))

    def _seed(self) -> int:
        spec = self.config.get("spec") or {}
        return int(spec.get("seed") or 0)

    def _compare(
        self,
        seq: int,
        trial: int,
        name: str,
        line: Mapping[str, Any],
        got: Mapping[str, Any] | None,
    ) -> None:
        out = self.out
        out.compared += 1
        recorded = _verdict_of_line(line)
        if got is not None and _same(recorded, got):
            return
        out.differing += 1
        if len(out.differences) < SHOWN:
            out.differences.append(
                Difference(seq, trial, name, recorded, got or {"outcome": "not derived"})
            )


def _record(task: TaskLines) -> Record:
    record = record_from_dict(task.record, FieldMap(), line=0, path=fmt.RECORDS)
    if task.trajectory is not None:
        record = replace(record, trajectory=read_trajectory(task.trajectory, stored=True))
    return record


def _verdict(outcome: Outcome, scores: Sequence[Any]) -> dict[str, Any]:
    return {
        "outcome": outcome.name.lower(),
        "scores": [
            {k: v for k, v in score_dict(s).items() if k in ("name", *_VALUE_KEYS)} for s in scores
        ],
    }


_VALUE_KEYS = ("number", "passed", "label", "structured")


def _verdict_of_line(line: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "outcome": line.get("outcome"),
        "scores": [
            {k: v for k, v in s.items() if k in ("name", *_VALUE_KEYS)}
            for s in line.get("scores") or ()
            if isinstance(s, dict)
        ],
    }


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a["outcome"] != b["outcome"] or len(a["scores"]) != len(b["scores"]):
        return False
    for x, y in zip(a["scores"], b["scores"], strict=True):
        if x.keys() != y.keys():
            return False
        for key in x:
            if not _equal(x[key], y[key]):
                return False
    return True


def _equal(x: Any, y: Any) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        if isinstance(x, bool) or isinstance(y, bool):
            return x is y
        if not isinstance(x, int | float) or not isinstance(y, int | float):
            return False
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(x) and math.isnan(y))
    return bool(x == y)


__all__ = ["Difference", "Rescore", "rescore_bundle"]
