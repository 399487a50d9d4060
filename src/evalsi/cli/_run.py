"""``evalsi run -f run.yaml``: the Run way in — call a target on a dataset, then grade."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from evalsi.cli._eval import (
    add_evidence_flags,
    add_no_cache_flag,
    check_bundle_dir,
    grading_server,
    progress_line,
    write_bundle_after,
)
from evalsi.cli._evaluators import spec_registry
from evalsi.cli._output import (
    FORMATS,
    add_by_flag,
    add_failures_flag,
    note,
    print_categories,
    print_json,
    print_result,
    with_failures,
)
from evalsi.cli._remote import add_server_flag, connect
from evalsi.cli._warnings import print_warnings, result_warnings
from evalsi.core import UserError

if TYPE_CHECKING:
    from evalsi.runs import RunResult

DEFAULT_BY = "category"  # evalsi.runs.DEFAULT_CATEGORY_KEY, without importing runs at start

EPILOG = """\
examples:
  evalsi run -f examples/run-python.yaml
  evalsi run -f run.yaml --dry-run            # the plan: tasks, projected tokens and cost
  evalsi run -f run.yaml --format json
  evalsi run -f run.yaml --resume RUN_ID      # finish an interrupted or stopped run
  evalsi run -f run.yaml --execute-only       # store outputs only; then `evalsi grade --from`
  evalsi run -f examples/agent/bank/run-agent.yaml   # an agent: target.agent + environment

A spec is YAML with apiVersion: evals.si/v1alpha1 and kind: EvalRun; its JSON Schema is
src/evalsi/specs/schemas/evalrun.schema.json. Every sample x trial is a task: the target is
called, its output graded by the evaluators, both stored. Calls that fail for infrastructure
reasons (429, 5xx, timeouts) are retried and, if they still fail, counted as infra errors,
never as failures. An agent target (target.agent) runs the built-in tool loop in
spec.environment's tools; `evalsi runs show RUN --tasks` lists each task's steps
(docs/guides/agents.md).
With --server URL (or $EVALSI_SERVER) the spec is checked here, a local dataset file is
uploaded, and the run executes on that evalsi server (progress from the server on stderr);
--resume RUN_ID resumes a server run; the output is the same.
When samples carry metadata.category (or the key --by names), a table per category follows
the run's: n, mean and interval per metric, and pass@k / pass^k with trials.
Exit codes: 0 done and every gate passed; 1 a gate failed; 2 bad spec or an inconclusive
gate; 3 the run could not finish (stopped by a budget, interrupted, server unreachable).
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "run",
        help="call a model or agent on a dataset, then grade (Run)",
        description="Run an EvalRun spec: call the target for every sample x trial, grade the "
        "outputs, gate on the statistics.",
        epilog=EPILOG,
    )
    p.add_argument("-f", "--file", required=True, metavar="SPEC", help="the EvalRun YAML file")
    p.add_argument("--resume", metavar="RUN_ID", help="complete this earlier run of the same spec")
    p.add_argument("--dry-run", action="store_true", help="print the plan; call nothing")
    p.add_argument(
        "--execute-only",
        action="store_true",
        help="call the target and store outputs, grade nothing (see `evalsi grade --from`)",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send a span per step of each task to this OTLP/HTTP endpoint (a collector or an "
        "evalsi serve URL); overrides spec.telemetry.otlp.endpoint. OTEL_EXPORTER_OTLP_ENDPOINT "
        "is never used",
    )
    add_no_cache_flag(p)
    add_failures_flag(p)
    add_by_flag(p, DEFAULT_BY)
    add_evidence_flags(p)
    add_server_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from evalsi._api import run as run_spec

    server = grading_server(args, execute_only="runs created over the API are always graded")
    if server is not None and args.otlp_endpoint:
        raise UserError(
            "--otlp-endpoint: not with --server; the server exports a run's spans",
            hint="set spec.telemetry.otlp.endpoint in the spec instead",
        )
    if args.bundle and (args.dry_run or args.execute_only):
        raise UserError("--bundle seals a graded run: not with --dry-run or --execute-only")
    check_bundle_dir(args.bundle)
    quiet = args.quiet or args.dry_run
    with progress_line(quiet, unit="tasks", trouble="infra errors") as progress:
        if server is not None:
            result = _run_remote(server, args, progress)
        else:
            result = run_spec(
                _local_spec(args),
                store=args.store,
                resume=args.resume,
                dry_run=args.dry_run,
                progress=progress,
                execute_only=args.execute_only,
                registry=spec_registry(args.file),  # FILE.py:NAME refs, loaded here
            )
    graded = not _execute_only(result)
    if result.plan is None:
        _tell_outcome(result)
        write_bundle_after(args, server, result.run_id)
    categories: list[Any] = []
    if graded and result.plan is None:
        if server is not None:
            with connect(server, args) as client:
                categories = client.run_categories(result.run_id, args.by)
        else:
            categories = result.categories(args.by)
    if args.by != DEFAULT_BY and graded and result.plan is None and not categories:
        note(f"no sample has metadata.{args.by}: no categories")
    if args.format == "json":
        data = result.to_dict()
        if result.plan is None:
            data["graded"] = graded
            if graded:
                with_failures(data, result, args.show_failures)
        if categories:
            data["categories"] = [c.to_dict() for c in categories]
        print_json(data)
        return result.exit_code
    if result.plan is not None:
        print(result.table())
        return result.exit_code
    title = f"run {result.run_id} · {result.status} · {result.records} samples x {result.trials}"
    if result.stopped_reason:
        title += f" · stopped: {result.stopped_reason}"
    if not graded:
        tasks = ", ".join(f"{k} {v}" for k, v in sorted(result.tasks.items()))
        print(f"{title} · not graded (evalsi grade --from {result.run_id})\ntasks: {tasks}")
        return result.exit_code
    print_result(args.format, title, result, args.show_failures)
    print_categories(args.format, categories)
    return result.exit_code


def _tell_outcome(result: RunResult) -> None:
    """On stderr: what the run noticed (bad rows, repeated ids, calls that failed) and, when
    it scored nothing, why, whatever ``--format`` prints on stdout."""
    print_warnings(result_warnings(result))
    if result.status == "failed" and result.stopped_reason:
        note(
            f"error: run {result.run_id} failed: {result.stopped_reason}\n"
            "  hint: fix the target (its URL, key or model) or the data, then start a new run"
        )
    elif result.status == "incomplete" and result.stopped_reason:
        note(
            f"error: run {result.run_id} is incomplete: {result.stopped_reason}\n"
            f"  hint: once the target is reachable, finish it with --resume {result.run_id}"
        )


def _run_remote(server: str, args: argparse.Namespace, progress: Any) -> RunResult:
    """The run on the server: created from the spec (or resumed), followed to its end."""
    from evalsi.runs import load_run_spec

    with connect(server, args) as client:
        if args.resume:
            load_run_spec(args.file)  # the same spec errors as an embedded resume
            return client.resume_run(args.resume, wait=True, progress=progress)
        return client.create_run(_local_spec(args), dry_run=args.dry_run, progress=progress)


def _local_spec(args: argparse.Namespace) -> Any:
    """The spec file, or under ``--no-cache`` the spec with every judge's cache off (the spec
    hash leaves the cache out, so such a run still resumes a cached one and vice versa), with
    ``--declaration``'s system declared, with ``--otlp-endpoint``'s telemetry."""
    if not args.no_cache and not args.otlp_endpoint and not args.declaration:
        return args.file
    import dataclasses

    from evalsi.runs import load_run_spec, without_cache
    from evalsi.specs import load_declaration, with_declaration

    spec = load_run_spec(args.file)
    if args.declaration:
        spec = with_declaration(spec, load_declaration(args.declaration))
    if args.no_cache:
        spec = dataclasses.replace(spec, judges=without_cache(spec.judges))
    if args.otlp_endpoint:
        spec = dataclasses.replace(spec, telemetry=_telemetry(spec, args.otlp_endpoint))
    return spec


def _telemetry(spec: Any, url: str) -> Any:
    """``spec.telemetry`` with ``--otlp-endpoint``'s URL (its headers and protocol kept)."""
    import dataclasses
    from urllib.parse import urlsplit

    from evalsi.specs import TelemetrySpec

    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise UserError(
            f"--otlp-endpoint: expected an http:// or https:// URL such as "
            f"http://127.0.0.1:4318, got {url!r}"
        )
    if spec.telemetry is None:
        return TelemetrySpec(endpoint=url)
    return dataclasses.replace(spec.telemetry, endpoint=url)


def _execute_only(result: Any) -> bool:
    """Whether the run stored outputs only (asked for, or an execute-only run resumed)."""
    if result.store is None or not result.run_id:
        return False
    return result.store.get_run(result.run_id).spec.get("graded", True) is False
