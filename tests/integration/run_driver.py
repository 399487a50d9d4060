"""A Run in its own process, for the kill -9 test: ``python -m tests.integration.run_driver
BASE_URL DATA STORE``; prints the run id, then runs until done (or killed)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from evalsi.runs._execute import execute_run
from tests.integration.run_support import model_spec
from tests.support.registry import BUILTINS


def main() -> None:
    base_url, data, store = sys.argv[1:4]
    spec = model_spec(base_url, Path(data), trials=2, concurrency=4)
    result = asyncio.run(execute_run(spec, store=store, registry=BUILTINS))
    print(result.run_id, flush=True)


if __name__ == "__main__":
    main()
