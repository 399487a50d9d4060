"""Replaying an agent run from its cassettes: ``evalsi replay RUN``.

The replay is a new run of the stored spec whose tasks are played from the recorded run's
cassettes (``agents.Tape``): the same trajectories with no model or tool call, graded by the
spec's evaluators or by others (``evaluators``) — to re-grade, or to debug deterministically.
With ``branch_from_step=N`` each task replays its first N calls and makes the rest live:
counterfactual evaluation from step N, the new calls recorded in the new run's cassettes.

The new run's spec records ``replay: {of, branch_from_step}``, so a replay resumes like any
run. A task whose recorded cassette is missing, or that needs a call the cassette lacks, is lost
to infrastructure (``infra_error(cassette)``) with the reason — never called live.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalsi.connectors import Resilience
from evalsi.core import UserError
from evalsi.evaluators import Registry
from evalsi.runs._cassettes import StoredCassettes
from evalsi.runs._run_result import RunResult
from evalsi.runs._run_row import StoreLike, open_store
from evalsi.runs._scheduler import RunProgress
from evalsi.specs import EvaluatorEntry, RunSpec
from evalsi.store import RunInfo, SqlStore

if TYPE_CHECKING:
    from evalsi.agents import RemoteHarness


def replay_spec(
    info: RunInfo,
    spec: RunSpec,
    *,
    evaluators: Sequence[str] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    gates: Sequence[str] | None = None,
) -> RunSpec:
    """``spec`` (the recorded run's) with other evaluators, params and gates when given: new
    evaluators drop the recorded gates, which name the old ones, unless ``gates`` are given."""
    if spec.target.kind != "agent":
        raise UserError(
            f"run {info.id} is not an agent run; replay plays an agent run's cassettes",
            hint="re-grade a Run's stored outputs with `evalsi grade --from RUN`",
        )
    if evaluators:
        unknown = sorted(set(params or {}) - set(evaluators))
        if unknown:
            raise UserError(f"--param names {', '.join(unknown)}, which --evaluators does not list")
        entries = tuple(
            EvaluatorEntry(ref=name, params=dict((params or {}).get(name, {})))
            for name in evaluators
        )
        return _with(spec, evaluators=entries, gates=tuple(gates or ()))
    if params:
        raise UserError("--param needs --evaluators (the evaluators the replay grades with)")
    if gates is not None:
        return _with(spec, gates=tuple(gates))
    return spec


def _with(spec: RunSpec, **changes: Any) -> RunSpec:
    """``spec`` with other evaluators or gates, in its document too: the document is what
    the run stores, hashes and resumes from."""
    raw = spec.raw
    if raw:
        body = dict(raw.get("spec", {}))
        if "evaluators" in changes:
            body["evaluators"] = [e.as_mapping() for e in changes["evaluators"]]
        if "gates" in changes:
            body["gates"] = list(changes["gates"])
        raw = {**raw, "spec": body}
    return dataclasses.replace(spec, raw=raw, **changes)


def check_branch(spec: RunSpec, branch_from_step: int | None) -> None:
    """Refuse to branch a run whose tasks keep state in a workspace: its replayed tool calls
    changed nothing there, so the live calls after the branch point would see a workspace the
    agent never saw. A CLI agent's workspace is rebuilt from its recorded diff, so it branches
    (at step 0: the whole run live again)."""
    if branch_from_step is not None and branch_from_step < 0:
        raise UserError(f"--branch-from-step must be 0 or more, got {branch_from_step}")
    env, agent = spec.environment, spec.target.agent
    kind = agent.kind if agent is not None else "builtin"
    if branch_from_step and env is not None and env.has_workspace() and kind != "cli":
        raise UserError(
            "--branch-from-step: this run's tasks keep state in a workspace, and a replayed "
            "tool call changes nothing there, so the live calls after the branch point would "
            "start from a workspace the agent never saw",
            hint="replay it whole (no --branch-from-step) to re-grade, or branch from step 0 "
            "to run every call live again",
        )


def cassettes_of(db: SqlStore, info: RunInfo, branch_from_step: int | None) -> StoredCassettes:
    """The recorded run's cassettes; refused when it recorded none."""
    if branch_from_step is not None and branch_from_step < 0:
        raise UserError(f"--branch-from-step must be 0 or more, got {branch_from_step}")
    cassettes = StoredCassettes(db, info.id, branch_from_step)
    if not len(cassettes):
        raise UserError(
            f"run {info.id} recorded no cassette",
            hint="agent runs record one unless spec.target.agent.cassette.record is false; "
            "runs made before evalsi recorded cassettes have none",
        )
    return cassettes


async def replay_run(
    store: StoreLike,
    run_id: str,
    *,
    registry: Registry,
    evaluators: Sequence[str] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    gates: Sequence[str] | None = None,
    branch_from_step: int | None = None,
    progress: RunProgress | None = None,
    resilience: Resilience | None = None,
    remote_harness: RemoteHarness | None = None,
) -> RunResult:
    """Replay agent run ``run_id`` from its cassettes, as a new run (see the module)."""
    from evalsi.runs._execute import execute_run
    from evalsi.runs._rerun import stored_spec

    db = open_store(store, create=False)
    info = db.get_run(run_id)
    if info.kind != "run":
        raise UserError(f"run {info.id} is a {info.kind} run; replay plays an agent run")
    spec = replay_spec(info, stored_spec(info), evaluators=evaluators, params=params, gates=gates)
    check_branch(spec, branch_from_step)
    return await execute_run(
        spec,
        store=db,
        progress=progress,
        registry=registry,
        resilience=resilience,
        remote_harness=remote_harness,
        replay=cassettes_of(db, info, branch_from_step),
    )


__all__ = ["cassettes_of", "check_branch", "replay_run", "replay_spec"]
