"""``trajectory-match``: the agent's sequence of calls against a reference trajectory."""

from __future__ import annotations

from typing import Any, Literal

from evalsi.core import Record, Score
from evalsi.packs._declare import builtin, few, passed
from evalsi.packs.agent._calls import (
    ArgsMode,
    Call,
    agent_calls,
    args_match,
    check_kinds,
    expected_param,
    max_matching,
    reference_calls,
)

Mode = Literal["strict", "unordered", "subset", "superset"]


class TrajectoryMatch:
    """Pass when the agent's calls match the reference trajectory under the chosen mode.

    The agent's calls are the trajectory's steps of the ``kinds`` (tool calls by default; add
    ``agent`` to follow hand-offs, or ``retrieval``); the reference is read as for
    ``tool-call-accuracy``. Two calls match when their names are equal and, with
    ``match_args``, their arguments match. The modes compare the calls as multisets (a call
    made twice must be matched twice):

    - ``strict``: the same calls in the same order, none extra;
    - ``unordered``: the same calls in any order;
    - ``subset``: every agent call is matched by a reference call (the agent did nothing the
      reference does not);
    - ``superset``: every reference call is matched by an agent call (extra calls allowed).

    strict implies unordered; unordered holds exactly when subset and superset both do. The
    explanation names the first difference.

    Args:
        mode: ``strict``, ``unordered``, ``subset`` or ``superset``.
        match_args: compare arguments too, not only names.
        args: with ``match_args``, ``exact`` or ``subset`` argument matching.
        kinds: the step kinds that make up the agent's sequence.
        expected: the reference trajectory for every record, instead of the record's reference.
    """

    def __init__(
        self,
        *,
        mode: Mode = "strict",
        match_args: bool = False,
        args: ArgsMode = "exact",
        kinds: list[str] | None = None,
        expected: list[Any] | None = None,
    ) -> None:
        self.mode: Mode = mode
        self.match_args = match_args
        self.args: ArgsMode = args
        self.kinds = check_kinds("trajectory-match", kinds or ["tool_call"])
        self.expected = expected_param("trajectory-match", expected)

    def _same(self, a: Call, r: Call) -> bool:
        return a.name == r.name and (not self.match_args or args_match(a, r, self.args))

    def _shown(self, call: Call) -> str:
        return call.shown() if self.match_args else call.name

    def __call__(self, record: Record) -> Score:
        reference = reference_calls(record, self.expected)
        agent = agent_calls(record.trajectory, self.kinds)
        why = (self._strict if self.mode == "strict" else self._multiset)(agent, reference)
        metadata = {
            "mode": self.mode,
            "agent": [self._shown(c) for c in agent],
            "reference": [self._shown(c) for c in reference],
        }
        if why:
            return Score(passed=False, explanation=why, metadata=metadata)
        summary = f"{self.mode}: agent calls {len(agent)}, reference calls {len(reference)}"
        return Score(passed=True, explanation=f"match ({summary})", metadata=metadata)

    def _strict(self, agent: list[Call], reference: list[Call]) -> str:
        for k, (a, r) in enumerate(zip(agent, reference, strict=False), 1):
            if not self._same(a, r):
                return f"call {k} (step {a.step}): expected {self._shown(r)}, got {self._shown(a)}"
        if len(agent) < len(reference):
            nxt = reference[len(agent)]
            return (
                f"the agent made {len(agent)} of {len(reference)} calls; "
                f"call {len(agent) + 1} should be {self._shown(nxt)}"
            )
        if len(agent) > len(reference):
            extra = agent[len(reference)]
            return (
                f"the agent made {len(agent)} calls, the reference {len(reference)}; the first "
                f"extra is {self._shown(extra)} at step {extra.step}"
            )
        return ""

    def _multiset(self, agent: list[Call], reference: list[Call]) -> str:
        matched = max_matching(
            len(agent), len(reference), lambda i, j: self._same(agent[i], reference[j])
        )
        used = {j for j in matched if j >= 0}
        unexpected = [
            f"{self._shown(a)} at step {a.step}"
            for a, j in zip(agent, matched, strict=True)
            if j < 0
        ]
        missing = [self._shown(r) for j, r in enumerate(reference) if j not in used]
        problems = []
        if missing and self.mode in ("unordered", "superset"):
            problems.append("missing reference call(s): " + few(missing))
        if unexpected and self.mode in ("unordered", "subset"):
            problems.append("call(s) not in the reference: " + few(unexpected))
        return "; ".join(problems)


trajectory_match = builtin(
    "agent",
    "trajectory-match",
    passed(
        "trajectory-match",
        "the agent's calls match the reference under the mode (strict by default)",
    ),
    requires=("trajectory",),
    example="evalsi eval --data examples/agent/trips.jsonl --evaluators trajectory-match "
    "--param trajectory-match.mode=unordered",
)(TrajectoryMatch)
