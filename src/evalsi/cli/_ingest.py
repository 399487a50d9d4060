"""``evalsi ingest``: verdicts computed elsewhere stored on a server as a Score run."""

from __future__ import annotations

import argparse
from typing import Any

from evalsi.cli._output import FORMATS, add_failures_flag, print_json, print_result, with_failures
from evalsi.cli._remote import add_server_flag, connect, project_of, server_of
from evalsi.cli._warnings import print_warnings, result_warnings
from evalsi.core import UserError

EPILOG = """\
examples:
  evalsi ingest results.jsonl --server http://127.0.0.1:8080 --key nightly-2026-12-01
  evalsi ingest results.jsonl --server http://127.0.0.1:8080 --tool mcpjam \\
      --evaluator tool-accuracy=mcpjam/tool-accuracy@2 --format json

FILE holds one record per line, as an `evalsi eval` dataset row (id, input, output,
reference, context, usage, metadata), plus "results", the verdicts given on it:
  {"id": "q1", "output": "4", "results": [{"evaluator": "judge", "scores": [{"passed": true}]},
   {"evaluator": "judge", "trial": 1, "outcome": "error", "reason": "timeout"}]}
A result: evaluator (required), outcome (scored, the default; skipped, error, cancelled), trial
(default 0), scores (each {name?, value | passed | label, explanation?}; at least one when
scored), reason. The server stores a Score run marked external, summarised as `evalsi eval`
summarises (n, mean, 95% interval); `evalsi runs show RUN --server URL` shows it again.
--key names the ingest: run again with the same key, it finds the same run and stores nothing
twice (default: a new key, a new run). Calls failing with 429, 5xx or a lost connection are
retried (250 ms, 750 ms, 1.75 s, each +-20%, or the server's Retry-After).
Exit codes: 0 stored; 2 bad input, or an evaluator whose every result is an error; 3 the
server cannot be reached, or an evaluator lost every result to infrastructure.
"""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "ingest",
        help="store results computed elsewhere on a server (a Score run marked external)",
        description="Store records and the verdicts another tool gave them on an evalsi "
        "server, as a Score run with metrics and 95% intervals.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="a JSONL file of records with their results")
    p.add_argument("--key", default=None, help="the client key naming this ingest (idempotent)")
    p.add_argument("--name", default="", help="a label for the run")
    p.add_argument(
        "--evaluator",
        action="append",
        default=[],
        metavar="NAME=REF[@VERSION]",
        help="what gave NAME's verdicts, e.g. judge=acme/judge@2 (repeatable; default: "
        "external/NAME)",
    )
    p.add_argument("--tool", default="", help="the tool that computed the verdicts")
    p.add_argument(
        "--format", choices=FORMATS, default="table", help="output format (default: table)"
    )
    add_failures_flag(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    add_server_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from evalsi.cli._eval import progress_line

    server = server_of(args)
    if server is None:
        raise UserError(
            "evalsi ingest stores results on a server: give --server URL (or set $EVALSI_SERVER)",
            hint="start one with `evalsi serve`",
        )
    evaluators = [_evaluator(text) for text in args.evaluator]
    source = {"tool": args.tool} if args.tool else None
    with progress_line(args.quiet) as progress, connect(server, args) as client:
        result = client.ingest(
            args.file,
            evaluators or None,
            client_key=args.key,
            name=args.name,
            project_id=project_of(args),
            source=source,
            progress=progress,
        )
    print_warnings(result_warnings(result))
    if args.format == "json":
        print_json(with_failures(result.to_dict(), result, args.show_failures))
        return result.exit_code
    title = f"run {result.run_id} · {result.records} records · dataset {result.dataset_version}"
    print_result(args.format, title, result, args.show_failures)
    return result.exit_code


def _evaluator(text: str) -> dict[str, str]:
    """``NAME=NAMESPACE/NAME[@VERSION]`` as an evaluator declaration."""
    name, sep, ref = text.partition("=")
    if not sep or not name.strip() or not ref.strip():
        raise UserError(
            f"--evaluator {text!r}: expected NAME=NAMESPACE/NAME[@VERSION]",
            hint="e.g. --evaluator judge=acme/judge@2",
        )
    ref, _, version = ref.strip().partition("@")
    return {"name": name.strip(), "ref": ref, "version": version}
