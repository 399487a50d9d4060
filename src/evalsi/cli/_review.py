"""``evalsi review export | import | list``: people check a run's verdicts against the evidence."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from evalsi.cli._output import print_json, print_table
from evalsi.cli._remote import add_server_flag, connect_reader, server_of

STORE_HELP = "result store (default: .evalsi/evalsi.db)"

REVIEW = """\
Have people check a run's automatic verdicts against the evidence each was judged on:

  evalsi review export RUN -o FILE     one JSONL line per result to review
  (the reviewers fill in each item's "review")
  evalsi review import FILE            store the filled-in reviews
  evalsi review list RUN               the reviews stored for RUN

RUN is a run id, a unique prefix or `latest` (a Score run, a Run or a grade run). Reviews are
stored apart from the automatic scores, which they never change; `evalsi review list` shows
them. Each works on the local store (--store) or on a server's (--server URL).
Guide: docs/guides/review.md.
"""

EXPORT = """\
Write a review file: a header line, then one JSON line per result (sample x trial x
evaluator) holding the evidence (input, output, reference, context; for an agent the
trajectory's tool calls and checks), the automatic verdict, the evaluator, a fingerprint of
all of these, and an empty review to fill in:

  "review": {"approval": null, "verdict": null, "rationale": "", "reviewer": ""}

A reviewer sets approval to "approved" (the automatic verdict is right) or "rejected", says
why in rationale, names themselves in reviewer, and may give their own verdict (any JSON
value). Items left with approval null are skipped on import. Edit nothing else: an item whose
evidence was edited is refused.

Examples:
  evalsi review export latest -o review.jsonl
  evalsi review export latest -o review.jsonl --failing --evaluator exact-match --limit 50
"""

IMPORT = """\
Store the reviews of a filled-in review file. Each filled item's fingerprint is computed
again, from the item itself and from what the store and the dataset hold now: an item edited
in the file, or whose evidence or automatic verdict changed since the export, is refused and
named, with the reason. So is an approval without a rationale or a reviewer. Accepted reviews
are stored in one transaction, beside the automatic scores (never over them); importing a
reviewer's review of the same result again replaces it, and two reviewers' reviews are both
kept.

Exit codes: 0 nothing refused; 1 some item was refused (the others are stored); 2 the file is
not a review file, a line is not JSON (named; nothing is stored), or its run is not here.
"""

LIST = """\
The reviews stored for a run, in result order: the record, trial, evaluator, reviewer,
approval, the reviewer's verdict and rationale.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "review",
        help="export results for people to review; import their approvals",
        description=REVIEW,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="review_command", metavar="SUBCOMMAND", required=True)
    ex = sub.add_parser(
        "export",
        help="write a run's results with their evidence, to review",
        description=EXPORT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ex.add_argument("run_id", metavar="RUN", help="a run id, a unique prefix or `latest`")
    ex.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the new review file (JSONL)"
    )
    ex.add_argument(
        "--evaluator",
        action="append",
        metavar="NAME",
        help="only this evaluator's results (repeat for several; default: all)",
    )
    ex.add_argument(
        "--failing",
        action="store_true",
        help="only results that errored or did not pass (what `runs show` lists as failures)",
    )
    ex.add_argument("--limit", type=int, metavar="N", help="at most N items, the first in order")
    ex.add_argument("--format", choices=("table", "json"), default="table")
    ex.add_argument("--store", metavar="PATH", help=STORE_HELP)
    add_server_flag(ex)
    ex.set_defaults(handler=export)

    im = sub.add_parser(
        "import",
        help="store the reviews of a filled-in review file",
        description=IMPORT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    im.add_argument("file", metavar="FILE", help="a review file written by `review export`")
    im.add_argument("--format", choices=("table", "json"), default="table")
    im.add_argument("--store", metavar="PATH", help=STORE_HELP)
    add_server_flag(im)
    im.set_defaults(handler=import_)

    ls = sub.add_parser(
        "list",
        help="the reviews stored for a run",
        description=LIST,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ls.add_argument("run_id", metavar="RUN", help="a run id, a unique prefix or `latest`")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    ls.add_argument("--store", metavar="PATH", help=STORE_HELP)
    add_server_flag(ls)
    ls.set_defaults(handler=list_)


def export(args: argparse.Namespace) -> int:
    from evalsi.evidence import export_review
    from evalsi.runs import open_store

    server = server_of(args)
    if server is not None:
        with connect_reader(args, server) as client:
            count = client.export_review(
                args.run_id,
                args.output,
                evaluators=args.evaluator,
                only_failing=args.failing,
                limit=args.limit,
            )
        with open(args.output, "rb") as f:
            run_id = orjson.loads(f.readline())["run_id"]
    else:
        store = open_store(args.store, create=False)
        try:
            run_id = store.get_run(args.run_id).id
            count = export_review(
                store,
                run_id,
                args.output,
                evaluators=args.evaluator,
                only_failing=args.failing,
                limit=args.limit,
            )
        finally:
            store.close()
    if args.format == "json":
        print_json({"file": args.output, "run_id": run_id, "items": count})
        return 0
    print(f"Review file written to: {args.output}")
    print(f"Run ID: {run_id}")
    print(f"Items: {count}")
    print(
        'Next: fill in each item\'s "review" (approval, rationale, reviewer), then '
        f"`evalsi review import {args.output}`",
        file=sys.stderr,
    )
    return 0


def import_(args: argparse.Namespace) -> int:
    from evalsi.evidence import import_review
    from evalsi.runs import open_store

    server = server_of(args)
    if server is not None:
        with connect_reader(args, server) as client:
            result = client.import_review(args.file)
    else:
        store = open_store(args.store, create=False)
        try:
            result = import_review(store, args.file)
        finally:
            store.close()
    if args.format == "json":
        print_json(result.to_dict())
        return result.exit_code
    print(f"Run ID: {result.run_id}")
    print(f"Accepted: {len(result.accepted)}")
    print(f"Refused: {len(result.refused)}")
    print(f"Skipped (no approval): {result.skipped}")
    for r in result.refused:
        print(f"REFUSED line {r.line} ({r.item}): {r.reason}")
    return result.exit_code


def list_(args: argparse.Namespace) -> int:
    from evalsi.evidence import list_reviews
    from evalsi.runs import open_store

    server = server_of(args)
    if server is not None:
        with connect_reader(args, server) as client:
            run_id = client.run_info(args.run_id).id
            reviews = client.list_reviews(run_id)
    else:
        store = open_store(args.store, create=False)
        try:
            run_id = store.get_run(args.run_id).id
            reviews = list_reviews(store, run_id)
        finally:
            store.close()
    if args.format == "json":
        print_json({"run_id": run_id, "reviews": [r.to_dict() for r in reviews]})
        return 0
    rows = [
        (
            r.record_id,
            str(r.trial),
            r.evaluator_name,
            r.reviewer,
            r.approval,
            "-" if r.verdict is None else _short(orjson.dumps(r.verdict).decode()),
            _short(r.rationale),
        )
        for r in reviews
    ]
    print_table(
        ("record", "trial", "evaluator", "reviewer", "approval", "verdict", "rationale"),
        rows,
        title=f"reviews of run {run_id}: {len(rows)}",
    )
    return 0


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
