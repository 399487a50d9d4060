"""The calls an agent made, the calls it should have made, and how the two are paired.

An agent call is a step of ``record.trajectory`` of a chosen kind (``tool_call`` by default):
its ``tool_call`` (name, arguments) when it has one, else the step's ``name`` and ``input``.
Records built from dataset rows and from traces give the same steps, so the metrics built on
these helpers do not care which way a record came in.

The expected calls come from the first of: an ``expected`` param (the same for every record),
``reference`` as ``{"tool_calls": [...]}``, ``reference`` as a bare list of calls, or
``reference`` as a chat transcript (the ``tool_calls`` of its assistant messages, in order).
A call is ``{"name": ..., "arguments": {...}}`` (OpenAI's ``{"function": {...}}`` nesting and
arguments as a JSON string are accepted) or a bare name. A reference call without
``arguments`` accepts any arguments.

Arguments are compared as parsed JSON: key order and ``1`` vs ``1.0`` do not matter, ``true``
is not ``1``, strings compare exactly (no case or Unicode folding). A call recorded without
arguments has ``{}``.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import orjson

from evalsi.core import JsonValue, ParamError, Record, StepKind, Trajectory
from evalsi.evaluators import Skip

ArgsMode = Literal["exact", "subset"]
"""``exact``: the arguments equal the reference's; ``subset``: every argument the reference
gives is present with an equal value (extra arguments allowed)."""

STEP_KINDS: frozenset[str] = frozenset(get_args(StepKind))

NO_REFERENCE = (
    'record has no reference tool calls: give reference {"tool_calls": [{"name": ..., '
    "\"arguments\": {...}}]} (or a list of calls), or the param 'expected'"
)

_CALL_KEYS = frozenset({"name", "arguments", "id", "type", "function"})


@dataclass(frozen=True, slots=True)
class Call:
    """One call: a name and parsed arguments. ``step`` is its 1-based step number in the
    trajectory (0 for a reference call); ``constrained`` is False for a reference call that
    leaves its arguments open."""

    name: str
    arguments: JsonValue
    step: int = 0
    constrained: bool = True
    canon: str = field(init=False, repr=False, compare=False)
    """The canonical arguments, computed once: pairing compares them many times."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "canon", canonical(self.arguments))

    @property
    def key(self) -> str:
        """Name and canonical arguments: identical calls have the same key."""
        return f"{self.name}({self.canon})"

    def shown(self) -> str:
        """How explanations show the call."""
        return self.key if self.constrained else self.name


def check_kinds(evaluator_name: str, kinds: Iterable[str]) -> tuple[str, ...]:
    """The step kinds a ``kinds`` param names; a ParamError for an unknown or empty list."""
    out = tuple(kinds)
    if not out:
        raise ParamError(f"{evaluator_name}: param 'kinds' must name at least one step kind")
    unknown = sorted(set(out) - STEP_KINDS)
    if unknown:
        raise ParamError(
            f"{evaluator_name}: param 'kinds' has unknown step kind(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(STEP_KINDS))})"
        )
    return out


def parse_arguments(value: Any) -> JsonValue:
    """Arguments as parsed JSON: a JSON string is decoded (kept as is when it is not JSON),
    ``None`` becomes ``{}``."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            parsed: JsonValue = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return {} if parsed is None else parsed
    return value


class _NotFinite(Exception):
    """A NaN or an infinity, which orjson would write as null."""


def _norm(value: Any, *, finite: bool = False) -> Any:
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        if finite and not math.isfinite(value):
            raise _NotFinite
        return value
    if isinstance(value, dict):
        return {str(k): _norm(v, finite=finite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_norm(v, finite=finite) for v in value]
    return value


def canonical(value: Any) -> str:
    """Compact JSON with sorted keys and integral floats as integers: equal values, equal text.

    orjson renders it several times faster than ``json`` (a rescore of a large agent bundle
    spends a tenth of its time here); what orjson would refuse or write differently (integers
    past 64 bits, NaN, infinities) takes the ``json`` path, whose text is the same for
    everything else."""
    try:
        return orjson.dumps(_norm(value, finite=True), option=orjson.OPT_SORT_KEYS).decode()
    except (_NotFinite, TypeError, orjson.JSONEncodeError):
        return json.dumps(_norm(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def args_match(agent: Call, reference: Call, mode: ArgsMode = "exact") -> bool:
    """Whether the agent call's arguments satisfy the reference call's."""
    if not reference.constrained:
        return True
    want, got = reference.arguments, agent.arguments
    if mode == "subset" and isinstance(want, dict) and isinstance(got, dict):
        return all(k in got and canonical(got[k]) == canonical(v) for k, v in want.items())
    return agent.canon == reference.canon


def agent_calls(trajectory: Trajectory | None, kinds: Sequence[str] = ("tool_call",)) -> list[Call]:
    """The trajectory's steps of the given kinds, as calls, in order."""
    if trajectory is None:
        return []
    calls = []
    for i, step in enumerate(trajectory.steps, 1):
        if step.kind not in kinds:
            continue
        if step.tool_call is not None:
            name, args = step.tool_call.name, step.tool_call.arguments
        else:
            name, args = step.name, step.input
        calls.append(Call(name, parse_arguments(args), step=i))
    return calls


def parse_calls(value: Any, source: str) -> list[Call]:
    """Reference calls from plain data; ValueError naming ``source`` when malformed."""
    if not isinstance(value, list):
        raise ValueError(
            f"{source}: expected a list of tool calls ({{'name', 'arguments'}} objects or "
            f"names), got {type(value).__name__}"
        )
    return [_parse_call(item, f"{source}[{i}]") for i, item in enumerate(value)]


def _parse_call(item: Any, where: str) -> Call:
    if isinstance(item, str):
        if not item:
            raise ValueError(f"{where}: a tool name must not be empty")
        return Call(item, {}, constrained=False)
    if not isinstance(item, dict):
        raise ValueError(
            f"{where}: expected a call object or a tool name, got {type(item).__name__}"
        )
    unknown = sorted(set(map(str, item)) - _CALL_KEYS)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(unknown)}; a call has 'name' and optionally "
            "'arguments'"
        )
    fn = item.get("function", item)
    if not isinstance(fn, dict):
        raise ValueError(f"{where}.function: expected an object, got {type(fn).__name__}")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.name: expected a non-empty string, got {name!r}")
    if "arguments" not in fn:
        return Call(name, {}, constrained=False)
    args = fn["arguments"]
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            raise ValueError(
                f"{where}.arguments: a string must hold JSON arguments, got {args!r}"
            ) from None
    return Call(name, {} if args is None else args)


def reference_calls(record: Record, expected: list[Call] | None) -> list[Call]:
    """The calls the record should have made: the ``expected`` param, else the reference.

    ``Skip`` when the record has no reference calls; ValueError when they are malformed.
    """
    if expected is not None:
        return expected
    ref = record.reference
    if ref is None:
        raise Skip(NO_REFERENCE)
    if ref.kind == "messages":
        assert ref.messages is not None
        return [
            Call(c.name, parse_arguments(c.arguments))
            for m in ref.messages
            if m.role == "assistant"
            for c in m.tool_calls
        ]
    value = ref.json
    if isinstance(value, list):
        return parse_calls(value, "reference")
    if isinstance(value, dict) and "tool_calls" in value:
        return parse_calls(value["tool_calls"], "reference.tool_calls")
    raise Skip(NO_REFERENCE)


def expected_param(evaluator_name: str, value: list[Any] | None) -> list[Call] | None:
    """The ``expected`` param parsed once at bind time (a ParamError when malformed)."""
    if value is None:
        return None
    try:
        return parse_calls(value, f"{evaluator_name}: param 'expected'")
    except ValueError as e:
        raise ParamError(str(e)) from None


# -- pairing -----------------------------------------------------------------------------------


def max_matching(n_left: int, n_right: int, compatible: Callable[[int, int], bool]) -> list[int]:
    """A maximum bipartite matching (augmenting paths, breadth first): for each left index the
    right index it is matched to, or -1. Deterministic: earlier indices are tried first."""
    edges = [[j for j in range(n_right) if compatible(i, j)] for i in range(n_left)]
    match_l, match_r = [-1] * n_left, [-1] * n_right
    for u in range(n_left):
        parent: dict[int, int] = {}
        queue, found = deque([u]), -1
        while queue and found < 0:
            x = queue.popleft()
            for v in edges[x]:
                if v in parent:
                    continue
                parent[v] = x
                if match_r[v] < 0:
                    found = v
                    break
                queue.append(match_r[v])
        v = found
        while v >= 0:
            x = parent[v]
            v_next = match_l[x]
            match_l[x], match_r[v] = v, x
            v = v_next if x != u else -1
    return match_l


def align_ordered(
    agent: Sequence[Call], reference: Sequence[Call], mode: ArgsMode
) -> list[tuple[int, int]]:
    """The in-order pairing (a common subsequence of names) with the most name matches, and
    among those the most argument matches: (agent index, reference index) pairs. On a tie the
    earlier reference calls are kept. Quadratic: fine for the hundreds of calls of a session."""
    n, m = len(agent), len(reference)
    # best[i][j]: (names, full) over agent[i:] and reference[j:]
    best = [[(0, 0)] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            cand = max(best[i + 1][j], best[i][j + 1])
            if agent[i].name == reference[j].name:
                names, full = best[i + 1][j + 1]
                ok = args_match(agent[i], reference[j], mode)
                cand = max(cand, (names + 1, full + ok))
            best[i][j] = cand
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if agent[i].name == reference[j].name:
            names, full = best[i + 1][j + 1]
            if best[i][j] == (names + 1, full + args_match(agent[i], reference[j], mode)):
                pairs.append((i, j))
                i, j = i + 1, j + 1
                continue
        if best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    return pairs


def align_unordered(
    agent: Sequence[Call], reference: Sequence[Call], mode: ArgsMode
) -> list[tuple[int, int]]:
    """The pairing by name, regardless of order, with the most argument matches: a maximum
    matching of (name, arguments) matches, then the remaining calls of each name in order."""
    full = max_matching(
        len(agent),
        len(reference),
        lambda i, j: (
            agent[i].name == reference[j].name and args_match(agent[i], reference[j], mode)
        ),
    )
    used = {j for j in full if j >= 0}
    pairs = [(i, j) for i, j in enumerate(full) if j >= 0]
    for i, j in enumerate(full):
        if j >= 0:
            continue
        for k, ref in enumerate(reference):
            if k not in used and ref.name == agent[i].name:
                pairs.append((i, k))
                used.add(k)
                break
    return sorted(pairs)
