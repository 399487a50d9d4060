"""Public benchmarks as evalsi runs: their instances imported as a dataset and a runnable
EvalRun spec, graded as the benchmark's own harness grades them.

``import_swebench`` turns SWE-bench instances into a dataset whose tasks check a local clone
out at the base commit for a CLI agent, and ``swebench_check`` is the spec's checker (the
hidden test patch applied in the task's sandbox, FAIL_TO_PASS and PASS_TO_PASS run)."""

from evalsi.benchmarks._swebench import (
    LOG_FORMATS,
    SweBenchImport,
    import_swebench,
    parse_log,
    read_instances,
    resolved,
    swebench_check,
)

__all__ = [
    "LOG_FORMATS",
    "SweBenchImport",
    "import_swebench",
    "parse_log",
    "read_instances",
    "resolved",
    "swebench_check",
]
