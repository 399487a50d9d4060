"""``evalsi report``: a stored run as one self-contained HTML file or as Markdown."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from evalsi.cli._output import note
from evalsi.core import UserError

if TYPE_CHECKING:
    from evalsi.reports import ReportFormat

EPILOG = """\
examples:
  evalsi report latest -o report.html
  evalsi report 20261129-174501-3f9a2c --by topic --compare 20261128-090000-1a2b3c -o report.html
      (the --compare run is the baseline A, the report's run is B: Δ = B − A)
  evalsi report latest --format md -o - >> "$GITHUB_STEP_SUMMARY"
  evalsi report latest --format md --summary --compare BASELINE -o comment.md
      (metrics, gates and the comparison only: a pull-request comment; docs/guides/ci.md)

The HTML file has no scripts and loads nothing from the network: charts are inline SVG
(install evalsi[reports] for them). --by re-reads the run's dataset to find each record's
metadata; it must still be the version the run graded.
Exit codes: 0 written, 2 bad input (unknown run, unwritable path).
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "report",
        help="write a run's report: one self-contained HTML file, or Markdown",
        description="Write a report on one stored run: metrics with 95% intervals, charts, "
        "distributions, slices, failures, gates, comparison, manifest. RUN may be a unique "
        "id prefix or `latest`.",
        epilog=EPILOG,
    )
    p.add_argument("run_id", metavar="RUN")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="where to write the report (`-` for stdout)",
    )
    p.add_argument(
        "--format",
        choices=("html", "md"),
        help="html or md (default: md when FILE ends in .md, else html)",
    )
    p.add_argument(
        "--compare",
        metavar="BASELINE",
        help="compare this run (B) with the baseline run A: Δ = B − A, the same sign and value "
        "as `evalsi compare BASELINE RUN`",
    )
    p.add_argument("--baseline", metavar="BASELINE", help="the same as --compare BASELINE")
    p.add_argument("--by", metavar="KEY", help="slice every metric by this metadata key")
    p.add_argument(
        "--summary",
        action="store_true",
        help="Markdown only: the run, metrics, gates and comparison, without failures, "
        "distributions or manifest (short enough for a pull-request comment)",
    )
    p.add_argument(
        "--failures",
        "--show-failures",  # the name eval, run and grade use for the same thing
        dest="failures",
        type=int,
        default=20,
        metavar="N",
        help="list up to N records that failed or errored (default: 20; 0 for none)",
    )
    p.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    p.set_defaults(handler=report)


def report(args: argparse.Namespace) -> int:
    from evalsi.reports import check_output_path, render_report, write_report

    output: str = args.output
    fmt: ReportFormat = args.format or (
        "md" if output.lower().endswith((".md", ".markdown")) else "html"
    )
    if output != "-":
        check_output_path(output)  # before the work, not after it
    baseline = args.baseline or args.compare
    if args.baseline and args.compare and args.baseline != args.compare:
        raise UserError(
            f"--compare {args.compare} and --baseline {args.baseline} name two baselines",
            hint="give one of them: the report's run is compared with that baseline",
        )
    text = render_report(
        args.store,
        args.run_id,
        fmt=fmt,
        by=args.by,
        compare=baseline,
        failures=args.failures,
        summary=args.summary,
    )
    if output == "-":
        sys.stdout.write(text)
        return 0
    path = write_report(text, output)
    note(f"wrote {path} ({len(text.encode()) / 1024:.0f} kB, {fmt})")
    return 0
