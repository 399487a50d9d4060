"""Public agent benchmarks as evalsi runs: their tasks as datasets, their environments as
``spec.environment``, their grading as checkers and evaluators."""

from evalsi.benchmarks._tau import (
    replay_actions,
    tau_check,
    tau_database,
    tau_rows,
    tau_run_spec,
)

__all__ = ["replay_actions", "tau_check", "tau_database", "tau_rows", "tau_run_spec"]
