"""The bench pack: benchmarks' own scorers, proven equal to their reference implementations.
``bfcl-ast`` (BFCL's AST check of function calls: names, types, allowed values, optional
parameters, count and order rules) and ``bfcl-exec`` (BFCL's executable check: the calls'
results against the ground truth's). Rows come from ``evalsi.benchmarks.import_bfcl``; the
record shape is in ``docs/guides/agents/benchmarks.md``.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.bench._bfcl import bfcl_ast, bfcl_exec, parse_call, record_calls
from evalsi.packs.bench._bfcl_rules import Verdict, check_call, check_calls

EVALUATORS: tuple[Evaluator, ...] = (bfcl_ast, bfcl_exec)
"""Every evaluator of the bench pack."""

__all__ = [
    "EVALUATORS",
    "Verdict",
    "check_call",
    "check_calls",
    "parse_call",
    "record_calls",
]
