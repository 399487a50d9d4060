"""``tool-call-accuracy``: did the agent call the right tools with the right arguments?"""

from __future__ import annotations

from typing import Any

from evalsi.core import Record, Score
from evalsi.packs._declare import builtin, few, number
from evalsi.packs.agent._calls import (
    ArgsMode,
    Call,
    agent_calls,
    align_ordered,
    align_unordered,
    args_match,
    expected_param,
    reference_calls,
)


class ToolCallAccuracy:
    """Compare the agent's tool calls with the reference calls: names, arguments, overall.

    The agent's calls are the ``tool_call`` steps of the trajectory; the reference calls come
    from ``reference`` (``{"tool_calls": [...]}`` or a list of calls) or the ``expected``
    param. The two lists are paired by tool name: with ``ordered`` (the default) as a common
    subsequence, so calls must come in the reference's order but extra or missing calls do
    not shift the rest; without it regardless of order. Among the pairings with the most name
    matches, the one with the most argument matches is taken. Then, with A agent calls and R
    reference calls:

    - ``tool-name-accuracy`` = pairs / max(A, R);
    - ``tool-args-accuracy`` = pairs whose arguments match / pairs (not emitted without pairs);
    - ``tool-call-accuracy`` = pairs whose arguments match / max(A, R), the overall score.

    max(A, R) counts both missing and extra calls against the agent; all three are 1 only
    when the calls match exactly. A reference of no calls and an agent that called nothing
    score 1. A reference call without ``arguments`` accepts any.

    Args:
        ordered: pair calls in order (True) or regardless of order (False).
        args: ``exact`` (the parsed arguments equal the reference's) or ``subset`` (every
            reference argument is present with an equal value; extra ones are allowed).
        expected: the reference calls for every record, instead of the record's reference.
    """

    def __init__(
        self, *, ordered: bool = True, args: ArgsMode = "exact", expected: list[Any] | None = None
    ) -> None:
        self.ordered = ordered
        self.args: ArgsMode = args
        self.expected = expected_param("tool-call-accuracy", expected)

    def __call__(self, record: Record) -> list[Score]:
        reference = reference_calls(record, self.expected)
        agent = agent_calls(record.trajectory)
        align = align_ordered if self.ordered else align_unordered
        pairs = align(agent, reference, self.args)
        correct = [(i, j) for i, j in pairs if args_match(agent[i], reference[j], self.args)]
        denominator = max(len(agent), len(reference))
        names = len(pairs) / denominator if denominator else 1.0
        overall = len(correct) / denominator if denominator else 1.0
        metadata = {
            "agent_calls": len(agent),
            "reference_calls": len(reference),
            "pairs": [[agent[i].step, j] for i, j in pairs],
            "args_correct": len(correct),
        }
        explanation = _explain(agent, reference, pairs, set(correct))
        scores = [
            Score(number=overall, explanation=explanation, metadata=metadata),
            Score(name="tool-name-accuracy", number=names),
        ]
        if pairs:
            scores.append(Score(name="tool-args-accuracy", number=len(correct) / len(pairs)))
        return scores


def _explain(
    agent: list[Call],
    reference: list[Call],
    pairs: list[tuple[int, int]],
    correct: set[tuple[int, int]],
) -> str:
    if not agent and not reference:
        return "no call expected and none made"
    head = (
        f"{len(correct)} of {max(len(agent), len(reference))} calls right "
        f"(agent {len(agent)}, reference {len(reference)})"
    )
    paired_a = {i for i, _ in pairs}
    missing = [j for j in range(len(reference)) if j not in {j for _, j in pairs}]
    extra = [i for i in range(len(agent)) if i not in paired_a]
    # an unpaired call that an unpaired reference call names: made, but out of order
    moved = []
    for i in list(extra):
        j = next((j for j in missing if reference[j].name == agent[i].name), None)
        if j is not None:
            moved.append(f"{agent[i].name} at step {agent[i].step}")
            extra.remove(i)
            missing.remove(j)
    parts = []
    if missing:
        parts.append("missing " + few([reference[j].shown() for j in missing]))
    if extra:
        parts.append(
            "unexpected " + few([f"{agent[i].shown()} at step {agent[i].step}" for i in extra])
        )
    if moved:
        parts.append("out of order: " + few(moved))
    wrong = [
        f"{agent[i].name} at step {agent[i].step} (expected {reference[j].shown()}, "
        f"got {agent[i].shown()})"
        for i, j in pairs
        if (i, j) not in correct
    ]
    if wrong:
        parts.append("wrong arguments: " + few(wrong))
    return head + ("; " + "; ".join(parts) if parts else "")


tool_call_accuracy = builtin(
    "agent",
    "tool-call-accuracy",
    number(
        "tool-call-accuracy",
        "calls with the right name and arguments / max(agent calls, reference calls)",
    ),
    number("tool-name-accuracy", "calls paired by name / max(agent calls, reference calls)"),
    number("tool-args-accuracy", "paired calls whose arguments match / paired calls"),
    requires=("trajectory",),
    example="evalsi eval --data examples/agent/trips.jsonl --evaluators tool-call-accuracy",
)(ToolCallAccuracy)
