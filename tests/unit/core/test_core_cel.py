"""The CEL engine loads without the package's command line, and ``import cel`` later reuses it."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from evalsi.core import cel_module
engine = cel_module()
assert engine.evaluate("1 + 2") == 3
assert engine.compile("a > 1").execute(engine.Context({"a": 3})) is True
heavy = sorted(m for m in ("typer", "rich", "prompt_toolkit", "cel.cli") if m in sys.modules)
assert not heavy, heavy
import cel
assert cel.compile is engine.compile and cel_module() is engine
assert cel.evaluate("2 * 3") == 6
print("ok")
"""


def test_the_engine_alone_then_the_package_shares_it() -> None:
    # A fresh interpreter: this test process may have imported cel the ordinary way already.
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
