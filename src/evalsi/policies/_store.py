"""Where applied policies and their scores are kept: the store's ``runs`` and ``results``.

Each applied *version* of a policy is one run of kind ``watch``, named after the policy, whose
``spec`` holds the policy document (``{"policy": doc, "project", "spec_hash", "evaluators"}``;
``evaluators`` lists the cascade then the feedback steps, so stored results decode as any run's
do). Its id is derived from the spec hash, so applying the same spec again reuses the run.
While applied the run is ``running`` (owned by this process, kept alive by the store's
heartbeat); replaced by a new version it becomes ``stopped``, deleted ``cancelled``: it is created
and ended through ``runs.RunRow`` like every run, and ends with a ``RunManifest`` (its dataset
being the project's traces, its records the traces it graded). A restarted server re-applies the
newest live-or-interrupted version of each (project, name).

Results are upserted with ``record_id`` = the trace id under the key ``result_key(trace_id)``,
so grading a trace again (a re-delivery, a feedback re-run) replaces its rows.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.core import DatasetPin, NotFoundError, ResultBatch, RunManifest, RunStatus
from evalsi.policies._sampling import result_key
from evalsi.runs import RunRow
from evalsi.store import RunInfo, SqlStore

RUN_KIND = "watch"
_LIVE = (RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.INTERRUPTED)


def run_id_for(spec_hash: str) -> str:
    """The run holding one policy version's scores: ``watch-`` + 20 hex digits of its hash."""
    return "watch-" + spec_hash.removeprefix("sha256:")[:20]


@dataclass(frozen=True, slots=True)
class StoredPolicy:
    """A policy version found in the store."""

    run_id: str
    project: str
    name: str
    doc: dict[str, Any]
    created_at: float
    state: dict[str, Any] | None = None  # the counts and alert states it last saved
    status: str = RunStatus.RUNNING  # interrupted: the process that applied it is gone


class PolicyRuns:
    """Policy versions as ``watch`` runs, and their results. Store calls run on a worker thread
    (except on an in-memory SQLite store, whose one connection belongs to its thread); they
    are serialised, so that saving a version (read the run, then create or reopen it) is never
    interleaved with another save or end of the same policy."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._lock = threading.Lock()

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self.store.any_thread:
            return await asyncio.to_thread(self._locked, fn, *args, **kwargs)
        return self._locked(fn, *args, **kwargs)

    def _locked(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return fn(*args, **kwargs)

    async def save(
        self,
        *,
        project: str,
        name: str,
        spec_hash: str,
        doc: dict[str, Any],
        evaluators: list[dict[str, Any]],
        replaces: str | None,
        replaced_state: dict[str, Any] | None = None,
    ) -> RunInfo:
        """Make ``run_id_for(spec_hash)`` the live run of this policy (created or reopened);
        the run it replaces (another version) is stopped with ``replaced_state``."""
        return await self._call(  # type: ignore[no-any-return]
            self._save, project, name, spec_hash, doc, evaluators, replaces, replaced_state
        )

    def _save(
        self,
        project: str,
        name: str,
        spec_hash: str,
        doc: dict[str, Any],
        evaluators: list[dict[str, Any]],
        replaces: str | None,
        replaced_state: dict[str, Any] | None,
    ) -> RunInfo:
        run_id = run_id_for(spec_hash)
        try:
            info = self.store.get_run(run_id)
        except NotFoundError:
            spec = {
                "policy": doc,
                "project": project,
                "spec_hash": spec_hash,
                "evaluators": evaluators,
            }
            row = RunRow(
                self.store, kind=RUN_KIND, spec=spec, name=name, run_id=run_id, project_id=project
            )
            info = self.store.get_run(row.open()[1])
        else:
            if info.status != RunStatus.RUNNING:
                info = self.store.mark_status(run_id, RunStatus.RUNNING)
        if replaces and replaces != run_id:
            self._end(replaces, RunStatus.STOPPED, replaced_state)
        return info

    async def end(self, run_id: str, status: RunStatus, state: dict[str, Any] | None) -> None:
        """End a policy version's run (``stopped`` when replaced, ``cancelled`` when deleted)
        with its last counts and alert states."""
        await self._call(self._end, run_id, status, state)

    def _end(self, run_id: str, status: RunStatus, state: dict[str, Any] | None = None) -> None:
        try:
            info = self.store.get_run(run_id)
        except NotFoundError:
            return
        summary = {"policy_state": state} if state is not None else info.summary
        counts = ((summary or {}).get("policy_state") or {}).get("counts") or {}
        graded = int(counts.get("evaluated") or 0)
        manifest = RunManifest.capture(
            spec_hash=info.spec.get("spec_hash"),
            evaluators=info.spec.get("evaluators") or (),
            dataset=DatasetPin(f"traces:{info.project_id}", None, graded),
        )
        row = RunRow(self.store, kind=RUN_KIND, spec=info.spec, run_id=run_id)
        row.adopt(run_id)
        row.finish(status, records=graded, summary=summary, manifest=manifest.to_dict())

    async def live(self) -> list[StoredPolicy]:
        """The newest live or interrupted version of each (project, policy name)."""
        return await self._call(self._live)  # type: ignore[no-any-return]

    def _live(self) -> list[StoredPolicy]:
        newest: dict[tuple[str, str], StoredPolicy] = {}
        stale: list[str] = []
        for info in self.store.list_runs(10_000, kind=RUN_KIND):  # newest first
            if info.status not in _LIVE or not isinstance(info.spec.get("policy"), dict):
                continue
            key = (info.project_id, info.name)
            if key in newest:
                stale.append(info.id)  # an older live version (a crash between two writes)
                continue
            state = (info.summary or {}).get("policy_state")
            newest[key] = StoredPolicy(
                info.id,
                info.project_id,
                info.name,
                info.spec["policy"],
                info.created_at,
                state if isinstance(state, dict) else None,
                str(info.status),
            )
        for run_id in stale:
            self._end(run_id, RunStatus.STOPPED)
        return list(newest.values())

    async def own(self, run_id: str) -> None:
        """Make this process the owner of a live policy's run (its heartbeat keeps it
        ``running``): a cluster's ``watch`` lease holder takes the runs of a replica gone."""
        await self._call(self.store.mark_status, run_id, RunStatus.RUNNING)

    async def save_state(self, run_id: str, state: dict[str, Any]) -> None:
        """Keep a policy's counts and alert states with its run (restored after a restart)."""
        await self._call(self.store.set_summary, run_id, {"policy_state": state})

    async def graded(self, run_id: str, trace_id: str) -> bool:
        """Whether the run holds results for this trace."""
        seq, trial = result_key(trace_id)
        return await self._call(self.store.has_results, run_id, seq, trial)  # type: ignore[no-any-return]

    async def write(self, run_id: str, rows: Sequence[tuple[int, int, ResultBatch]]) -> None:
        await self._call(self.store.write_batches, run_id, rows)
