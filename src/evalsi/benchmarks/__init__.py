"""Benchmark adapters: a benchmark's own task format read into evalsi datasets and specs, run
on evalsi's harness and scored as the benchmark's reference scorer does.

``import_swebench`` (SWE-bench instances: a CLI agent on a local clone checked out at the base
commit, graded by ``swebench_check``: the hidden test patch applied in the task's sandbox,
FAIL_TO_PASS and PASS_TO_PASS run), ``import_terminal_bench`` (Terminal-Bench and Harbor task
directories: an agent run in each task's sandbox, graded by the task's tests; ``stage_verifier``
hands the tests over once the agent stops), ``import_bfcl`` (BFCL's function-calling questions
and possible answers, graded by the bench pack's ``bfcl-ast`` and ``bfcl-exec``),
``import_inspect_task`` and ``import_inspect_log`` (an Inspect AI task's samples, an Inspect
``.eval`` log's scored samples), and τ²-bench domains (``tau_rows``, ``tau_run_spec``; graded on
the final database by ``tau_check``).
"""

from evalsi.benchmarks._bfcl import import_bfcl
from evalsi.benchmarks._imported import Imported
from evalsi.benchmarks._inspect import import_inspect_log, import_inspect_task, load_task
from evalsi.benchmarks._swebench import (
    LOG_FORMATS,
    SweBenchImport,
    import_swebench,
    parse_log,
    read_instances,
    resolved,
    swebench_check,
)
from evalsi.benchmarks._tau import (
    replay_actions,
    tau_check,
    tau_database,
    tau_rows,
    tau_run_spec,
)
from evalsi.benchmarks._terminal_bench import import_terminal_bench
from evalsi.benchmarks._verifier import stage_verifier

__all__ = [
    "LOG_FORMATS",
    "Imported",
    "SweBenchImport",
    "import_bfcl",
    "import_inspect_log",
    "import_inspect_task",
    "import_swebench",
    "import_terminal_bench",
    "load_task",
    "parse_log",
    "read_instances",
    "replay_actions",
    "resolved",
    "stage_verifier",
    "swebench_check",
    "tau_check",
    "tau_database",
    "tau_rows",
    "tau_run_spec",
]
