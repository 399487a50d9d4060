"""The agent pack's call helpers: reading calls from trajectories and references, comparing
arguments, and pairing calls (checked against brute force over every pairing)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Content, Message, ParamError, Record, Step, ToolCall, Trajectory
from evalsi.evaluators import Skip
from evalsi.packs.agent._calls import (
    Call,
    agent_calls,
    align_ordered,
    align_unordered,
    args_match,
    canonical,
    check_kinds,
    expected_param,
    max_matching,
    parse_arguments,
    reference_calls,
)


def record(reference: object = None) -> Record:
    return Record(id="r", reference=None if reference is None else Content.from_value(reference))


# -- arguments ---------------------------------------------------------------------------------


def test_arguments_from_json_strings_equal_arguments_as_objects() -> None:
    assert parse_arguments('{"city": "Z\\u00fcrich", "days": 2}') == {"city": "Zürich", "days": 2}
    assert parse_arguments(None) == {}
    assert parse_arguments("null") == {}
    assert parse_arguments("not json {") == "not json {"  # kept: evidence of a broken call


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, True),  # key order
        ({"n": 1}, {"n": 1.0}, True),  # JSON has one number type
        ({"n": True}, {"n": 1}, False),  # a boolean is not a number
        ({"l": [1, 2]}, {"l": [2, 1]}, False),  # list order matters
        ({"s": "café"}, {"s": "cafe\u0301"}, False),  # no Unicode folding
        ({"s": "Zürich"}, {"s": "Zürich"}, True),
        ({"s": "a"}, {"s": "A"}, False),
        ({}, {}, True),
    ],
)
def test_canonical_equality(a: object, b: object, equal: bool) -> None:
    assert (canonical(a) == canonical(b)) is equal


def test_args_match_modes() -> None:
    got = Call("f", {"city": "Paris", "units": "metric"})
    assert not args_match(got, Call("f", {"city": "Paris"}), "exact")
    assert args_match(got, Call("f", {"city": "Paris"}), "subset")
    assert not args_match(got, Call("f", {"city": "Rome"}), "subset")
    assert not args_match(got, Call("f", {"country": "FR"}), "subset")
    assert args_match(got, Call("f", {}, constrained=False), "exact")  # no arguments given
    # subset with non-object arguments falls back to equality
    assert args_match(Call("f", [1]), Call("f", [1]), "subset")
    assert not args_match(Call("f", [1, 2]), Call("f", [1]), "subset")


# -- agent calls -------------------------------------------------------------------------------


def test_agent_calls_read_tool_steps_in_order() -> None:
    traj = Trajectory(
        [
            Step(kind="llm_call", name="gpt"),
            Step(kind="tool_call", name="ignored", tool_call=ToolCall("search", '{"q": "x"}')),
            Step(kind="retrieval", name="kb", input={"query": "x"}),
            Step(kind="tool_call", name="book", input={"id": 3}),  # no ToolCall: name + input
            Step(kind="tool_call", tool_call=ToolCall("ping")),
        ]
    )
    assert agent_calls(traj) == [
        Call("search", {"q": "x"}, step=2),
        Call("book", {"id": 3}, step=4),
        Call("ping", {}, step=5),
    ]
    assert [c.name for c in agent_calls(traj, ("retrieval", "tool_call"))] == [
        "search",
        "kb",
        "book",
        "ping",
    ]
    assert agent_calls(None) == []
    assert agent_calls(Trajectory([Step(kind="llm_call")])) == []


# -- reference calls ---------------------------------------------------------------------------


def test_reference_shapes() -> None:
    want = [Call("a", {"x": 1}), Call("b", {}, constrained=False)]
    assert (
        reference_calls(record({"tool_calls": [{"name": "a", "arguments": {"x": 1}}, "b"]}), None)
        == want
    )
    assert (
        reference_calls(record([{"name": "a", "arguments": '{"x": 1}'}, {"name": "b"}]), None)
        == want
    )
    openai = {"tool_calls": [{"id": "c1", "type": "function",
                              "function": {"name": "a", "arguments": '{"x":1}'}}]}  # fmt: skip
    assert reference_calls(record(openai), None) == [Call("a", {"x": 1})]
    assert reference_calls(record({"tool_calls": []}), None) == []


def test_reference_transcript_gives_the_assistant_tool_calls() -> None:
    ref = Content.of_messages(
        [
            Message(role="user", content="hi"),
            Message(role="assistant", tool_calls=[ToolCall("a", '{"x": 1}'), ToolCall("b")]),
            Message(role="tool", content="ok", tool_call_id="1"),
            Message(role="assistant", content="done"),
        ]
    )
    assert reference_calls(Record(id="r", reference=ref), None) == [
        Call("a", {"x": 1}),
        Call("b", {}),
    ]


@pytest.mark.parametrize("ref", [None, "Sunny, 3 °C", {"answer": 4}, 42])
def test_no_reference_calls_is_a_skip(ref: object) -> None:
    with pytest.raises(Skip, match="record has no reference tool calls"):
        reference_calls(record(ref), None)


def test_the_expected_param_wins_over_the_reference() -> None:
    expected = [Call("p", {})]
    assert reference_calls(record({"tool_calls": ["a"]}), expected) is expected
    assert reference_calls(record(None), expected) is expected


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"tool_calls": "search"}, "reference.tool_calls: expected a list of tool calls"),
        ({"tool_calls": [{"arguments": {}}]}, r"reference.tool_calls\[0\].name: expected a non-"),
        ([{"name": "a"}, {"name": ""}], r"reference\[1\].name: expected a non-empty string"),
        ([{"name": "a", "args": {}}], r"reference\[0\]: unknown key\(s\) args"),
        ([{"name": "a", "arguments": "{x"}], r"reference\[0\].arguments: a string must hold JSON"),
        ([3], r"reference\[0\]: expected a call object or a tool name, got int"),
        ({"tool_calls": [{"function": "a"}]}, r"tool_calls\[0\].function: expected an object"),
    ],
)
def test_a_malformed_reference_names_the_field(ref: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reference_calls(record(ref), None)


def test_a_malformed_expected_param_is_a_param_error() -> None:
    with pytest.raises(ParamError, match=r"x: param 'expected'\[0\].name"):
        expected_param("x", [{"name": 5}])
    assert expected_param("x", None) is None
    assert expected_param("x", ["a"]) == [Call("a", {}, constrained=False)]


def test_check_kinds() -> None:
    assert check_kinds("x", ["tool_call", "agent"]) == ("tool_call", "agent")
    with pytest.raises(ParamError, match="unknown step kind\\(s\\) tool"):
        check_kinds("x", ["tool"])
    with pytest.raises(ParamError, match="at least one"):
        check_kinds("x", [])


# -- pairing: hand-computed cases --------------------------------------------------------------


def calls(spec: str) -> list[Call]:
    """``"a b:1 c"`` → calls a(), b(x=1), c() (``:v`` sets argument x)."""
    out: list[Call] = []
    for token in spec.split():
        name, _, value = token.partition(":")
        out.append(Call(name, {"x": int(value)} if value else {}, step=len(out) + 1))
    return out


@pytest.mark.parametrize(
    ("agent", "reference", "ordered", "unordered"),
    [
        ("a b c", "a b c", [(0, 0), (1, 1), (2, 2)], [(0, 0), (1, 1), (2, 2)]),
        ("b a", "a b", [(1, 0)], [(0, 1), (1, 0)]),  # a tie keeps the earlier reference call
        ("a x b", "a b", [(0, 0), (2, 1)], [(0, 0), (2, 1)]),  # an extra call shifts nothing
        ("a", "a b", [(0, 0)], [(0, 0)]),
        ("", "a", [], []),
        ("a a a", "a", [(0, 0)], [(0, 0)]),
        # the pairing prefers matching arguments: the second a:2 pairs with the reference a:2
        ("a:1 a:2", "a:2", [(1, 0)], [(1, 0)]),
    ],
)
def test_pairings(
    agent: str,
    reference: str,
    ordered: list[tuple[int, int]],
    unordered: list[tuple[int, int]],
) -> None:
    a, r = calls(agent), calls(reference)
    assert align_ordered(a, r, "exact") == ordered
    assert align_unordered(a, r, "exact") == unordered


# -- pairing: properties against brute force ---------------------------------------------------

CALLS = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(0, 1)).map(lambda t: Call(t[0], {"x": t[1]})),
    max_size=5,
)


def brute_unordered(a: list[Call], r: list[Call]) -> tuple[int, int]:
    """The best (name pairs, argument matches) over every injective pairing."""
    best = (0, 0)
    small, large, flip = (a, r, False) if len(a) <= len(r) else (r, a, True)
    for perm in itertools.permutations(range(len(large)), len(small)):
        names = full = 0
        for i, j in enumerate(perm):
            x, y = (large[j], small[i]) if flip else (small[i], large[j])
            if x.name == y.name:
                names += 1
                full += canonical(x.arguments) == canonical(y.arguments)
        best = max(best, (names, full))
    return best


def brute_ordered(a: list[Call], r: list[Call]) -> tuple[int, int]:
    """The best (name pairs, argument matches) over every in-order pairing."""
    best = (0, 0)
    for k in range(min(len(a), len(r)) + 1):
        for ia in itertools.combinations(range(len(a)), k):
            for ir in itertools.combinations(range(len(r)), k):
                if all(a[i].name == r[j].name for i, j in zip(ia, ir, strict=True)):
                    full = sum(
                        canonical(a[i].arguments) == canonical(r[j].arguments)
                        for i, j in zip(ia, ir, strict=True)
                    )
                    best = max(best, (k, full))
    return best


def score(a: list[Call], r: list[Call], pairs: list[tuple[int, int]]) -> tuple[int, int]:
    assert len({i for i, _ in pairs}) == len(pairs) == len({j for _, j in pairs})
    assert all(a[i].name == r[j].name for i, j in pairs)
    return len(pairs), sum(args_match(a[i], r[j]) for i, j in pairs)


@settings(max_examples=300, deadline=None)
@given(CALLS, CALLS)
def test_unordered_pairing_is_optimal(a: list[Call], r: list[Call]) -> None:
    assert score(a, r, align_unordered(a, r, "exact")) == brute_unordered(a, r)


@settings(max_examples=300, deadline=None)
@given(CALLS, CALLS)
def test_ordered_pairing_is_optimal_and_in_order(a: list[Call], r: list[Call]) -> None:
    pairs = align_ordered(a, r, "exact")
    assert pairs == sorted(pairs)
    assert [j for _, j in pairs] == sorted(j for _, j in pairs)
    assert score(a, r, pairs) == brute_ordered(a, r)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5), st.integers(0, 5), st.data())
def test_max_matching_is_maximum(n: int, m: int, data: st.DataObject) -> None:
    edges = data.draw(
        st.sets(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, max(m - 1, 0))))
    )
    edges = {(i, j) for i, j in edges if i < n and j < m}
    got = max_matching(n, m, lambda i, j: (i, j) in edges)
    assert all(j < 0 or (i, j) in edges for i, j in enumerate(got))
    assert len([j for j in got if j >= 0]) == len({j for j in got if j >= 0})
    best = 0
    for k in range(min(n, m), 0, -1):
        if any(
            all((i, j) in edges for i, j in zip(left, perm, strict=True))
            for left in itertools.combinations(range(n), k)
            for perm in itertools.permutations(range(m), k)
        ):
            best = k
            break
    assert sum(j >= 0 for j in got) == best
