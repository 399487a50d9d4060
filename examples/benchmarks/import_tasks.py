"""Import a benchmark's own task format into an evalsi dataset (and spec): the Python API
behind the proposed `evalsi benchmark import KIND SRC... -o DIR`.

    python examples/benchmarks/import_tasks.py terminal-bench TASKS... -o DIR [--model JSON]
    python examples/benchmarks/import_tasks.py bfcl DATA_DIR -o DIR [--category C]... [--with-gold]
    python examples/benchmarks/import_tasks.py inspect-task FILE.py@TASK -o DIR [--model JSON]
    python examples/benchmarks/import_tasks.py inspect-log LOG.eval -o DIR
"""

import argparse
import json
import sys
from pathlib import Path

from evalsi.benchmarks import (
    import_bfcl,
    import_inspect_log,
    import_inspect_task,
    import_terminal_bench,
)
from evalsi.core import UserError

parser = argparse.ArgumentParser(description="import a benchmark into evalsi")
parser.add_argument("kind", choices=["terminal-bench", "bfcl", "inspect-task", "inspect-log"])
parser.add_argument("src", nargs="+")
parser.add_argument("-o", "--out", type=Path, required=True)
parser.add_argument("--model", type=json.loads, help="target.agent.model / target.model as JSON")
parser.add_argument("--category", action="append", help="bfcl: a category to import")
parser.add_argument("--with-gold", action="store_true", help="bfcl: rows carry the gold calls")
args = parser.parse_args()
try:
    if args.kind == "terminal-bench":
        result = import_terminal_bench([Path(s) for s in args.src], args.out, model=args.model)
    elif args.kind == "bfcl":
        result = import_bfcl(
            Path(args.src[0]), args.out, categories=args.category, with_gold=args.with_gold
        )
    elif args.kind == "inspect-task":
        result = import_inspect_task(args.src[0], args.out, model=args.model)
    else:
        result = import_inspect_log(Path(args.src[0]), args.out)
except UserError as e:
    sys.exit(f"error: {e.message}" + (f"\nhint: {e.hint}" if e.hint else ""))
spec = f", spec {result.spec}" if result.spec else ""
print(f"{result.count} rows in {result.dataset}{spec}")
