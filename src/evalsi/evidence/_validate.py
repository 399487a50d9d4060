"""``validate_bundle``: whether a bundle is whole, untouched and consistent
(``evalsi bundle validate DIR``: exit 0 valid, 1 invalid, 2 cannot read).

The checks, in order: the path is a directory (not a link) holding only regular files of the
format; ``manifest.json`` parses and names a format this evalsi reads; every file it lists
exists with the recorded size and sha256, and every required file is listed; the JSON files
parse and the JSONL files parse line by line; ``test_plan.json`` still hashes to the value
registered before the first task; and the files agree with each other: one run id, the counts
in the metadata, every line's task present in ``records.jsonl``, one result per record-scope
evaluator for every finished task (none for a lost one), tool calls and end states matching
their trajectory, the metrics, cases and category figures recomputable from the records and
scores, and the report rendered from them. A malformed file is a finding, never a crash.

Warnings never fail a bundle: the code that evaluated it differs from the code installed now
(code drift), its plan was written with the bundle rather than registered, or it is signed
and no ``allowed_signers`` was given to verify it. Checksums detect tampering and corruption;
they are not a signature.
"""

from __future__ import annotations

import array
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evalsi.evidence._format as fmt
from evalsi.core import code_sha256, content_hash
from evalsi.evidence._metrics import Metrics
from evalsi.evidence._read import TaskLines, dataset_scores, read_tasks
from evalsi.evidence._report import render_report
from evalsi.evidence._signing import SignatureCheck, verify_signature
from evalsi.evidence._views import (
    PARALLEL_BYTES,
    TRIAL_BITS,
    Background,
    Derived,
    Views,
    check_views,
    pack,
)
from evalsi.runs import Case, CaseBuilder, CategoryFigures, pass_threshold, with_unattempted

MAX_FINDINGS = 200
MANIFEST_KEYS = frozenset({"format", "format_version", "run_id", "writer", "required", "files"})
FINISHED = ("ok", "target_error", "skipped")
OUTCOMES = ("scored", "skipped", "error", "cancelled")


@dataclass(slots=True)
class Validation:
    """What ``validate_bundle`` found."""

    path: Path
    run_id: str | None = None
    format_version: int | None = None
    files_checked: int = 0
    tasks: int = 0
    findings: list[str] = field(default_factory=list)
    more_findings: int = 0
    warnings: list[str] = field(default_factory=list)
    unreadable: str | None = None
    signature: SignatureCheck | None = None
    signed: bool = False
    declared: bool = False

    @property
    def valid(self) -> bool:
        return self.unreadable is None and not self.findings

    @property
    def exit_code(self) -> int:
        """0 valid, 1 invalid, 2 cannot read."""
        if self.unreadable is not None:
            return 2
        return 1 if self.findings else 0

    @property
    def status(self) -> str:
        return {0: "PASS", 1: "FAIL", 2: "UNREADABLE"}[self.exit_code]

    def find(self, where: str, message: str) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(f"{where}: {message}")
        else:
            self.more_findings += 1

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bundle": str(self.path),
            "status": self.status,
            "valid": self.valid,
            "run_id": self.run_id,
            "format_version": self.format_version,
            "files_checked": self.files_checked,
            "tasks": self.tasks,
            "declared": self.declared,
            "findings": self.findings,
            "more_findings": self.more_findings,
            "warnings": self.warnings,
            "unreadable": self.unreadable,
            "signed": self.signed,
        }
        if self.signature is not None:
            out["signature"] = {
                "verified": self.signature.verified,
                "identity": self.signature.identity,
                "fingerprint": self.signature.fingerprint,
                "reason": self.signature.reason,
            }
        return out


def validate_bundle(
    path: str | os.PathLike[str], *, allowed_signers: str | os.PathLike[str] | None = None
) -> Validation:
    """Check the bundle at ``path``; with ``allowed_signers``, verify its signature too."""
    directory = Path(path)
    v = Validation(directory)
    try:
        mode = os.lstat(directory).st_mode
    except FileNotFoundError:
        v.unreadable = f"{directory}: no such directory"
        return v
    except OSError as e:
        v.unreadable = f"{directory}: cannot read ({e.strerror or e})"
        return v
    if stat.S_ISLNK(mode):
        v.unreadable = f"{directory} is a symbolic link; validate the directory it points to"
        return v
    if not stat.S_ISDIR(mode):
        v.unreadable = f"{directory} is not a directory"
        return v
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        v.unreadable = f"{directory}: cannot list ({e.strerror or e})"
        return v
    try:
        _Checks(v, directory, names, allowed_signers).run()
    except _Unreadable as e:
        v.unreadable = str(e)
    return v


class _Unreadable(Exception):
    pass


class _Checks:
    def __init__(
        self,
        v: Validation,
        directory: Path,
        names: list[str],
        allowed_signers: str | os.PathLike[str] | None,
    ) -> None:
        self.v = v
        self.dir = directory
        self.names = names
        self.allowed = allowed_signers
        self.ok: set[str] = set()  # regular files of the format, safe to open
        self.json: dict[str, Any] = {}
        self.cases: Derived | None = None
        self.side: _Side | None = None

    def run(self) -> None:
        v = self.v
        for name in self.names:
            kind = fmt.entry_kind(self.dir, name)
            if kind is not None:
                v.find(name, f"is {kind}; a bundle holds only regular files (not read)")
            elif name not in fmt.KNOWN:
                v.find(name, "is not a file of the bundle format")
            else:
                self.ok.add(name)
        # The trajectory side starts at once: a child process's start overlaps the hashing.
        views = (fmt.TRAJECTORIES, fmt.TOOL_CALLS, fmt.END_STATES)
        self.side = _Side(self.dir) if all(n in self.ok for n in views) else None
        try:
            self._checks()
        finally:
            if self.side is not None:
                self.side.close()

    def _checks(self) -> None:
        v = self.v
        manifest = self._manifest()
        if manifest is None:
            return
        self._listed(manifest)
        for name in fmt.JSON_FILES:
            if name in self.ok:
                try:
                    doc = fmt.read_json(self.dir, name)
                except (ValueError, OSError, fmt.Unsafe) as e:
                    v.find(name, f"not JSON ({e})")
                    continue
                if isinstance(doc, dict):
                    self.json[name] = doc
                else:
                    v.find(name, "expected a JSON object")
        self._metadata(manifest)
        if all(n in self.ok for n in fmt.JSONL_FILES) and all(
            n in self.json for n in fmt.JSON_FILES
        ):
            try:
                self._shapes()
                self._tasks()
            except (ValueError, OSError, fmt.Unsafe) as e:
                v.find("tasks", str(e))
            except (AttributeError, TypeError, KeyError, IndexError) as e:
                # A file that parses but holds the wrong shapes somewhere no check above named:
                # a finding, never a crash.
                v.find("bundle", f"malformed content ({type(e).__name__}: {str(e)[:200]})")
            self._report()
        self._signature()

    # -- manifest ------------------------------------------------------------------------------
    def _manifest(self) -> dict[str, Any] | None:
        v = self.v
        if fmt.MANIFEST not in self.ok:
            if fmt.MANIFEST not in self.names:
                v.find(fmt.MANIFEST, "missing (a bundle cut short, or not a bundle)")
            return None
        try:
            manifest = fmt.read_json(self.dir, fmt.MANIFEST)
        except (ValueError, OSError, fmt.Unsafe) as e:
            v.find(fmt.MANIFEST, f"not JSON ({e})")
            return None
        if not isinstance(manifest, dict) or manifest.get("format") != fmt.FORMAT:
            v.find(fmt.MANIFEST, f"not an {fmt.FORMAT} manifest")
            return None
        version = manifest.get("format_version")
        if type(version) is not int:
            v.find(fmt.MANIFEST, "format_version is not an integer")
            return None
        v.format_version = version
        if version > fmt.FORMAT_VERSION:
            raise _Unreadable(
                f"format version {version} was written by a newer evalsi; this one reads "
                f"up to {fmt.FORMAT_VERSION}"
            )
        if version < 1:
            v.find(fmt.MANIFEST, f"unknown format version {version}")
            return None
        if manifest.get("required") != list(fmt.REQUIRED):
            v.find(fmt.MANIFEST, "its required-file list is not the format's")
        unknown = sorted(set(manifest) - MANIFEST_KEYS)
        if unknown:
            v.find(fmt.MANIFEST, f"keys the format does not have: {', '.join(unknown)[:200]}")
        # Every byte of the manifest is bound: it is exactly the writer's rendering of what it
        # says, so no whitespace, key order or escape can carry a change no check reads.
        if fmt.read_bytes(self.dir, fmt.MANIFEST) != fmt.dumps(manifest):
            v.find(fmt.MANIFEST, "is not in the format's canonical form (edited by hand?)")
        v.run_id = manifest.get("run_id") if isinstance(manifest.get("run_id"), str) else None
        return manifest

    def _listed(self, manifest: Mapping[str, Any]) -> None:
        v = self.v
        files = manifest.get("files")
        if not isinstance(files, list):
            v.find(fmt.MANIFEST, "files is not a list")
            self.ok.clear()
            return
        listed: set[str] = set()
        for i, entry in enumerate(files):
            if not isinstance(entry, dict) or not {"path", "size", "sha256"} <= entry.keys():
                v.find(fmt.MANIFEST, f"files[{i}]: expected path, size and sha256")
                continue
            name = entry["path"]
            if not isinstance(name, str) or not fmt.safe_name(name) or name not in fmt.REQUIRED:
                v.find(fmt.MANIFEST, f"files[{i}]: {str(name)[:80]!r} is not a content file")
                continue
            if name in listed:
                v.find(fmt.MANIFEST, f"{name} is listed twice")
                continue
            listed.add(name)
            if name not in self.ok:
                if name not in self.names:
                    v.find(name, "listed in the manifest but missing")
                continue
            try:
                actual = fmt.hash_file(self.dir, name)
            except (OSError, fmt.Unsafe) as e:
                v.find(name, f"cannot be read ({e})")
                self.ok.discard(name)
                continue
            v.files_checked += 1
            if actual.size != entry["size"]:
                v.find(name, f"size {actual.size}, the manifest says {entry['size']}")
            if actual.sha256 != entry["sha256"]:
                v.find(name, "sha256 differs from the manifest's (changed since it was sealed)")
        for name in fmt.REQUIRED:
            if name not in listed:
                v.find(fmt.MANIFEST, f"does not list {name}")
                self.ok.discard(name)

    # -- metadata and plan --------------------------------------------------------------------
    def _metadata(self, manifest: Mapping[str, Any]) -> None:
        v = self.v
        meta = self.json.get(fmt.METADATA)
        if not isinstance(meta, dict):
            if fmt.METADATA in self.json:
                v.find(fmt.METADATA, "expected an object")
                del self.json[fmt.METADATA]
            return
        for name, key in ((fmt.METADATA, "run_id"), (fmt.SUMMARY, "run_id")):
            doc = self.json.get(name)
            if isinstance(doc, dict) and doc.get(key) != v.run_id:
                v.find(name, f"run id {doc.get(key)!r} is not the manifest's {v.run_id!r}")
        if meta.get("format_version") != manifest.get("format_version"):
            v.find(fmt.METADATA, "format_version differs from the manifest's")
        if manifest.get("writer") != f"evalsi {meta.get('evalsi_version')}":
            v.find(fmt.MANIFEST, "writer is not the evalsi version the metadata names")
        v.declared = bool(meta.get("declared"))
        if fmt.PLAN in self.ok:
            try:
                text = fmt.read_bytes(self.dir, fmt.PLAN)
            except (ValueError, OSError, fmt.Unsafe) as e:
                v.find(fmt.PLAN, str(e))
            else:
                if content_hash(text) != meta.get("test_plan_sha256"):
                    v.find(
                        fmt.PLAN,
                        "does not hash to the test_plan_sha256 registered before the first task",
                    )
                plan = self.json.get(fmt.PLAN)
                if isinstance(plan, dict) and bool(plan.get("declared")) != v.declared:
                    v.find(fmt.PLAN, "declared differs from the metadata's")
        if not meta.get("test_plan_registered", True):
            v.warnings.append(
                "the test plan was written with the bundle: the run predates registered plans"
            )
        recorded = meta.get("code_sha256")
        if isinstance(recorded, str) and recorded != code_sha256():
            v.warnings.append(
                "code drift: the code that evaluated this run differs from the code installed "
                f"now ({recorded[:19]}... vs {code_sha256()[:19]}...); evalsi rescore tells "
                "whether its verdicts still reproduce"
            )
        config = self.json.get(fmt.CONFIG)
        if isinstance(config, dict) and config.get("kind") != meta.get("kind"):
            v.find(fmt.CONFIG, "kind differs from the metadata's")

    # -- tasks ---------------------------------------------------------------------------------
    def _shapes(self) -> None:
        """The nested shapes the checks below read, named when wrong."""
        v = self.v
        meta, config, plan = (self.json[n] for n in (fmt.METADATA, fmt.CONFIG, fmt.PLAN))
        expected: list[tuple[str, str, Any, type | tuple[type, ...]]] = [
            (fmt.METADATA, "counts", meta.get("counts"), dict),
            (fmt.CONFIG, "spec", config.get("spec"), dict),
            (fmt.CONFIG, "manifest", config.get("manifest"), (dict, type(None))),
            (fmt.PLAN, "scenarios", plan.get("scenarios", {}), dict),
        ]
        for name, key, value, kind in expected:
            if not isinstance(value, kind):
                v.find(name, f"{key} is not an object")
        selected = plan.get("scenarios", {})
        if isinstance(selected, dict):
            chosen = selected.get("selected", [])
            if not isinstance(chosen, list) or not all(
                isinstance(e, dict) and type(e.get("seq")) is int for e in chosen
            ):
                v.find(fmt.PLAN, "scenarios.selected is not a list of scenarios with a seq")

    def _tasks(self) -> None:
        v = self.v
        meta, summary, config = (
            self.json[fmt.METADATA],
            self.json[fmt.SUMMARY],
            self.json[fmt.CONFIG],
        )
        plan = self.json[fmt.PLAN]
        if not all(isinstance(d, dict) for d in (meta, summary, config, plan)):
            v.find("bundle", "metadata, summary, config and plan must be JSON objects")
            return
        evaluators = config.get("evaluators")
        if not isinstance(evaluators, list) or not all(isinstance(e, dict) for e in evaluators):
            v.find(fmt.CONFIG, "evaluators is not a list of objects")
            return
        names = [str(e.get("name", "")) for e in evaluators]
        trials = meta.get("trials")
        if type(trials) is not int or trials < 1:
            v.find(fmt.METADATA, "trials is not a positive integer")
            return
        metrics = Metrics(names)
        dataset_rows = dataset_scores(self.dir)
        dataset_scope = {row.get("evaluator") for row in dataset_rows}
        for row in dataset_rows:
            metrics.add_dataset(row, v.find)
        record_scope = [i for i in range(len(names)) if i not in dataset_scope]
        counts = {"records": 0, "tasks": 0, "scores": len(dataset_rows), "tool_calls": 0}
        counts["end_states"] = 0
        builder = CaseBuilder(trials)

        tasks = array.array("q")  # packed (seq, trial) of each task, then 1 when it is ok
        ok = array.array("b")

        def task_cases() -> Iterator[Case]:
            last = -1
            for task in read_tasks(self.dir, v.find, trajectories=False):
                tasks.append(pack(task.seq, task.trial))
                ok.append(task.status == "ok")
                if task.seq != last:  # tasks come in (seq, trial) order
                    counts["records"] += 1
                    last = task.seq
                metadata = task.record.get("metadata") or {}
                builder.task(
                    task.seq,
                    task.trial,
                    str(task.record.get("id", "")),
                    metadata.get("category") if isinstance(metadata, dict) else None,
                    task.status,
                    pass_threshold(metadata) if isinstance(metadata, dict) else None,
                )
                self._task(task, trials, record_scope, names, metrics, counts, builder)
                yield from builder.ready()
            yield from builder.finish()

        selected = (plan.get("scenarios") or {}).get("selected") or ()
        figures: dict[str | None, CategoryFigures] = {}
        overall = CategoryFigures(None)
        views = self.side if self.side is not None else _Side(self.dir)
        self.cases = Derived(self.dir, fmt.CASES, "not what the records and scores give", v.find)
        try:
            for case in with_unattempted(task_cases(), selected, trials):
                if case.category is not None:
                    figures.setdefault(case.category, CategoryFigures(case.category)).add(case)
                overall.add(case)
                self.cases.expect(fmt.line(case.to_dict()), case.id)
            self.cases.finish()
        finally:
            self.cases.close()
            found = views.result()
        for finding in found.findings:
            where, _, message = finding.partition(": ")
            v.find(where, message)
        counts["tool_calls"], counts["end_states"] = found.tool_calls, found.end_states
        self._trajectories_of(found, tasks, ok)
        v.tasks = counts["tasks"]
        for key, value in counts.items():
            if (meta.get("counts") or {}).get(key) != value:
                v.find(
                    fmt.METADATA,
                    f"counts.{key} is {(meta.get('counts') or {}).get(key)}, "
                    f"the files hold {value}",
                )
        if summary.get("tasks") != counts["tasks"]:
            v.find(
                fmt.SUMMARY, f"tasks {summary.get('tasks')}, records.jsonl holds {counts['tasks']}"
            )
        ordered = [figures[k] for k in sorted(figures, key=str)]
        if summary.get("categories") != [f.to_dict() for f in ordered]:
            v.find(fmt.SUMMARY, "categories are not what the cases give")
        if summary.get("overall") != overall.to_dict():
            v.find(fmt.SUMMARY, "overall figures are not what the cases give")
        metrics.compare(summary.get("metrics"), v.find)

    def _task(
        self,
        task: TaskLines,
        trials: int,
        record_scope: list[int],
        names: list[str],
        metrics: Metrics,
        counts: dict[str, int],
        builder: CaseBuilder,
    ) -> None:
        v = self.v
        key = task.key
        counts["tasks"] += 1
        counts["scores"] += len(task.scores)
        if task.trial >= trials:
            v.find(fmt.RECORDS, f"task {key}: trial {task.trial} of {trials}")
        if not isinstance(task.record.get("id"), str):
            v.find(fmt.RECORDS, f"task {key}: the record has no string id")
        seen = [line.get("evaluator") for line in task.scores]
        want = record_scope if task.status in FINISHED else []
        if seen != want:
            v.find(
                fmt.SCORES,
                f"task {key} ({task.status}): results for evaluators {seen}, expected {want} "
                "(one per record-scope evaluator, in order)",
            )
        for line in task.scores:
            outcome = line.get("outcome")
            if outcome not in OUTCOMES or not isinstance(line.get("scores"), list):
                v.find(fmt.SCORES, f"task {key}: malformed result {str(line)[:120]}")
                continue
            index = line.get("evaluator")
            if type(index) is int and 0 <= index < len(names):
                metrics.add(index, outcome, line["scores"])
                if index in record_scope:
                    builder.result(task.seq, task.trial, outcome, line["scores"])

    def _trajectories_of(self, views: Views, tasks: array.array[int], ok: array.array[int]) -> None:
        """Every trajectory belongs to a task of records.jsonl that the system answered."""
        have = views.packed()
        i = 0
        for key, answered in zip(tasks, ok, strict=True):
            while i < len(have) and have[i] < key:
                self.v.find(fmt.TRAJECTORIES, f"task {_unpack(have[i])} is not in {fmt.RECORDS}")
                i += 1
            if i < len(have) and have[i] == key:
                if not answered:
                    self.v.find(
                        fmt.TRAJECTORIES,
                        f"task {_unpack(key)} has a trajectory, and "
                        "no answer (a lost or failed task)",
                    )
                i += 1
        for key in have[i:]:
            self.v.find(fmt.TRAJECTORIES, f"task {_unpack(key)} is not in {fmt.RECORDS}")

    def _report(self) -> None:
        config, summary, gates = (
            self.json[fmt.CONFIG],
            self.json[fmt.SUMMARY],
            self.json[fmt.GATES],
        )
        plan = self.json[fmt.PLAN]
        if fmt.REPORT not in self.ok or not all(
            isinstance(d, dict) for d in (config, summary, gates, plan)
        ):
            return
        try:
            text = render_report(plan, summary, gates, _Info.of(config))
            if fmt.read_bytes(self.dir, fmt.REPORT) != text.encode():
                self.v.find(fmt.REPORT, "is not the report its plan, summary and gates give")
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            self.v.find(fmt.REPORT, f"cannot be rendered from the bundle ({type(e).__name__})")

    def _signature(self) -> None:
        v = self.v
        v.signed = fmt.SIGNATURE in self.names
        if self.allowed is None:
            if v.signed:
                v.warnings.append(
                    "signed (manifest.json.sig) but not verified: pass --allowed-signers FILE"
                )
            return
        check = verify_signature(self.dir, Path(self.allowed))
        v.signature = check
        if not check.verified:
            v.find(fmt.SIGNATURE, f"not verified: {check.reason}")


class _Side:
    """The trajectory side (``_views.check_views``), in a child process for a large bundle,
    while this one checks records and scores."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        size = sum(
            (directory / n).stat().st_size
            for n in (fmt.TRAJECTORIES, fmt.TOOL_CALLS, fmt.END_STATES)
        )
        self._child = Background(directory) if size >= PARALLEL_BYTES else None

    def result(self) -> Views:
        if self._child is None:
            return check_views(str(self.directory))
        return self._child.result()

    def close(self) -> None:
        if self._child is not None:
            self._child.close()


def _unpack(key: int) -> tuple[int, int]:
    return (key >> TRIAL_BITS, key & ((1 << TRIAL_BITS) - 1))


@dataclass(frozen=True, slots=True)
class _Info:
    """What the report reads of a run, from the bundle's config."""

    name: str
    kind: str

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> _Info:
        return cls(str(config.get("name", "")), str(config.get("kind", "")))


__all__ = ["Validation", "validate_bundle"]
