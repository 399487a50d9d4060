"""``loop-detection``: the agent repeating the same call instead of making progress."""

from __future__ import annotations

from collections import Counter
from itertools import groupby
from operator import attrgetter

from evalsi.core import Record, Score
from evalsi.packs._declare import builtin, check_at_least, lower, passed
from evalsi.packs.agent._calls import agent_calls, check_kinds


class LoopDetection:
    """Fail when the agent repeats an identical call: same name, same (canonical) arguments.

    With ``consecutive`` (the default) a loop is a run of at least ``threshold`` identical
    calls in a row, and a redundant call is one identical to the call just before it. Without
    it, a loop is a call made at least ``threshold`` times anywhere in the trajectory, and a
    redundant call is any repeat of an earlier identical call. Emits ``loop-detection``
    (passed: no loop) and ``redundant-calls`` (the count). A retry after an error counts as a
    repeat too: retrying identically ``threshold`` times is the loop this looks for. Calls
    recorded without arguments compare equal by name alone.

    Args:
        threshold: how many identical calls make a loop (at least 2).
        consecutive: count only calls in a row (True) or anywhere in the trajectory (False).
        kinds: the step kinds whose calls are compared.
    """

    def __init__(
        self, *, threshold: int = 3, consecutive: bool = True, kinds: list[str] | None = None
    ) -> None:
        check_at_least("loop-detection", "threshold", threshold, 2)
        self.threshold = threshold
        self.consecutive = consecutive
        self.kinds = check_kinds("loop-detection", kinds or ["tool_call"])

    def __call__(self, record: Record) -> list[Score]:
        calls = agent_calls(record.trajectory, self.kinds)
        if self.consecutive:
            runs = [list(run) for _, run in groupby(calls, key=attrgetter("key"))]
            redundant = sum(len(run) - 1 for run in runs)
            loops = [run for run in runs if len(run) >= self.threshold]
            found = [
                f"{run[0].key} {len(run)} times in a row (steps {run[0].step}-{run[-1].step})"
                for run in loops
            ]
        else:
            counts = Counter(c.key for c in calls)
            redundant = sum(n - 1 for n in counts.values())
            first: dict[str, int] = {}
            for c in calls:
                first.setdefault(c.key, c.step)
            found = [
                f"{key} {n} times (first at step {first[key]})"
                for key, n in counts.items()
                if n >= self.threshold
            ]
        if found:
            explanation = "loop: " + "; ".join(found)
        else:
            explanation = f"no call repeated {self.threshold} times" + (
                " in a row" if self.consecutive else ""
            )
        return [
            Score(passed=not found, explanation=explanation, metadata={"calls": len(calls)}),
            Score(name="redundant-calls", number=redundant),
        ]


loop_detection = builtin(
    "agent",
    "loop-detection",
    passed("loop-detection", "no identical call repeated"),
    lower("redundant-calls", "calls repeating an identical one"),
    requires=("trajectory",),
    example="evalsi eval --data examples/agent/trips.jsonl --evaluators loop-detection "
    "--param loop-detection.threshold=2",
)(LoopDetection)
