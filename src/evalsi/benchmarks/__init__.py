"""Benchmark adapters: a benchmark's own task format read into evalsi datasets and specs, run
on evalsi's harness and scored as the benchmark's reference scorer does.

``import_terminal_bench`` (Terminal-Bench and Harbor task directories: an agent run in each
task's sandbox, graded by the task's tests), ``import_bfcl`` (BFCL's function-calling
questions and possible answers, graded by the bench pack's ``bfcl-ast`` and ``bfcl-exec``),
``import_inspect_task`` and ``import_inspect_log`` (an Inspect AI task's samples, an Inspect
``.eval`` log's scored samples), and τ²-bench domains (``tau_rows``, ``tau_run_spec``; graded on
the final database by ``tau_check``). ``stage_verifier`` is the checker the terminal specs name.
"""

from evalsi.benchmarks._bfcl import import_bfcl
from evalsi.benchmarks._imported import Imported
from evalsi.benchmarks._inspect import import_inspect_log, import_inspect_task, load_task
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
    "Imported",
    "import_bfcl",
    "import_inspect_log",
    "import_inspect_task",
    "import_terminal_bench",
    "load_task",
    "replay_actions",
    "stage_verifier",
    "tau_check",
    "tau_database",
    "tau_rows",
    "tau_run_spec",
]
