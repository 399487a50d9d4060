"""A custom evaluator graded next to built-in ones, on examples/qa.jsonl.

Run it from the repository root or from anywhere else:

    python examples/custom_evaluator.py

The results go to an in-memory store, so the script leaves no ``.evalsi/`` behind.
"""

from __future__ import annotations

import math
from pathlib import Path

import evalsi
from evalsi import Outcome, Record, Score, Skip, evaluator

DATA = Path(__file__).resolve().parent / "qa.jsonl"


@evaluator(
    name="example/numeric-close",
    version="1.0.0",
    requires=("output", "reference"),
    output="passed",
)
def numeric_close(record: Record, *, rel_tol: float = 0.01) -> bool | Score:
    """Pass when the output and the reference are numbers within a relative tolerance."""
    assert record.output is not None  # the runner checked `requires` before calling
    assert record.reference is not None
    try:
        expected = float(record.reference.as_text())
    except ValueError:
        # Not a numeric question: skipped with a reason, never scored as a failure.
        raise Skip("the reference is not a number") from None
    text = record.output.as_text()
    try:
        got = float(text)
    except ValueError:
        return Score(passed=False, explanation=f"the output is not a number: {text!r}")
    return math.isclose(got, expected, rel_tol=rel_tol)


def main() -> None:
    result = evalsi.evaluate(
        data=DATA,
        evaluators=["exact-match", "fuzzy-match", numeric_close],
        params={
            "exact-match": {"ignore_case": True},
            "numeric-close": {"rel_tol": 0.005},
        },
        store=":memory:",
    )
    print(result.table())
    print()
    skipped = [
        r for r in result.iter_results(outcome=Outcome.SKIPPED) if r.evaluator == "numeric-close"
    ]
    print(f"numeric-close skipped {len(skipped)} records, for example:")
    for r in skipped[:3]:
        print(f"  {r.record_id}: {r.reason}")


if __name__ == "__main__":
    main()
