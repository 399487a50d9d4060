"""``evalsi compare RUN_A RUN_B``: a paired comparison of two stored runs (it never gates)."""

from __future__ import annotations

import argparse
from typing import Any

from evalsi.cli._output import FORMATS, print_json, print_markdown, print_table
from evalsi.cli._remote import add_server_flag, connect_reader, server_of
from evalsi.core import UserError

DESCRIPTION = """\
Compare run B against run A (the baseline), metric by metric, on the records scored in both
runs (paired by record id and trial): the means, delta = mean(B - A) with a paired bootstrap
interval and p-value, McNemar's test for pass/fail metrics, a verdict, and the smallest
difference the comparison could have detected. RUN_A and RUN_B may be ids, unique prefixes
or `latest`. The baseline is always A: the first run named, or the one given with
--baseline (`evalsi compare B --baseline A` is `evalsi compare A B`, and so is
`evalsi report B --compare A`). Warnings (different dataset versions, missing records,
evaluator params that differ) are part of the output. With --server URL (or $EVALSI_SERVER)
both runs are read from that evalsi server and compared there. Exit code 0 whatever the
verdicts.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "compare",
        help="compare two runs, paired per record",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run (unless --baseline names it)")
    p.add_argument("run_b", metavar="RUN_B", nargs="?", help="the candidate run")
    p.add_argument(
        "--baseline",
        metavar="RUN",
        help="the baseline run; the positional run that is not it is the candidate",
    )
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    p.add_argument(
        "--metric",
        action="append",
        metavar="NAME",
        help="compare only this metric (a metric name, an evaluator name or EVALUATOR/METRIC); "
        "repeat it or separate names with commas (default: every common metric)",
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="significance level: intervals are at 1 - alpha (default: 0.05)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    add_server_flag(p)
    p.set_defaults(handler=compare)


def baseline_and_candidate(run_a: str, run_b: str | None, baseline: str | None) -> tuple[str, str]:
    """Which run is the baseline (A) and which the candidate (B) for ``compare``'s arguments."""
    if baseline is None:
        if run_b is None:
            raise UserError(
                "compare needs two runs: the baseline and the candidate",
                hint="evalsi compare BASELINE CANDIDATE, or evalsi compare CANDIDATE --baseline "
                "BASELINE",
            )
        return run_a, run_b
    if run_b is None:
        return baseline, run_a
    if baseline == run_a:
        return run_a, run_b
    if baseline == run_b:
        return run_b, run_a
    raise UserError(
        f"--baseline {baseline} is neither {run_a} nor {run_b}",
        hint="name two runs (the first is the baseline), or one run and --baseline",
    )


def compare(args: argparse.Namespace) -> int:
    from evalsi.runs import compare_runs, open_store

    run_a, run_b = baseline_and_candidate(args.run_a, args.run_b, args.baseline)
    if not 0.0 < args.alpha < 1.0:
        raise UserError(f"--alpha {args.alpha}: expected a number strictly between 0 and 1")
    metrics = None
    if args.metric:
        metrics = [name.strip() for item in args.metric for name in item.split(",") if name.strip()]
        if not metrics:
            raise UserError("--metric is empty", hint="name a metric, e.g. --metric exact-match")
    server = server_of(args)
    if server is not None:
        with connect_reader(args, server) as client:
            result = client.compare_runs(
                run_a, run_b, level=1.0 - args.alpha, seed=args.seed, metrics=metrics
            )
    else:
        store = open_store(args.store, create=False)
        try:
            result = compare_runs(
                store,
                run_a,
                run_b,
                metrics=metrics,
                seed=args.seed,
                level=1.0 - args.alpha,
            )
        finally:
            store.close()
    if args.format == "json":
        print_json({**result.to_dict(), "baseline": result.run_a, "candidate": result.run_b})
        return 0
    markdown = args.format == "md"
    printer = print_markdown if markdown else print_table
    title = result.title()
    printer(
        result.columns(),
        result.rows(),
        title=f"**{title}**" if markdown else title,
    )
    bullet = "- " if markdown else ""
    extra = [f"{bullet}baseline: A = {result.run_a}; candidate: B = {result.run_b}; Δ = B − A"]
    extra += [f"{bullet}warning: {w}" for w in result.warnings]
    extra += [f"{bullet}{n}" for n in result.notes()]
    print()
    print("\n".join(extra))
    return 0
