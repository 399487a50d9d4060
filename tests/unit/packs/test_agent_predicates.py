"""The predicates: one verdict each, its evidence, turn scoping, bad params at bind, and calls
the policy blocked reported as not measured."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Check, Content, Outcome, ParamError, Record, Step, Trajectory, Usage
from evalsi.evaluators import Evaluator, NotMeasured, Skip
from evalsi.packs.agent._predicates import (
    final_answer,
    no_tool_error,
    tool_called,
    tool_count,
    tool_not_called,
    tool_order,
    within_budget,
)
from evalsi.packs.agent._turns import split_turns
from tests.unit.packs.agent_support import llm, outcome, run, tool


def user(text: str) -> Step:
    return Step("message", "user", input=text)


def said(text: str) -> Step:
    return Step("message", "assistant", output=text)


def blocked(name: str) -> Step:
    return Step(
        "policy_block", name, input={}, output={"rule": "deny", "reason": f"{name} is denied"}
    )


def rec(*steps: Step, output: str | None = None, **fields: Any) -> Record:
    return Record(
        id="r",
        trajectory=Trajectory(list(steps)),
        output=None if output is None else Content.of_text(output),
        **fields,
    )


# Two turns: search then book in turn 1 (steps 1-5), the user asks again, weather in turn 2.
TWO = rec(
    user("book a flight"),
    llm(),
    tool("search", {"to": "LIS"}),
    tool("book", {"id": "TP523", "seat": "4A"}),
    said("booked TP523"),
    user("and the weather?"),
    tool("weather", {"city": "Lisbon"}),
    said("sunny"),
    output="sunny, 24 C",
)


def verdict(ev: Evaluator, record: Record, **params: Any) -> tuple[bool, str]:
    score = run(ev, record, **params)[ev.name]
    assert score.passed is not None
    return score.passed, score.explanation


# -- turns -------------------------------------------------------------------------------------


def test_turns_begin_at_each_user_message() -> None:
    assert [[i for i, _ in t] for t in split_turns(TWO.trajectory.steps)] == [  # type: ignore[union-attr]
        [1, 2, 3, 4, 5],
        [6, 7, 8],
    ]
    # no user message: one turn; a system message before the first user one joins turn 1
    assert len(split_turns([llm(), tool("a")])) == 1
    assert len(split_turns([Step("message", "system"), user("hi"), llm()])) == 1
    # the agent acted before the first user message: that request came in the input, turn 1
    assert len(split_turns([llm(), tool("a"), user("more"), llm()])) == 2
    # the role may sit in the step's input
    role_in_input = Step("message", input={"role": "user", "content": "x"})
    assert len(split_turns([user("a"), llm(), role_in_input, llm()])) == 2
    assert len(split_turns([user("a"), user("b")])) == 2
    assert split_turns([]) == [[]]


WEATHER = 'weather({"city":"Lisbon"})'


@pytest.mark.parametrize(
    ("turn", "want"),
    [
        ("any", (True, "called: step 7: " + WEATHER)),
        (2, (True, "called in turn 2: step 7: " + WEATHER)),
        ("last", (True, "called in the last turn (turn 2): step 7: " + WEATHER)),
        ("2", (True, "called in turn 2: step 7: " + WEATHER)),
        (1, (False, "weather was not called in turn 1; the calls were: search at step 3, "
                    "book at step 4")),
    ],
)  # fmt: skip
def test_tool_called_by_turn(turn: Any, want: tuple[bool, str]) -> None:
    assert verdict(tool_called, TWO, tool="weather", turn=turn) == want


def test_a_turn_the_transcript_did_not_reach_is_skipped() -> None:
    assert outcome(tool_called, TWO, tool="weather", turn=3) == (
        Outcome.SKIPPED,
        "no turn 3: the transcript has 2 turn(s)",
    )
    assert outcome(tool_not_called, rec(llm()), tool="x", turn=2)[0] is Outcome.SKIPPED


# -- tool-called -------------------------------------------------------------------------------


def test_tool_called_with_arguments() -> None:
    ok = verdict(tool_called, TWO, tool="book", arguments={"id": "TP523"}, match="subset")
    assert ok == (True, 'called: step 4: book({"id":"TP523","seat":"4A"})')
    exact = verdict(tool_called, TWO, tool="book", arguments={"id": "TP523"})
    assert exact == (
        False,
        'book was called 1 time(s), never with exact arguments {"id":"TP523"}: '
        'step 4: book({"id":"TP523","seat":"4A"}) (arguments differ)',
    )
    schema = {
        "type": "object",
        "required": ["id", "seat"],
        "properties": {"id": {"type": "string"}},
    }
    assert verdict(tool_called, TWO, tool="book", arguments=schema, match="schema")[0]
    strict = {"type": "object", "required": ["class"]}
    passed, why = verdict(tool_called, TWO, tool="book", arguments=strict, match="schema")
    assert not passed
    assert why.endswith(
        'never satisfying the schema: step 4: book({"id":"TP523","seat":"4A"}) '
        "($: 'class' is a required property)"
    )


def test_tool_called_counts_duplicates_and_empty_trajectories() -> None:
    twice = rec(tool("a", {"x": 1}), tool("a", {"x": 1}))
    assert verdict(tool_called, twice, tool="a") == (
        True,
        'called: step 1: a({"x":1}) (and 1 more matching call(s))',
    )
    assert verdict(tool_called, rec(llm()), tool="a") == (
        False,
        "a was not called; no tool was called",
    )
    # an empty trajectory is not a trajectory: skipped, never failed
    assert outcome(tool_called, rec(), tool="a") == (Outcome.SKIPPED, "record has no trajectory")


# -- blocked by policy -------------------------------------------------------------------------


def test_a_call_the_policy_blocked_is_not_measured() -> None:
    record = rec(llm(), blocked("wipe"), tool("vacuum"), said("done"), output="done")
    reason = (
        "not_measured(blocked_by_policy): wipe was blocked by the tool policy at step 2 "
        "(wipe is denied) and never called"
    )
    assert outcome(tool_called, record, tool="wipe") == (Outcome.SKIPPED, reason)
    assert outcome(tool_count, record, tool="wipe", min=1) == (Outcome.SKIPPED, reason)
    assert outcome(tool_order, record, tools=["wipe", "vacuum"]) == (Outcome.SKIPPED, reason)
    # not-called holds (and says why), a max-only count scores, the answer still scores
    assert verdict(tool_not_called, record, tool="wipe") == (
        True,
        "wipe was not called (blocked by the tool policy at step 2)",
    )
    assert verdict(tool_count, record, tool="wipe", max=0)[0]
    assert verdict(final_answer, record, contains="done")[0]
    # a block in another turn is out of scope: a plain failure there
    later = rec(user("a"), llm(), user("b"), blocked("wipe"))
    assert verdict(tool_called, later, tool="wipe", turn=1)[0] is False
    assert outcome(tool_called, later, tool="wipe", turn=2)[0] is Outcome.SKIPPED


def test_blocked_then_called_is_judged() -> None:
    record = rec(blocked("wipe"), tool("wipe", {"all": False}))
    assert verdict(tool_called, record, tool="wipe")[0]
    assert verdict(tool_called, record, tool="wipe", arguments={"all": True})[0] is False


def test_the_order_fails_without_the_blocked_tool_too() -> None:
    # b blocked, but c was never called either: a real failure
    record = rec(tool("a"), blocked("b"))
    assert verdict(tool_order, record, tools=["a", "b", "c"])[0] is False
    # b blocked and the rest in order: not measured
    record = rec(tool("a"), blocked("b"), tool("c"))
    assert outcome(tool_order, record, tools=["a", "b", "c"])[0] is Outcome.SKIPPED


def test_not_measured_is_a_skip_with_a_code() -> None:
    e = NotMeasured("blocked_by_policy", "x")
    assert isinstance(e, Skip)
    assert (e.code, e.reason) == ("blocked_by_policy", "not_measured(blocked_by_policy): x")


# -- tool-not-called ---------------------------------------------------------------------------


def test_tool_not_called() -> None:
    assert verdict(tool_not_called, TWO, tool="book") == (
        False,
        'book was called: step 4: book({"id":"TP523","seat":"4A"})',
    )
    assert verdict(tool_not_called, TWO, tool="book", turn="last") == (
        True,
        "book was not called in the last turn (turn 2)",
    )
    dup = rec(tool("a"), tool("a"))
    assert verdict(tool_not_called, dup, tool="a") == (
        False,
        "a was called: step 1: a({}) (2 calls in all)",
    )


# -- tool-order --------------------------------------------------------------------------------


def test_tool_order_as_a_subsequence() -> None:
    assert verdict(tool_order, TWO, tools=["search", "weather"]) == (
        True,
        "in order: search at step 3, weather at step 7",
    )
    assert verdict(tool_order, TWO, tools=["book", "search"]) == (
        False,
        "no call of search after step 4 (matched book at step 4); the calls: "
        "search → book → weather",
    )
    assert verdict(tool_order, TWO, tools=["search", "weather"], turn=1) == (
        False,
        "no call of weather after step 3 in turn 1 (matched search at step 3); the calls: "
        "search → book",
    )
    assert verdict(tool_order, rec(llm()), tools=["a"]) == (
        False,
        "no call of a; the calls: none",
    )


def test_strict_order_needs_consecutive_calls() -> None:
    record = rec(tool("a"), llm(), tool("b"), tool("x"), tool("c"))
    assert verdict(tool_order, record, tools=["a", "b"], strict=True) == (
        True,
        "in order: a at step 1, b at step 3",
    )
    assert verdict(tool_order, record, tools=["a", "b", "c"])[0]
    assert verdict(tool_order, record, tools=["a", "b", "c"], strict=True) == (
        False,
        "no consecutive calls a, b, c (longest run: a at step 1, b at step 3); the calls: "
        "a → b → x → c",
    )
    # duplicates: the run starting at the second a holds
    assert verdict(tool_order, rec(tool("a"), tool("a"), tool("b")), tools=["a", "b"], strict=True)[
        0
    ]


# -- tool-count --------------------------------------------------------------------------------


def test_tool_count() -> None:
    assert verdict(tool_count, TWO, min=3, max=3) == (
        True,
        "tool called 3 time(s) (steps 3, 4, 7); expected 3 to 3",
    )
    assert verdict(tool_count, TWO, tool="search", max=0, turn=1) == (
        False,
        "search called 1 time(s) in turn 1 (steps 3); expected at most 0",
    )
    assert verdict(tool_count, TWO, min=1, turn=2) == (
        True,
        "tool called 1 time(s) in turn 2 (steps 7); expected at least 1",
    )
    assert verdict(tool_count, rec(llm()), tool="a", min=1) == (
        False,
        "a called 0 time(s); expected at least 1",
    )


# -- final-answer ------------------------------------------------------------------------------


def test_final_answer_regex_contains_and_json() -> None:
    assert verdict(final_answer, TWO, regex=r"\d+ C") == (
        True,
        "turn 2's answer matches /\\d+ C/ at 7: '24 C': 'sunny, 24 C'",
    )
    assert verdict(final_answer, TWO, contains="TP523", turn=1) == (
        True,
        "the final answer contains 'TP523' at 7: 'booked TP523'",
    )
    assert verdict(final_answer, TWO, contains="rain") == (
        False,
        "turn 1's answer does not contain 'rain': 'booked TP523'; turn 2's answer does not "
        "contain 'rain': 'sunny, 24 C'",
    )
    data = rec(llm(), output='{"status": "ok", "order": {"id": 7, "items": 2}}')
    assert verdict(final_answer, data, json=True)[0]
    assert verdict(final_answer, data, json={"order": {"id": 7}}) == (
        True,
        'the final answer contains {"order":{"id":7}}: '
        '\'{"status": "ok", "order": {"id": 7, "items": 2}}\'',
    )
    assert verdict(final_answer, data, json={"order": {"id": 8}})[1].startswith(
        "the final answer does not contain the expected JSON: $.order.id is 7, expected 8"
    )
    assert verdict(final_answer, data, json={"total": 1})[1].startswith(
        "the final answer does not contain the expected JSON: $.total is missing"
    )
    prose = rec(llm(), output="ok then")
    assert verdict(final_answer, prose, json=True)[1].startswith("the final answer is not JSON")


def test_final_answer_of_an_earlier_turn_falls_back_to_the_model_text() -> None:
    record = rec(
        user("a"),
        Step("llm_call", "m", output={"text": "first answer", "tool_calls": []}),
        user("b"),
        llm(),
        output="second",
    )
    assert verdict(final_answer, record, contains="first", turn=1)[0]
    assert verdict(final_answer, record, contains="first", turn="last") == (
        False,
        "the final answer does not contain 'first': 'second'",
    )
    assert verdict(final_answer, rec(llm()), contains="x") == (False, "no final answer")
    # no trajectory at all: the output is the answer
    bare = Record(id="r", output=Content.of_text("42"))
    assert verdict(final_answer, bare, regex="^42$")[0]


# -- no-tool-error -----------------------------------------------------------------------------


def test_no_tool_error() -> None:
    record = rec(user("a"), tool("s", error="timed out"), user("b"), tool("s"))
    assert verdict(no_tool_error, record) == (False, "step 2: s failed: timed out")
    assert verdict(no_tool_error, record, turn="last") == (
        True,
        "no tool call failed in the last turn (turn 2) (1 call(s))",
    )
    assert verdict(no_tool_error, record, turn=1)[0] is False
    assert verdict(no_tool_error, rec(llm())) == (True, "no tool call failed (0 call(s))")
    several = rec(*(tool(n, error="bad, very") for n in "abcd"))
    assert verdict(no_tool_error, several) == (
        False,
        "step 1: a failed: bad, very; step 2: b failed: bad, very; step 3: c failed: bad, very; "
        "and 1 more",
    )


# -- within-budget -----------------------------------------------------------------------------


def test_within_budget() -> None:
    record = rec(
        user("a"),
        llm(usage=Usage(total_tokens=100)),
        user("b"),
        llm(usage=Usage(total_tokens=300)),
        tool("x"),
        usage=Usage(total_tokens=450),  # the record's usage counts for the whole transcript
    )
    assert verdict(within_budget, record, max_steps=5, max_tokens=500) == (
        True,
        "within budget: steps 5 of 5, tokens 450 of 500",
    )
    assert verdict(within_budget, record, max_tokens=200, turn=2) == (
        False,
        "over budget: tokens 300 of 200 in turn 2",
    )
    assert verdict(within_budget, record, max_steps=2, turn=1)[0]
    assert outcome(within_budget, rec(llm()), max_tokens=10) == (
        Outcome.SKIPPED,
        "no token usage (max_tokens is set)",
    )


# -- bad params --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ev", "params", "message"),
    [
        (tool_called, {}, "tool-called: missing required param(s): tool"),
        (tool_called, {"tool": " "}, "tool-called: param 'tool' must name a tool"),
        (tool_called, {"tool": "a", "turn": "first"},
         "tool-called: param 'turn' must be a turn number (1, 2, ...), 'last' or 'any', "
         "got 'first'"),
        (tool_called, {"tool": "a", "turn": 0}, "tool-called: param 'turn' must be a turn number"),
        (tool_called, {"tool": "a", "turn": True}, "tool-called: param 'turn' must be a turn"),
        (tool_called, {"tool": "a", "match": "subset"},
         "tool-called: param 'match' needs the param 'arguments'"),
        (tool_called, {"tool": "a", "match": "fuzzy", "arguments": {}},
         "tool-called: param 'match' must be one of"),
        (tool_called, {"tool": "a", "match": "schema", "arguments": {"type": "nope"}},
         "tool-called: param 'arguments' is not a valid Draft 2020-12 schema"),
        (tool_not_called, {}, "tool-not-called: missing required param(s): tool"),
        (tool_not_called, {"tool": "a", "turn": -1}, "tool-not-called: param 'turn'"),
        (tool_order, {"tools": []}, "tool-order: param 'tools' must list at least one tool"),
        (tool_order, {"tools": ["a", ""]}, "tool-order: param 'tools' must list"),
        (tool_order, {"tools": ["a"], "turn": "all"}, "tool-order: param 'turn'"),
        (tool_count, {"tool": "a"}, "tool-count: give the param 'min', 'max' or both"),
        (tool_count, {"min": 3, "max": 2},
         "tool-count: param 'min' (3) is greater than 'max' (2)"),
        (tool_count, {"min": -1}, "tool-count: param 'min' must be >= 0"),
        (tool_count, {"min": 1, "turn": "x"}, "tool-count: param 'turn'"),
        (final_answer, {}, "final-answer: give exactly one of the params 'regex', 'contains'"),
        (final_answer, {"regex": "a", "contains": "a"},
         "final-answer: give exactly one of the params 'regex', 'contains', 'json' "
         "(got regex, contains)"),
        (final_answer, {"regex": "(unclosed"},
         "final-answer: param 'regex' is not a valid regular expression: missing )"),
        (final_answer, {"json": [1]}, "final-answer: param 'json' must be true"),
        (final_answer, {"contains": "a", "turn": "next"}, "final-answer: param 'turn'"),
        (no_tool_error, {"turn": "some"}, "no-tool-error: param 'turn'"),
        (within_budget, {}, "within-budget: give the param 'max_steps', 'max_tokens' or both"),
        (within_budget, {"max_steps": 0}, "within-budget: param 'max_steps' must be > 0"),
        (within_budget, {"max_steps": 1, "turn": 1.5}, "within-budget: param 'turn'"),
    ],
)  # fmt: skip
def test_bad_params_fail_at_bind(ev: Evaluator, params: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError) as e:
        ev.bind(params)
    assert str(e.value).startswith(message) or message in str(e.value)
    assert str(e.value).startswith(ev.name)


def test_cli_strings_are_read_as_the_cli_gives_them() -> None:
    # --param values arrive as strings: turn=2, tools=a,b, arguments as JSON, min=1
    bound = tool_order.bind({"tools": "search,book", "turn": "1"})
    assert (bound.instance.tools, bound.instance.turn) == (["search", "book"], 1)
    bound = tool_called.bind({"tool": "book", "arguments": '{"id": "TP523"}', "match": "subset"})
    assert bound.instance.arguments == {"id": "TP523"}
    assert tool_count.bind({"min": "1", "turn": "last"}).instance.turn == "last"


# -- properties --------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c"])
STEPS = st.lists(
    st.one_of(
        NAMES.map(lambda n: tool(n)),
        NAMES.map(blocked),
        st.just(llm()),
        st.just(user("again")),
        NAMES.map(lambda n: tool(n, error="boom")),
    ),
    min_size=1,
    max_size=12,
)
TURNS = st.one_of(st.sampled_from(["any", "last"]), st.integers(1, 3))


def _judge(ev: Evaluator, record: Record, **params: Any) -> bool | None:
    """True/False when scored, None when skipped."""
    from evalsi.evaluators import RecordRunner

    (result,) = RecordRunner(ev.bind(params)).run([record])
    if result.outcome is Outcome.SKIPPED:
        return None
    assert result.outcome is Outcome.SCORED, result.reason
    return bool(result.scores[0].value)


@settings(max_examples=150, deadline=None)
@given(STEPS, NAMES, TURNS)
def test_called_and_not_called_never_both_pass(steps: list[Step], name: str, turn: Any) -> None:
    record = rec(*steps)
    called = _judge(tool_called, record, tool=name, turn=turn)
    not_called = _judge(tool_not_called, record, tool=name, turn=turn)
    assert not (called and not_called)
    if called is not None and not_called is not None:  # both scored: exactly one holds
        assert called != not_called


@settings(max_examples=150, deadline=None)
@given(STEPS, st.one_of(st.none(), NAMES), st.integers(0, 4), TURNS)
def test_count_min_max_n_passes_iff_exactly_n_calls(
    steps: list[Step], name: str | None, n: int, turn: Any
) -> None:
    record = rec(*steps)
    got = _judge(tool_count, record, tool=name, min=n, max=n, turn=turn)
    if got is None:
        return  # a turn not reached, or the tool blocked and never called
    from evalsi.packs.agent._turns import scope_of

    scope = scope_of(record, turn)
    calls = [s for _, s in scope.steps if s.kind == "tool_call" and name in (None, s.name)]
    assert got == (len(calls) == n)


@settings(max_examples=100, deadline=None)
@given(STEPS, st.lists(NAMES, min_size=1, max_size=3), TURNS)
def test_a_strict_order_implies_the_loose_one(
    steps: list[Step], tools: list[str], turn: Any
) -> None:
    record = rec(*steps)
    strict = _judge(tool_order, record, tools=tools, strict=True, turn=turn)
    loose = _judge(tool_order, record, tools=tools, turn=turn)
    if strict:
        assert loose


def test_checks_do_not_change_the_predicates() -> None:
    record = rec(tool("a"), output="x")
    record.trajectory.checks = [Check("state", False)]  # type: ignore[union-attr]
    assert verdict(tool_called, record, tool="a")[0]
