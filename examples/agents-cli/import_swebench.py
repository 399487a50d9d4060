"""SWE-bench instances as an evalsi dataset and run spec (``evalsi.benchmarks.import_swebench``).

    python examples/agents-cli/import_swebench.py           # the empty patch: swebench/
    python examples/agents-cli/import_swebench.py --gold    # the gold patches: swebench-gold/

The instances are the ones ``make_repo.py`` wrote; their repository ``acme/calc`` is the local
clone ``calc/`` beside them. The tests run with ``python3 -m unittest -v`` (this repository's
runner); the benchmark's own Python repositories use pytest, the default.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from evalsi.benchmarks import import_swebench

HERE = Path(__file__).resolve().parent


def main() -> int:
    gold = "--gold" in sys.argv[1:]
    result = import_swebench(
        HERE / "instances.jsonl",
        HERE / ("swebench-gold" if gold else "swebench"),
        {"acme/calc": HERE / "calc"},
        gold=gold,
        test_command=["python3", "-m", "unittest", "-v"],
        log_format="unittest",
    )
    print(f"{result.count} instances: {os.path.relpath(result.dataset)}")
    print(f"run them: evalsi run -f {os.path.relpath(result.spec)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
