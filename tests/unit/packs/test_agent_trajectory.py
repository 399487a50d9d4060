"""``trajectory-match``: every mode on hand-made cases, the first-difference explanations, and
the implications between modes as properties."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Outcome, ParamError, Step
from evalsi.packs.agent._trajectory import trajectory_match
from tests.unit.packs.agent_support import agent_record, llm, outcome, run, tool


def passed(names: str, reference: Any, **params: Any) -> bool:
    """Whether the agent calling ``names`` (space separated, no arguments) matches."""
    steps = [tool(n) for n in names.split()] or [llm()]
    score = run(trajectory_match, agent_record(*steps, reference=reference), **params)
    assert score["trajectory-match"].passed is not None
    return score["trajectory-match"].passed


# agent, reference, strict, unordered, subset, superset (hand-labelled)
CASES = [
    ("a b c", "a b c", True, True, True, True),
    ("a c b", "a b c", False, True, True, True),
    ("a b", "a b c", False, False, True, False),
    ("a b c d", "a b c", False, False, False, True),
    ("a a b", "a b", False, False, False, True),  # a call made twice must be matched twice
    ("a b", "a a b", False, False, True, False),
    ("a x", "a b", False, False, False, False),
    ("", "", True, True, True, True),
    ("", "a", False, False, True, False),
    ("a", "", False, False, False, True),
]


@pytest.mark.parametrize(("agent", "ref", "strict", "unordered", "subset", "superset"), CASES)
def test_modes(
    agent: str, ref: str, strict: bool, unordered: bool, subset: bool, superset: bool
) -> None:
    reference = {"tool_calls": ref.split()}
    assert passed(agent, reference) is strict
    assert passed(agent, reference, mode="unordered") is unordered
    assert passed(agent, reference, mode="subset") is subset
    assert passed(agent, reference, mode="superset") is superset


@pytest.mark.parametrize(
    ("agent", "ref", "mode", "explanation"),
    [
        ("a x c", "a b c", "strict", "call 2 (step 2): expected b, got x"),
        ("a b", "a b c", "strict", "the agent made 2 of 3 calls; call 3 should be c"),
        ("a b c d", "a b c", "strict",
         "the agent made 4 calls, the reference 3; the first extra is d at step 4"),
        ("a x y", "a b", "unordered",
         "missing reference call(s): b; call(s) not in the reference: x at step 2, y at step 3"),
        ("a x", "a b", "subset", "call(s) not in the reference: x at step 2"),
        ("a x", "a b", "superset", "missing reference call(s): b"),
        ("b c d e f", "a", "subset", "call(s) not in the reference: b at step 1, c at step 2, "
         "d at step 3 and 2 more"),
        ("a b", "a b", "strict", "match (strict: agent calls 2, reference calls 2)"),
    ],
)  # fmt: skip
def test_explanations(agent: str, ref: str, mode: str, explanation: str) -> None:
    steps = [tool(n) for n in agent.split()]
    got = run(trajectory_match, agent_record(*steps, reference=ref.split()), mode=mode)
    assert got["trajectory-match"].explanation == explanation


def test_match_args() -> None:
    steps = [tool("search", {"q": "rome"}), tool("book", '{"id": 3}')]
    ref = [
        {"name": "search", "arguments": {"q": "paris"}},
        {"name": "book", "arguments": {"id": 3}},
    ]
    record = agent_record(*steps, reference=ref)
    assert run(trajectory_match, record)["trajectory-match"].passed is True
    got = run(trajectory_match, record, match_args=True)["trajectory-match"]
    assert got.passed is False
    assert got.explanation == (
        'call 1 (step 1): expected search({"q":"paris"}), got search({"q":"rome"})'
    )
    subset = agent_record(tool("search", {"q": "paris", "limit": 3}), reference=ref[:1])
    assert run(trajectory_match, subset, match_args=True)["trajectory-match"].passed is False
    assert (
        run(trajectory_match, subset, match_args=True, args="subset")["trajectory-match"].passed
        is True
    )


def test_a_reference_call_without_arguments_matches_any_arguments() -> None:
    record = agent_record(tool("search", {"q": 1}), tool("search", {"q": 2}), reference=[
        {"name": "search", "arguments": {"q": 2}}, "search"])  # fmt: skip
    # strict pairs search(q=1) with search(q=2): no; unordered finds the other pairing
    assert run(trajectory_match, record, match_args=True)["trajectory-match"].passed is False
    assert (
        run(trajectory_match, record, match_args=True, mode="unordered")["trajectory-match"].passed
        is True
    )


def test_kinds_select_the_steps() -> None:
    record = agent_record(
        Step(kind="agent", name="planner"),
        tool("search"),
        Step(kind="agent", name="booker"),
        tool("book"),
        reference=["planner", "search", "booker", "book"],
    )
    assert run(trajectory_match, record)["trajectory-match"].passed is False
    got = run(trajectory_match, record, kinds=["agent", "tool_call"])
    assert got["trajectory-match"].passed is True
    assert got["trajectory-match"].metadata["agent"] == ["planner", "search", "booker", "book"]


def test_skips_errors_and_params() -> None:
    assert outcome(trajectory_match, agent_record(reference=["a"]))[0] is Outcome.SKIPPED
    state, reason = outcome(trajectory_match, agent_record(tool("a"), reference={"x": 1}))
    assert state is Outcome.SKIPPED
    assert reason.startswith("record has no reference tool calls")
    state, reason = outcome(trajectory_match, agent_record(tool("a"), reference=[None]))
    assert state is Outcome.ERROR
    assert reason == (
        "ValueError: reference[0]: expected a call object or a tool name, got NoneType"
    )
    with pytest.raises(ParamError, match="unknown step kind"):
        trajectory_match.bind({"kinds": ["tools"]})
    with pytest.raises(ParamError):
        trajectory_match.bind({"mode": "fuzzy"})
    assert run(trajectory_match, agent_record(tool("a")), expected=["a"])["trajectory-match"].passed


# -- properties --------------------------------------------------------------------------------

NAMES = st.lists(st.sampled_from("abc"), max_size=5)


def verdicts(agent: list[str], ref: list[str], **params: Any) -> dict[str, bool]:
    steps = [tool(n, {"x": 1}) for n in agent] or [llm()]
    record = agent_record(*steps, reference=ref)
    out = {}
    for mode in ("strict", "unordered", "subset", "superset"):
        got = run(trajectory_match, record, mode=mode, **params)["trajectory-match"].passed
        assert got is not None
        out[mode] = got
    return out


@settings(max_examples=200, deadline=None)
@given(NAMES, NAMES, st.booleans())
def test_mode_implications(agent: list[str], ref: list[str], match_args: bool) -> None:
    v = verdicts(agent, ref, match_args=match_args)
    if v["strict"]:
        assert v["unordered"]
    # unordered holds exactly when subset and superset both do
    assert v["unordered"] == (v["subset"] and v["superset"])
    # and each agrees with multiset arithmetic, computed independently
    a, r = Counter(agent), Counter(ref)
    assert v["strict"] == (agent == ref)
    assert v["unordered"] == (a == r)
    assert v["subset"] == all(a[k] <= r[k] for k in a)
    assert v["superset"] == all(a[k] >= r[k] for k in r)


@settings(max_examples=100, deadline=None)
@given(NAMES)
def test_a_trajectory_matches_itself_and_any_permutation(agent: list[str]) -> None:
    assert all(verdicts(agent, agent).values())
    assert verdicts(agent, sorted(agent))["unordered"]
