"""Evaluations as tests (docs/guides/ci.md): run with `pytest --evalsi examples/ci/`.

The `evalsi_eval` fixture comes from evalsi's pytest plugin (installed with evalsi); with
`--evalsi` each run is stored (`evalsi runs list` shows it, named after the test).
"""

from __future__ import annotations

from pathlib import Path

from evalsi.testing import assert_gates, assert_metric

ANSWERS = Path(__file__).with_name("answers.jsonl")  # 19 of 20 answers right


def test_answers_are_right(evalsi_eval):
    result = evalsi_eval(ANSWERS, ["exact-match"], params={"exact-match": {"ignore_case": True}})
    # strict: the whole 95% interval, [0.751, 0.999], must clear 0.7, not just the mean (0.95)
    assert_metric(result, "exact-match", ">=", 0.7, strict=True)


def test_answers_contain_the_reference_and_pass_the_gates(evalsi_eval):
    result = evalsi_eval(
        ANSWERS,
        ["contains", "exact-match"],
        gates=["metric('contains').ci.low >= 0.7", "metric('exact-match').mean >= 0.9"],
    )
    assert_metric(result, "contains/contains", ">=", 0.9)
    assert_gates(result)
