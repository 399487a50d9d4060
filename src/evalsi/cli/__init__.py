"""The ``evalsi`` command: thin over the library. ``main`` maps errors to exit codes.

Exit codes: 0 done and every gate passed; 1 a gate failed; 2 cannot judge (bad
input, bad spec); 3 the run could not finish (infrastructure, interruption, internal error).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from evalsi.cli._output import fail
from evalsi.cli._parser import EvalsiParser
from evalsi.core import VERSION, EvalsiError, missing_extra

COMMANDS = {
    "eval": "_eval",
    "ingest": "_ingest",
    "run": "_run",
    "grade": "_grade",
    "rerun": "_grade",
    "replay": "_grade",
    "benchmark": "_benchmark",
    "runs": "_runs",
    "compare": "_compare",
    "promote": "_promote",
    "shadow": "_promote",
    "catalog": "_catalog",
    "report": "_report",
    "export": "_export",
    "calibrate": "_calibrate",
    "serve": "_serve",
    "worker": "_worker",
    "cluster": "_worker",
    "mcp": "_mcp",
    "plugin": "_plugin",
    "sandbox": "_sandbox",
    "traces": "_traces",
    "watch": "_watch",
    "bundle": "_evidence",
    "gate": "_evidence",
    "rescore": "_evidence",
    "review": "_review",
    "login": "_login",
    "logout": "_login",
    "whoami": "_login",
    "auth": "_auth",
}
"""Each command -> the module that registers and runs it. Only the dispatched command's module
is imported (its own imports can take a second: judges, statistics, the store, the client);
help and unknown commands import them all, in the order of this table."""

DESCRIPTION = """\
evalsi grades LLM apps, RAG systems, agents and ML models with statistics you can trust.

Score records that already hold outputs:
  evalsi eval --data qa.jsonl --evaluators exact-match,contains
Call a model or agent on a dataset, then grade (an EvalRun spec):
  evalsi run -f run.yaml [--dry-run] [--resume RUN_ID] [--execute-only]
Store verdicts computed elsewhere on a server (a Score run marked external):
  evalsi ingest results.jsonl --server http://127.0.0.1:8080 [--key KEY]
Grade a Run's stored outputs (no target calls), or replay a run:
  evalsi grade --from RUN_ID --evaluators exact-match
  evalsi rerun RUN_ID
  evalsi replay RUN_ID [--evaluators a,b] [--branch-from-step N]   # an agent run's cassettes
Import a benchmark's tasks (SWE-bench, Terminal-Bench, BFCL, Inspect, tau2) as a dataset + spec:
  evalsi benchmark import swebench INSTANCES.jsonl --repo owner/name=PATH -o DIR
Look at what ran:
  evalsi runs list
  evalsi runs show latest
Compare two runs, paired per record:
  evalsi compare RUN_A RUN_B
Turn failing tasks or flagged traces into dataset rows, and replay them against a candidate:
  evalsi promote --run RUN --failing -o rows.jsonl
  evalsi shadow -f candidate.yaml --data rows.jsonl
Send a stored run to MLflow, S3, Weights & Biases or a webhook:
  evalsi export latest --to mlflow:http://127.0.0.1:5000
Write a report (HTML or Markdown):
  evalsi report latest -o report.html
Measure a judge evaluator against human labels:
  evalsi calibrate --judge reference-correctness --labels labels.jsonl --judges judges.yaml
Give coding agents and other MCP clients evalsi's tools (evaluate, runs, compare):
  evalsi mcp
Run evaluators from other packages, each in its own virtual environment:
  evalsi plugin install ./my-plugin
Discover evaluators:
  evalsi catalog list
  evalsi catalog show exact-match
Serve the API (gRPC, gRPC-Web, Connect, REST) on one port:
  evalsi serve [--host H] [--port P] [--config evalsi.yaml]
Watch live traces (OTLP into evalsi serve) with an online policy, and look at them:
  evalsi watch -f policy.yaml --server http://127.0.0.1:8080
  evalsi traces list --server http://127.0.0.1:8080 [--errors] [--since 1h]
  evalsi traces show TRACE_ID --server http://127.0.0.1:8080
Seal a run as evidence (test plan, records, scores, manifest) and check it offline:
  evalsi run -f run.yaml --declaration system.yaml --bundle evidence/
  evalsi bundle validate evidence/ [--allowed-signers allowed_signers]
  evalsi gate --bundle evidence/
  evalsi rescore evidence/
  evalsi bundle sign evidence/ --key release_key
Have people review a run's verdicts against their evidence, and store their approvals:
  evalsi review export latest -o review.jsonl [--failing]
  evalsi review import review.jsonl
Sign in to a server, and manage its API keys and access:
  evalsi login --server https://evalsi.example.com [--browser]
  evalsi whoami --server https://evalsi.example.com
  evalsi auth keys create --name ci --project checkout --role runner --server URL
  evalsi auth check --config evalsi.yaml --action runs.create --project checkout --principal JSON
Run untrusted code on the strongest sandbox rung available (or not at all):
  evalsi sandbox probe
  evalsi sandbox run -- python3 -c 'print(42)'
"""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or only of ``command`` when it is one (a faster start)."""
    parser = EvalsiParser(  # a mistyped flag: the command's usage and a "did you mean"
        prog="evalsi",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"evalsi {VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in names:
        importlib.import_module(f"evalsi.cli.{name}").register(commands)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command word: the first argument that is not an option (the top level takes none
    with a value), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_of(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = args.handler(args)
    except EvalsiError as e:
        return fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        return fail("interrupted; what was recorded so far is kept in the store", 3)
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours; silence the flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug of ours: say so plainly, with the traceback only on request
        if isinstance(e, ModuleNotFoundError):  # an optional package: say which extra installs it
            extra = missing_extra(e, f"evalsi {args.command}")
            if extra is not None:
                return fail(str(extra), extra.exit_code)
        if os.environ.get("EVALSI_DEBUG"):
            raise
        return fail(
            f"internal error: {type(e).__name__}: {e}\n"
            "  hint: rerun with EVALSI_DEBUG=1 for the traceback and report it",
            3,
        )
    return code
