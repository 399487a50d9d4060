"""``evalsi grade --from RUN_ID`` (grade a Run's stored outputs, never calling the target),
``evalsi rerun RUN_ID`` (run again from the spec it stored) and ``evalsi replay RUN_ID`` (play an
agent run again from its cassettes: no model or tool call, or live from a branch step)."""

from __future__ import annotations

import argparse
from typing import Any

from evalsi.cli._eval import (
    add_no_cache_flag,
    add_param_flag,
    evaluator_list,
    parse_params,
    progress_line,
)
from evalsi.cli._evaluators import code_registry, stored_registry
from evalsi.cli._output import (
    FORMATS,
    add_failures_flag,
    note,
    print_json,
    print_result,
    with_failures,
)
from evalsi.cli._remote import add_server_flag, connect_reader, server_of
from evalsi.cli._warnings import print_warnings, result_warnings
from evalsi.core import UserError

GRADE_EPILOG = """\
examples:
  evalsi run -f run.yaml --execute-only --format json     # call the target, store outputs
  evalsi grade --from RUN_ID --evaluators exact-match,contains
  evalsi grade --from RUN_ID --evaluators exact-match \\
      --param exact-match.ignore_case=true --gate "metric('exact-match').passAtK(3) >= 0.9"

The outputs stored by RUN_ID (a Run, execute-only or not) are graded into a new run of kind
grade linked to it; the target is never called. Samples are re-read from the run's dataset,
which must not have changed since. Infra errors and cancelled tasks of the source stay so
(never graded); target errors are ERROR. Exit codes as for `evalsi run`.
"""

RERUN_EPILOG = """\
examples:
  evalsi rerun RUN_ID
  evalsi rerun latest --format json

Replays a Run (or a grade run) from the spec it stored, as a new run. Items its manifest marks
unpinned (closed API models, unversioned services) are listed on stderr: a rerun of those may
not reproduce the figures.
"""


REPLAY_EPILOG = """\
examples:
  evalsi replay RUN_ID                                  # the same trajectories, graded again
  evalsi replay RUN_ID --evaluators task-success,tool-call-accuracy --format json
  evalsi replay RUN_ID --branch-from-step 3             # calls 1-3 replayed, the rest live
  evalsi replay RUN_ID --server http://127.0.0.1:8080

An agent run records a cassette per task: every model call and tool call with its answer.
replay plays each task from it as a new run: the agent's trajectory is rebuilt with no model or
tool call, then graded by the run's evaluators or by --evaluators (with --param and --gate).
--branch-from-step N replays the first N calls of each task and makes the rest live
(counterfactual evaluation); the new run records its source and branch point (spec.replay).
A task needing a call its cassette lacks is lost to infrastructure (infra_error(cassette)),
never called live. Exit codes as for `evalsi run`.
"""


def register(commands: Any) -> None:
    g = commands.add_parser(
        "grade",
        help="grade the stored outputs of a Run into a new run (no target calls)",
        description="Grade the outputs a Run stored (e.g. with --execute-only) into a new run "
        "linked to it, without calling the target.",
        epilog=GRADE_EPILOG,
    )
    g.add_argument("--from", dest="source", required=True, metavar="RUN_ID", help="the Run")
    g.add_argument(
        "--evaluators",
        required=True,
        help="comma-separated evaluator names or refs (see `evalsi catalog list`)",
    )
    add_param_flag(g)
    g.add_argument(
        "--gate", action="append", default=[], metavar="EXPR", help="a CEL gate, repeatable"
    )
    g.add_argument("--min-completion-rate", type=float, default=0.8, metavar="RATE")
    g.add_argument("--max-error-rate", type=float, default=0.1, metavar="RATE")
    g.add_argument("--name", default="", help="a label for the new run")
    g.add_argument(
        "--judges",
        metavar="FILE",
        help="judges for judge-pack evaluators (YAML mapping; default: the source run's)",
    )
    add_no_cache_flag(g)
    add_failures_flag(g)
    # Grading prints no progress line yet; -q is accepted so a script's flags work on eval,
    # run and grade alike.
    g.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    g.add_argument("--format", choices=FORMATS, default="table", help="output format")
    g.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    g.set_defaults(handler=grade)

    r = commands.add_parser(
        "rerun",
        help="replay a run from its stored spec, as a new run",
        description="Replay a Run or grade run from the spec it stored, as a new run.",
        epilog=RERUN_EPILOG,
    )
    r.add_argument("run_id", metavar="RUN_ID", help="the run to replay (id, prefix or latest)")
    r.add_argument("--format", choices=FORMATS, default="table", help="output format")
    r.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    r.set_defaults(handler=rerun)

    p = commands.add_parser(
        "replay",
        help="replay an agent run from its cassettes (no model or tool calls), as a new run",
        description="Replay an agent run from the cassettes it recorded, as a new run: "
        "re-grade its trajectories, or branch from a step and continue live.",
        epilog=REPLAY_EPILOG,
    )
    p.add_argument("run_id", metavar="RUN_ID", help="the agent run (id, prefix or latest)")
    p.add_argument(
        "--evaluators",
        default=None,
        help="grade with these instead of the run's (comma-separated names or refs); the "
        "run's gates are dropped then, unless --gate gives some",
    )
    add_param_flag(p)
    p.add_argument(
        "--gate", action="append", default=None, metavar="EXPR", help="a CEL gate, repeatable"
    )
    p.add_argument(
        "--branch-from-step",
        type=int,
        default=None,
        metavar="N",
        help="replay each task's first N calls, then call the model and tools live",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    add_server_flag(p)
    add_failures_flag(p)
    p.set_defaults(handler=replay)


def grade(args: argparse.Namespace) -> int:
    from evalsi._api import grade as grade_outputs
    from evalsi.cli._eval import read_judges
    from evalsi.runs import open_store, run_judges, without_cache

    names = evaluator_list(args.evaluators)
    judges = read_judges(args.judges) if args.judges else None
    if args.no_cache:  # the source run's judges when none are given, without the cache
        if judges is None:
            db = open_store(args.store, create=False)
            try:
                judges = run_judges(db.get_run(args.source).spec.get("document") or {})
            finally:
                db.close()
        judges = without_cache(judges)
    result = grade_outputs(
        args.source,
        names,
        store=args.store,
        params=parse_params(args.param),
        gates=args.gate,
        min_completion_rate=args.min_completion_rate,
        max_evaluator_error_rate=args.max_error_rate,
        name=args.name,
        judges=judges,
        registry=code_registry(names, where="--evaluators"),
    )
    return _show(
        result,
        args.format,
        extra={"source_run": _source_of(result)},
        failures=args.show_failures,
    )


def rerun(args: argparse.Namespace) -> int:
    import asyncio

    from evalsi.runs import open_store, rerun_run, unpinned
    from evalsi.wire import remote_harness

    db = open_store(args.store, create=False)
    source = db.get_run(args.run_id)
    for item in unpinned(db, source.id):
        note(f"warning: unpinned: {item} (a rerun may not reproduce the figures)")
    with progress_line(args.quiet, unit="tasks", trouble="infra errors") as progress:
        from evalsi.packs import builtin_registry

        registry = stored_registry(source) or builtin_registry()
        result = asyncio.run(
            rerun_run(
                db, source.id, progress=progress, registry=registry, remote_harness=remote_harness
            )
        )
    return _show(result, args.format, extra={"rerun_of": source.id})


def replay(args: argparse.Namespace) -> int:
    import asyncio

    names = evaluator_list(args.evaluators) if args.evaluators is not None else None
    params = parse_params(args.param)
    branch = args.branch_from_step
    if branch is not None and branch < 0:
        raise UserError(f"--branch-from-step must be 0 or more, got {branch}")
    if params and names is None:  # checked before the store is read
        raise UserError("--param needs --evaluators (the evaluators the replay grades with)")
    server = server_of(args)
    result: Any
    with progress_line(args.quiet, unit="tasks", trouble="infra errors") as progress:
        if server is not None:
            with connect_reader(args, server) as client:
                source = client.run_info(args.run_id)
                source_id = source.id
                _note_dropped_gates(source.spec, names, args.gate)
                result = client.replay_run(
                    source_id,
                    evaluators=names,
                    params=params,
                    gates=args.gate,
                    branch_from_step=branch,
                    progress=progress,
                )
        else:
            from evalsi.packs import builtin_registry
            from evalsi.runs import open_store, replay_run
            from evalsi.wire import remote_harness

            db = open_store(args.store, create=False)
            source = db.get_run(args.run_id)
            source_id = source.id
            _note_dropped_gates(source.spec, names, args.gate)
            registry = (
                (code_registry(names, where="--evaluators") if names is not None else None)
                or stored_registry(source)
                or builtin_registry()
            )
            result = asyncio.run(
                replay_run(
                    db,
                    source.id,
                    registry=registry,
                    evaluators=names,
                    params=params,
                    gates=args.gate,
                    branch_from_step=branch,
                    progress=progress,
                    remote_harness=remote_harness,
                )
            )
    extra: dict[str, Any] = {"replay_of": source_id, "branch_from_step": branch}
    return _show(result, args.format, extra=extra, failures=args.show_failures)


def _note_dropped_gates(spec: dict[str, Any], names: list[str] | None, gates: Any) -> None:
    """Say so when other evaluators drop the recorded gates (they may name the old ones)."""
    recorded = list(spec.get("gates") or [])
    if names is not None and gates is None and recorded:
        note(
            f"note: --evaluators drops the run's {len(recorded)} gate(s); "
            "give --gate to judge the replay"
        )


def _source_of(result: Any) -> str | None:
    if result.store is None:
        return None
    source = result.store.get_run(result.run_id).spec.get("source_run")
    return str(source) if source else None


def _show(result: Any, fmt: str, *, extra: dict[str, Any], failures: int = 5) -> int:
    print_warnings(result_warnings(result))
    if result.status == "failed" and result.stopped_reason:
        note(f"error: run {result.run_id} failed: {result.stopped_reason}")
    if fmt == "json":
        print_json(with_failures({**result.to_dict(), **extra}, result, failures))
        return int(result.exit_code)
    links = " · ".join(f"{k.replace('_', ' ')} {v}" for k, v in extra.items() if v)
    title = f"run {result.run_id} · {result.status} · {result.records} samples x {result.trials}"
    if links:
        title += f" · {links}"
    if result.stopped_reason:
        title += f" · stopped: {result.stopped_reason}"
    print_result(fmt, title, result, failures)
    return int(result.exit_code)
