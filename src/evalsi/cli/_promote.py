"""``evalsi promote`` (failing tasks or flagged traces -> dataset rows) and ``evalsi shadow``
(promoted inputs replayed against a candidate, compared with the recorded behaviour)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.cli._evaluators import spec_registry
from evalsi.cli._output import FORMATS, note, print_json, print_table
from evalsi.cli._remote import (
    add_server_flag,
    connect,
    project_of,
    refuse_local_flags,
    server_of,
)
from evalsi.cli._traces import parse_when
from evalsi.core import UserError

if TYPE_CHECKING:
    from evalsi.runs import PromoteStats, RunResult, RunSpec, ShadowResult
    from evalsi.store import SqlStore

PROMOTE_DESCRIPTION = """\
Turn what went wrong into regression cases: each failing task of a run (--run RUN), or each
flagged production trace (--traces: failing online scores with --failing, negative feedback
with --feedback negative), becomes a dataset row: the sample's input, reference and metadata,
the recorded behaviour (output, trajectory, usage) and metadata.promoted (where it came from
and why). Row ids: the sample id (`<sample>#<trial>` for a later trial), or the trace id.
Locally the rows go to -o FILE (JSONL); with --server URL, --dataset NAME appends them to a
dataset of the project (a new version; rows whose id is already there are skipped).
Exit code 0 (also when nothing was promoted), 2 bad input.
"""

SHADOW_DESCRIPTION = """\
Replay promoted rows against a candidate: grade the rows' recorded behaviour with the
candidate spec's evaluators (a Score run), run the candidate spec on the rows' inputs (its
dataset replaced by the rows, one trial), and compare the two runs paired by row id: per
metric the delta with its paired bootstrap interval, McNemar's test for pass/fail.
The candidate never sees the recorded answers: it reads the rows without their output,
trajectory and usage. With --server URL both runs go to the server's project: the inputs are
uploaded as the dataset <rows>.inputs, the candidate runs there, the recorded behaviour is
graded by an Evaluate call; --data may then also name a dataset of the project (NAME or
NAME@sha256:...), e.g. one `evalsi promote --server --dataset NAME` filled.
Exit code 0 no significant regression, 1 a metric significantly worse (or the candidate
failed on a row), 2 bad input, 3 the candidate run lost tasks to infrastructure.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "promote",
        help="failing tasks or flagged traces -> dataset rows",
        description=PROMOTE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", metavar="RUN", help="promote this run's tasks")
    source.add_argument("--traces", action="store_true", help="promote the project's traces")
    p.add_argument(
        "--failing",
        action="store_true",
        help="only failing tasks / traces whose online scores failed (default: every one, "
        "unless --feedback selects)",
    )
    p.add_argument(
        "--evaluator",
        action="append",
        metavar="NAME",
        help="only these evaluators' verdicts decide failing (repeat or comma-separate)",
    )
    p.add_argument(
        "--trials",
        choices=("all", "first"),
        default="all",
        help="--run: every (failing) trial, or the first of each sample (default: all)",
    )
    p.add_argument(
        "--feedback",
        choices=("negative",),
        help="--traces: traces that got negative feedback (with --failing: either)",
    )
    p.add_argument("--since", metavar="WHEN", help="--traces: started within (1h, 2d) or since")
    p.add_argument("--until", metavar="WHEN", help="--traces: started before")
    p.add_argument("--service", metavar="NAME", help="--traces: of this service")
    p.add_argument("--limit", type=int, default=100, help="rows at most (default: 100)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the rows here (JSONL)")
    p.add_argument("--dataset", metavar="NAME", help="with --server: append to this dataset")
    p.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_server_flag(p)
    p.set_defaults(handler=promote)

    s = commands.add_parser(
        "shadow",
        help="replay promoted rows against a candidate and compare",
        description=SHADOW_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("-f", "--file", required=True, metavar="SPEC", help="the candidate EvalRun")
    s.add_argument("--data", required=True, metavar="ROWS", help="promoted rows (JSONL)")
    s.add_argument("--evaluators", metavar="A,B", help="compare on these (default: the spec's)")
    s.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    s.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    s.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    s.add_argument("--format", choices=FORMATS, default="table")
    add_server_flag(s)
    s.set_defaults(handler=shadow)


def _names(values: list[str] | None) -> list[str]:
    return [n.strip() for v in values or () for n in v.split(",") if n.strip()]


# -- promote ------------------------------------------------------------------------------------


def promote(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UserError(f"--limit: expected 1 or more, got {args.limit}")
    if args.run is not None and (args.feedback or args.since or args.until or args.service):
        raise UserError("--feedback, --since, --until and --service select traces: use --traces")
    server = server_of(args)
    if server is not None:
        return _promote_remote(args, server)
    if args.dataset:
        raise UserError(
            "--dataset: a server's dataset; locally write the rows with -o FILE",
            hint="add --server URL, or use -o rows.jsonl",
        )
    if not args.output:
        raise UserError("promote needs -o FILE (or --server URL --dataset NAME)")
    from evalsi.runs import PromoteStats

    stats = PromoteStats()
    with _rows(args, stats) as rows, _writer(args.output) as write:
        for row in rows:
            write(row)
    _tell(args, stats.to_dict() | {"output": args.output})
    return 0


@contextlib.contextmanager
def _rows(args: argparse.Namespace, stats: PromoteStats) -> Iterator[Iterator[dict[str, Any]]]:
    from evalsi.runs import open_store, promote_run

    evaluators = _names(args.evaluator) or None
    sql = open_store(args.store, create=False)
    try:
        if args.run is not None:
            yield promote_run(
                sql,
                args.run,
                failing_only=args.failing,
                evaluators=evaluators,
                trials=args.trials,
                limit=args.limit,
                stats=stats,
            )
            return
        from evalsi.policies import TraceSelector, promote_traces
        from evalsi.store import DEFAULT_PROJECT, TraceStore
        from evalsi.traces import normalize, record_row

        traces = TraceStore(sql, views=normalize)

        def record_of(project: str, trace_id: str) -> dict[str, Any] | None:
            trace = traces.get_trace(project, trace_id)
            return None if trace is None else record_row(trace)

        try:
            yield promote_traces(
                sql,
                traces,
                project_of(args) or DEFAULT_PROJECT,
                _selector(args, TraceSelector, evaluators),
                record_of=record_of,
                stats=stats,
            )
        finally:
            traces.close()
    finally:
        sql.close()


def _selector(args: argparse.Namespace, cls: Any, evaluators: list[str] | None) -> Any:
    now = time.time()
    since, until = parse_when(args.since, "--since", now), parse_when(args.until, "--until", now)
    return cls(
        failing=args.failing,
        negative_feedback=args.feedback == "negative",
        evaluators=tuple(evaluators or ()),
        since_ns=None if since is None else round(since * 1e9),
        until_ns=None if until is None else round(until * 1e9),
        service=args.service,
        limit=args.limit,
    )


@contextlib.contextmanager
def _writer(output: str) -> Iterator[Any]:
    """Rows to ``output`` ("-": stdout) as JSONL; a file is written whole or not at all."""
    if output == "-":
        yield lambda row: sys.stdout.buffer.write(orjson.dumps(row) + b"\n")
        sys.stdout.flush()
        return
    path = Path(output)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("wb") as f:
            yield lambda row: f.write(orjson.dumps(row) + b"\n")
        os.replace(partial, path)
    except OSError as e:
        raise UserError(f"-o {output}: cannot write: {e.strerror or e}") from e
    finally:
        partial.unlink(missing_ok=True)


def _tell(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    if args.format == "json":
        print_json(summary)
        return
    print_table(("what", "count"), [(k, str(v)) for k, v in summary.items()])


def _promote_remote(args: argparse.Namespace, server: str) -> int:
    if args.output:
        raise UserError(
            f"-o cannot be combined with --server {server}: the rows go to a server dataset",
            hint="name it with --dataset NAME",
        )
    if args.store:
        raise UserError(f"--store cannot be combined with --server {server}")
    if not args.dataset:
        raise UserError("--server needs --dataset NAME: the dataset the rows are appended to")
    now = time.time()
    since, until = parse_when(args.since, "--since", now), parse_when(args.until, "--until", now)
    with connect(server, args) as client:
        summary = client.promote(
            args.dataset,
            run_id=args.run or "",
            traces=bool(args.traces),
            failing_only=args.failing,
            negative_feedback=args.feedback == "negative",
            evaluators=_names(args.evaluator),
            first_trial_only=args.trials == "first",
            since=since,
            until=until,
            service=args.service or "",
            limit=args.limit,
        )
    _tell(args, summary | {"project": project_of(args) or "default"})
    return 0


# -- shadow -------------------------------------------------------------------------------------


def shadow(args: argparse.Namespace) -> int:
    from evalsi._api import run_async
    from evalsi.packs import builtin_registry
    from evalsi.runs import load_run_spec, open_store, shadow_async

    if not 0.0 < args.alpha < 1.0:
        raise UserError(f"--alpha {args.alpha}: expected a number strictly between 0 and 1")
    server = server_of(args)
    if server is not None:
        return _shadow_remote(args, server)
    data = Path(args.data)
    if not data.is_file():
        raise UserError(f"--data {args.data}: no such file")
    spec = load_run_spec(args.file)
    registry = spec_registry(args.file) or builtin_registry()

    async def execute(candidate: RunSpec, store: SqlStore) -> RunResult:
        return await run_async(candidate, store=store, registry=registry)

    db = open_store(args.store)
    try:
        result = asyncio.run(
            shadow_async(
                spec,
                str(data.resolve()),
                execute=execute,
                registry=registry,
                store=db,
                evaluators=_names([args.evaluators]) if args.evaluators else None,
                level=1.0 - args.alpha,
                seed=args.seed,
            )
        )
    finally:
        db.close()
    return _show(args, result)


def _shadow_remote(args: argparse.Namespace, server: str) -> int:
    refuse_local_flags(args, server, store="both runs go to the server's store")
    evaluators = _names([args.evaluators]) if args.evaluators else None
    with connect(server, args) as client, tempfile.TemporaryDirectory() as folder:
        data = args.data if Path(args.data).is_file() else _download(client, args.data, folder)
        result = client.shadow(
            args.file,
            str(Path(data).resolve()),
            evaluators=evaluators,
            level=1.0 - args.alpha,
            seed=args.seed,
        )
    return _show(args, result)


def _download(client: Any, given: str, folder: str) -> str:
    """The project's dataset ``given`` (``NAME`` or ``NAME@VERSION``) as a local JSONL file."""
    from evalsi.core import NotFoundError

    name, _, version = given.partition("@")
    path = Path(folder) / f"{name}.jsonl"
    token = ""
    try:
        with path.open("wb") as f:
            while True:
                page = client.get_dataset(name, version=version, page_size=1000, page_token=token)
                f.writelines(orjson.dumps(row) + b"\n" for row in page.rows)
                version, token = page.dataset.version, page.next_page_token
                if not token:
                    return str(path)
    except (NotFoundError, UserError) as e:
        raise UserError(
            f"--data {given}: neither a file here nor a dataset of the project ({e})",
            hint="promote rows into it with evalsi promote --server URL --dataset NAME",
        ) from e


def _show(args: argparse.Namespace, result: ShadowResult) -> int:
    if args.format == "json":
        print_json(result.to_dict())
        return result.exit_code
    comparison = result.comparison
    title = f"shadow of {result.rows} rows: recorded (A) vs candidate (B)"
    print_table(comparison.columns(), comparison.rows(), title=title)
    print()
    print(f"recorded: A = {result.recorded_run}; candidate: B = {result.candidate_run}")
    for w in comparison.warnings:
        print(f"warning: {w}")
    for n in comparison.notes():
        print(n)
    for m in result.regressions:
        note(f"regression: {m.evaluator}/{m.metric} delta {m.delta:+.3f}")
    if result.target_errors:
        note(f"regression: the candidate failed on {result.target_errors} row(s)")
    return result.exit_code
