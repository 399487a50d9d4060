"""``evalsi runs list|show``: what the store holds."""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
from typing import TYPE_CHECKING, Any

from evalsi.cli._output import (
    FORMATS,
    add_by_flag,
    note,
    print_categories,
    print_failures,
    print_json,
    print_summary,
    print_table,
)
from evalsi.cli._remote import add_server_flag, connect_reader, server_of
from evalsi.cli._warnings import warning_lines
from evalsi.core import UserError

MAX_TASKS_PAGE = 1000
"""The server's largest ListRunTasks page."""

if TYPE_CHECKING:
    from evalsi.core import RunInfo


def register(commands: Any) -> None:
    p = commands.add_parser("runs", help="list and inspect stored runs")
    sub = p.add_subparsers(dest="runs_command", metavar="SUBCOMMAND", required=True)
    ls = sub.add_parser("list", help="the most recent runs")
    ls.add_argument("--limit", type=int, default=20, help="how many (default: 20)")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    ls.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    add_server_flag(ls)
    ls.set_defaults(handler=list_runs)
    show = sub.add_parser(
        "show",
        help="one run: metrics, dataset, evaluators, manifest",
        description="Show one run. RUN_ID may be a unique prefix or `latest`.",
    )
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--format", choices=FORMATS, default="table")
    show.add_argument(
        "--failures",
        type=int,
        default=5,
        metavar="N",
        help="show up to N failed/errored results and why (default: 5; 0 shows none)",
    )
    show.add_argument(
        "--tasks",
        action="store_true",
        help="list the run's tasks (sample x trial): output, verdicts and, for an agent, the "
        "trajectory's steps",
    )
    show.add_argument(
        "--limit", type=int, default=20, metavar="N", help="with --tasks: at most N (default: 20)"
    )
    add_by_flag(show, None)
    show.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    add_server_flag(show)
    show.set_defaults(handler=show_run)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def list_runs(args: argparse.Namespace) -> int:
    from evalsi.runs import open_store

    server = server_of(args)
    runs: list[RunInfo]
    if server is not None:
        with connect_reader(args, server) as client:
            runs = client.list_runs(limit=max(args.limit, 1))
    else:
        try:
            runs = open_store(args.store, create=False).list_runs(limit=max(args.limit, 1))
        except UserError as e:
            if args.store is not None:
                raise
            note(f"no runs yet ({e.message})")
            runs = []
    if args.format == "json":
        print_json(
            {
                "runs": [
                    {
                        "run_id": r.id,
                        "kind": r.kind,
                        "status": r.status,
                        "name": r.name,
                        "records": r.records,
                        "created_at": r.created_at,
                        "finished_at": r.finished_at,
                        "evaluators": [e.get("name") for e in r.evaluators],
                    }
                    for r in runs
                ]
            }
        )
        return 0
    rows = [
        (
            r.id,
            r.kind,
            r.status,
            str(r.records),
            _when(r.created_at),
            ",".join(str(e.get("name")) for e in r.evaluators),
            r.name,
        )
        for r in runs
    ]
    print_table(("run", "kind", "status", "records", "created (UTC)", "evaluators", "name"), rows)
    return 0


def show_run(args: argparse.Namespace) -> int:
    from evalsi.runs import (
        failing_records,
        first_failures,
        isolation_from_dicts,
        iter_tasks,
        open_store,
        run_categories,
        summaries_from_dicts,
    )

    server = server_of(args)
    run: RunInfo
    tasks: list[dict[str, Any]] = []
    categories: list[Any] = []
    if server is not None:
        with connect_reader(args, server) as client:
            run = client.run_info(args.run_id)
            if args.by is not None:
                categories = client.run_categories(run.id, args.by)
                if not categories:
                    note(f"no sample of run {run.id} has metadata.{args.by}: no categories")
            failing = []
            if args.failures > 0:  # pages are read only until the failures are found
                results = (r for page in client.list_run_results(run.id) for r in page)
                failing = first_failures(results, args.failures)
            if args.tasks and args.limit > 0:  # pages are read only as far as the limit
                size = min(args.limit, MAX_TASKS_PAGE)
                pages = client.list_run_tasks(run.id, page_size=size)
                try:
                    found = (t for page in pages for t in page)
                    tasks = list(itertools.islice(found, args.limit))
                finally:
                    close = getattr(pages, "close", None)  # the pages' stream, let go at once
                    if close is not None:
                        close()
    else:
        store = open_store(args.store, create=False)
        run = store.get_run(args.run_id)
        failing = failing_records(store, run.id, args.failures)
        if args.tasks:
            tasks = list(iter_tasks(store, run.id, max(args.limit, 0)))
        if args.by is not None:
            from evalsi.cli._evaluators import stored_registry

            # Code evaluators (FILE.py:NAME) are loaded again to bind; built-ins need nothing.
            coded = any(isinstance(e, dict) and "source" in e for e in run.evaluators)
            registry = stored_registry(run) if coded else None
            categories = run_categories(store, run.id, args.by, registry=registry)
            if not categories:
                note(f"no sample of run {run.id} has metadata.{args.by}: no categories")
    failures = [f.to_dict() for f in failing]
    summary = run.summary or {}
    metrics = summaries_from_dicts(summary.get("metrics", []))
    if args.format == "json":
        print_json(
            {
                "run_id": run.id,
                "kind": run.kind,
                "status": run.status,
                "name": run.name,
                "records": run.records,
                "created_at": run.created_at,
                "finished_at": run.finished_at,
                "created_by": run.created_by,  # provider/subject of who started it ("": local)
                "error": run.error,
                "metrics": summary.get("metrics", []),
                "gates": summary.get("gates", []),
                "isolation": summary.get("isolation", []),
                "dataset": summary.get("dataset"),
                "bad_records": summary.get("bad_records", 0),
                "warnings": summary.get("warnings", []),
                "infra_errors": summary.get("infra_errors", 0),
                "infra_error_causes": summary.get("infra_error_causes", []),
                "target_error_causes": summary.get("target_error_causes", []),
                "spec": run.spec,
                "manifest": run.manifest,
                "failures": failures,
                **({"tasks": tasks} if args.tasks else {}),
                **({"categories": [c.to_dict() for c in categories]} if categories else {}),
            }
        )
        return 0
    dataset = summary.get("dataset") or {}
    source = dataset.get("source", run.spec.get("data", "?"))
    title = (
        f"run {run.id} · {run.kind} · {run.status} · {run.records} records · "
        f"dataset {source} ({dataset.get('version', '-')})"
    )
    isolation = isolation_from_dicts(summary.get("isolation"))
    print_summary(args.format, title, metrics, summary.get("gates") or [], isolation)
    if run.error:
        print(f"\nstopped: {run.error}")
    causes = [
        *(("infra error", c) for c in summary.get("infra_error_causes") or []),
        *(("target error", c) for c in summary.get("target_error_causes") or []),
    ]
    if causes:
        print()
        for what, c in causes:
            print(f"{what} {c.get('kind')} x{c.get('count')}: {c.get('example')}")
    lines = warning_lines(summary.get("warnings") or [])
    if lines:
        print("\n" + "\n".join(lines))
    print_failures(args.format, failing, args.failures, "--failures")
    print_categories(args.format, categories)
    if args.tasks:
        print()
        print_table(("sample", "trial", "status", "steps", "stop", "verdicts"), _task_rows(tasks))
    return 0


def _task_rows(tasks: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for t in tasks:
        trajectory = t.get("trajectory") or {}
        verdicts = ", ".join(
            f"{v['evaluator']}={_first(v['scores']) if v['outcome'] == 'scored' else v['outcome']}"
            for v in t["scores"]
        )
        rows.append(
            (
                t["sample_id"],
                str(t["trial"]),
                t.get("status", "-"),
                str(len(trajectory.get("steps", []))) if trajectory else "-",
                trajectory.get("stop_reason") or "-",
                verdicts,
            )
        )
    return rows


def _first(scores: dict[str, Any]) -> str:
    value = next(iter(scores.values()), None)
    return f"{value:.3g}" if isinstance(value, float) else str(value)
