"""The ``evalsi`` command: thin over the library. ``main`` maps errors to exit codes.

Exit codes (DESIGN.md §4): 0 done and every gate passed; 1 a gate failed; 2 cannot judge (bad
input, bad spec); 3 the run could not finish (infrastructure, interruption, internal error).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from evalsi import __version__
from evalsi.cli import (
    _calibrate,
    _catalog,
    _compare,
    _eval,
    _grade,
    _report,
    _run,
    _runs,
    _sandbox,
    _serve,
    _traces,
    _watch,
)
from evalsi.cli._output import fail
from evalsi.core import EvalsiError

DESCRIPTION = """\
evalsi grades LLM apps, RAG systems, agents and ML models with statistics you can trust.

Score records that already hold outputs:
  evalsi eval --data qa.jsonl --evaluators exact-match,contains
Call a model or agent on a dataset, then grade (an EvalRun spec):
  evalsi run -f run.yaml [--dry-run] [--resume RUN_ID] [--execute-only]
Grade a Run's stored outputs (no target calls), or replay a run:
  evalsi grade --from RUN_ID --evaluators exact-match
  evalsi rerun RUN_ID
Look at what ran:
  evalsi runs list
  evalsi runs show latest
Compare two runs, paired per record:
  evalsi compare RUN_A RUN_B
Write a report (HTML or Markdown):
  evalsi report latest -o report.html
Measure a judge evaluator against human labels:
  evalsi calibrate --judge reference-correctness --labels labels.jsonl --judges judges.yaml
Discover evaluators:
  evalsi catalog list
  evalsi catalog show exact-match
Serve the API (gRPC, gRPC-Web, Connect, REST) on one port:
  evalsi serve [--host H] [--port P] [--config evalsi.yaml]
Watch live traces (OTLP into evalsi serve) with an online policy, and look at them:
  evalsi watch -f policy.yaml --server http://127.0.0.1:8080
  evalsi traces list --server http://127.0.0.1:8080 [--errors] [--since 1h]
  evalsi traces show TRACE_ID --server http://127.0.0.1:8080
Run untrusted code on the strongest sandbox rung available (or not at all):
  evalsi sandbox probe
  evalsi sandbox run -- python3 -c 'print(42)'
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalsi",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"evalsi {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _eval.register(commands)
    _run.register(commands)
    _grade.register(commands)
    _runs.register(commands)
    _compare.register(commands)
    _catalog.register(commands)
    _report.register(commands)
    _calibrate.register(commands)
    _serve.register(commands)
    _sandbox.register(commands)
    _traces.register(commands)
    _watch.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
        if os.environ.get("EVALSI_DEBUG"):
            raise
        return fail(
            f"internal error: {type(e).__name__}: {e}\n"
            "  hint: rerun with EVALSI_DEBUG=1 for the traceback and report it",
            3,
        )
    return code


def entrypoint() -> None:
    sys.exit(main())
