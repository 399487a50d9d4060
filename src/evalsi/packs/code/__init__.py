"""The code pack: run generated programs against unit tests in the sandbox, compile, lint.

``code-exec-tests`` (candidate programs vs. HumanEval-style or plain tests, per-test results,
unbiased pass@k over n candidates), ``compile-check`` and ``lint-check``. Each is
``builtin/<name>@1.0.0`` and runs untrusted code only inside ``evalsi.sandbox``, at
``min_isolation`` (default namespaced) or not at all; the guide is docs/guides/packs/code.md.

Threat model of the test harness (honest limits): the harness process that prints the result
never runs candidate code, and reads the per-run nonce from stdin only after every test has run
(never from the environment). Each test runs in a forked child that cannot write the harness's
stdout, whose early exit, ``SystemExit``, crash or seccomp kill is a failure, and that is killed
at the per-test timeout. So a candidate printing a fake result line, exiting early, raising
``SystemExit``, redefining ``check``, patching builtins or looping forever cannot pass. What it
does NOT stop: code that deliberately tampers with its own test process (walking stack frames
to rewrite the test's locals, writing a forged verdict to the child's report pipe, returning an
object whose ``__eq__`` is always true). Tests inside one process cannot be protected from the
code they test; the sandbox keeps such a candidate away from the host, not from its own grade.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.code._exec import CandidateResult, code_exec_tests, run_candidate
from evalsi.packs.code._harness import HARNESS, RESULT_TAG, read_report
from evalsi.packs.code._sandboxed import (
    ENV_CONCURRENCY,
    SandboxRunnerFailure,
    default_concurrency,
    limiter,
    require_sandbox,
    using_ladder,
)
from evalsi.packs.code._shapes import ShapeError, SuitePlan, candidates_of, extract_code, read_tests
from evalsi.packs.code._static import compile_check, find_ruff, lint_check

EVALUATORS: tuple[Evaluator, ...] = (code_exec_tests, compile_check, lint_check)
"""Every evaluator of the code pack."""

__all__ = [
    "ENV_CONCURRENCY",
    "EVALUATORS",
    "HARNESS",
    "RESULT_TAG",
    "CandidateResult",
    "SandboxRunnerFailure",
    "ShapeError",
    "SuitePlan",
    "candidates_of",
    "code_exec_tests",
    "compile_check",
    "default_concurrency",
    "extract_code",
    "find_ruff",
    "limiter",
    "lint_check",
    "read_report",
    "read_tests",
    "require_sandbox",
    "run_candidate",
    "using_ladder",
]
