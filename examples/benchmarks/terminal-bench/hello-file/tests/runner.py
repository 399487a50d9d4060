"""A stand-in for pytest in the sandbox (whose python3 is the machine's, without pytest): runs
each test_* function of a test file and prints pytest's -rA summary lines, the lines
Terminal-Bench's parser reads."""

import importlib.util
import sys
import traceback

path = sys.argv[1]
spec = importlib.util.spec_from_file_location("test_outputs", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
lines = []
for name in sorted(n for n in dir(module) if n.startswith("test_")):
    try:
        getattr(module, name)()
        lines.append(f"PASSED {path}::{name}")
    except Exception as e:  # noqa: BLE001 - a failing test is a result
        traceback.print_exc()
        lines.append(f"FAILED {path}::{name} - {type(e).__name__}: {e}")
print("=========================== short test summary info ============================")
print("\n".join(lines))
