"""``loop-detection``: runs of identical calls, total repeats, the redundant-call count."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Outcome, ParamError, Step
from evalsi.packs.agent._loops import loop_detection
from tests.unit.packs.agent_support import agent_record, llm, outcome, run, tool


def check(*steps: Step, **params: Any) -> tuple[bool | None, float | None, str]:
    got = run(loop_detection, agent_record(*steps), **params)
    main = got["loop-detection"]
    return main.passed, got["redundant-calls"].number, main.explanation


A = {"city": "Paris"}


def test_three_identical_calls_in_a_row_are_a_loop() -> None:
    steps = [llm(), tool("w", A), llm(), tool("w", '{"city": "Paris"}'), tool("w", A)]
    assert check(*steps) == (
        False,
        2,
        'loop: w({"city":"Paris"}) 3 times in a row (steps 2-5)',
    )


def test_steps_of_other_kinds_do_not_break_a_run() -> None:
    # the llm_call steps between the calls are not calls: the three w calls are consecutive
    assert check(tool("w", A), llm(), tool("w", A), llm(), tool("w", A))[0] is False


def test_different_arguments_are_different_calls() -> None:
    steps = [tool("w", {"city": "Paris"}), tool("w", {"city": "Rome"}), tool("w", A)]
    assert check(*steps) == (True, 0, "no call repeated 3 times in a row")


def test_threshold_and_consecutive() -> None:
    # w w x w: consecutive runs w×2, x, w → 1 redundant; in total w×3 → 2 redundant
    steps = [tool("w", A), tool("w", A), tool("x"), tool("w", A)]
    assert check(*steps)[:2] == (True, 1)
    assert check(*steps, threshold=2)[:2] == (False, 1)
    passed, redundant, explanation = check(*steps, consecutive=False)
    assert (passed, redundant) == (False, 2)
    assert explanation == 'loop: w({"city":"Paris"}) 3 times (first at step 1)'
    assert check(*steps, consecutive=False, threshold=4)[:2] == (True, 2)


def test_no_tool_calls_is_no_loop() -> None:
    assert check(llm(), llm()) == (True, 0, "no call repeated 3 times in a row")


def test_unicode_arguments() -> None:
    z = {"city": "Zürich"}
    steps = [tool("w", z), tool("w", '{"city": "Z\\u00fcrich"}'), tool("w", z)]
    assert check(*steps)[0] is False


def test_kinds() -> None:
    r = Step(kind="retrieval", name="kb", input={"q": "x"})
    assert check(r, r, r)[0] is True
    assert check(r, r, r, kinds=["retrieval"])[:2] == (False, 2)


def test_params_and_skips() -> None:
    with pytest.raises(ParamError, match="'threshold' must be >= 2"):
        loop_detection.bind({"threshold": 1})
    assert outcome(loop_detection, agent_record()) == (Outcome.SKIPPED, "record has no trajectory")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abc"), max_size=10), st.integers(2, 4))
def test_counts_against_a_direct_count(names: list[str], threshold: int) -> None:
    steps = [tool(n) for n in names] or [llm()]
    # consecutive: a redundant call equals the one before it
    redundant = sum(1 for i in range(1, len(names)) if names[i] == names[i - 1])
    longest = run_length = 0
    for i, n in enumerate(names):
        run_length = run_length + 1 if i and names[i - 1] == n else 1
        longest = max(longest, run_length)
    assert check(*steps, threshold=threshold)[:2] == (longest < threshold, redundant)
    total_redundant = len(names) - len(set(names))
    most = max((names.count(n) for n in names), default=0)
    assert check(*steps, threshold=threshold, consecutive=False)[:2] == (
        most < threshold,
        total_redundant,
    )
