"""``session-goal-completion``: a judge decides whether the user's goal was achieved."""

from __future__ import annotations

from typing import Any

from evalsi.core import Content, JsonValue, Message, ParamError, Record, Score, Step
from evalsi.evaluators import Skip, UsesJudge
from evalsi.packs._declare import builtin, passed
from evalsi.packs.agent._calls import canonical, parse_arguments
from evalsi.packs.judge import (
    EXAMPLE_JUDGES,
    Evidence,
    PromptTemplate,
    ask_verdict,
    bool_check,
    explanation_of,
    judged,
    projected,
    projection_param,
)

GOAL_TEMPLATE = PromptTemplate(
    version="session-goal-completion/v1",
    system=(
        "You are a careful, impartial evaluator of AI agents. Judge only what you are asked to "
        "judge, and answer in exactly the JSON format requested."
    ),
    user="""Decide whether the agent achieved the user's goal in the session below.
$goal
# Conversation
$conversation

# What the agent did
$steps

# Final answer
$answer

The goal is achieved when the user got what they asked for: the actions the goal needed \
were carried out (check the tool results, not only what the agent claims) and the final \
answer gives the user what they wanted. Asking for information the user never gave, \
stopping half way, or an error the agent did not recover from means not achieved. Answer \
with only a JSON object:
{"goal": "<the user's goal, in one sentence>", "achieved": true or false, \
"explanation": "<one or two sentences>"}""",
)
"""The versioned prompt of ``session-goal-completion``; its hash is in every score's metadata."""

SHOWN = ("input", "output", "trajectory.steps", "trajectory.tool_calls", "metadata.goal")
"""The parts the prompt has a section of its own for; any other part an ``evidence``
projection includes gets a ``# <part>`` section after the goal."""

_NONE = "(none)"
_ELIDED = "... ({n} steps left out) ..."


_check = bool_check("achieved")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _value(value: JsonValue) -> str:
    return value if isinstance(value, str) else canonical(value)


def _args(value: JsonValue) -> str:
    return _value(parse_arguments(value))


def conversation(content: Content | None) -> str:
    """A chat as ``role: text`` lines (tool calls shown), or the content's text."""
    if content is None:
        return _NONE
    messages = content.messages
    if messages is None:
        return content.as_text()
    lines = []
    for m in messages:
        text = m.content or ""
        calls = ", ".join(f"{c.name}({_args(c.arguments)})" for c in m.tool_calls)
        if calls:
            text = f"{text} [calls {calls}]".strip()
        lines.append(f"{m.role}: {text}")
    return "\n".join(lines)


def step_line(number: int, step: Step, limit: int) -> str:
    """One step as the judge sees it: kind, name or call, its result or error."""
    if step.tool_call is not None:
        what = f"{step.tool_call.name}({_args(step.tool_call.arguments)})"
    elif step.kind in ("tool_call", "retrieval") and step.input is not None:
        what = f"{step.name}({_value(step.input)})"
    else:
        what = step.name or "-"
    line = f"{number}. [{step.kind}] {_clip(what, limit)}"
    if step.output is not None:
        line += f" -> {_clip(_value(step.output), limit)}"
    if step.error:
        line += f" ERROR: {_clip(step.error, limit)}"
    return line


def steps_block(steps: list[Step], step_chars: int, max_chars: int) -> str:
    """The steps, one line each; past ``max_chars`` the middle steps are left out."""
    lines = [step_line(i, s, step_chars) for i, s in enumerate(steps, 1)]
    if not lines:
        return _NONE
    if sum(len(line) + 1 for line in lines) <= max_chars:
        return "\n".join(lines)
    head: list[str] = []
    tail: list[str] = []
    budget = max_chars - len(_ELIDED) - 10
    lo, hi = 0, len(lines) - 1
    while lo <= hi:  # alternate: the first steps and the last ones matter most
        take_head = len(head) <= len(tail)
        line = lines[lo] if take_head else lines[hi]
        if len(line) + 1 > budget:
            break
        budget -= len(line) + 1
        if take_head:
            head.append(line)
            lo += 1
        else:
            tail.append(line)
            hi -= 1
    left_out = len(lines) - len(head) - len(tail)
    middle = [_ELIDED.format(n=left_out)] if left_out else []
    return "\n".join([*head, *middle, *reversed(tail)])


class SessionGoalCompletion(UsesJudge):
    """A judge decides whether the agent achieved the user's goal over the whole session.

    The prompt (template ``session-goal-completion/v1``, its hash in the score's metadata)
    shows the goal when one is given (the ``goal`` param, else ``metadata.goal``), the
    conversation (``input``: a chat or a request), every step of the trajectory (kind, name or
    call with its arguments, result, error; each clipped to ``step_chars``, and the middle
    steps left out past ``max_chars``) and the final ``output``, and asks for
    ``{"goal", "achieved", "explanation"}``. Emits pass/fail with the judge's explanation;
    the goal as the judge read it is in ``metadata.goal``. Parsing, the one repair request,
    caching and cost are as for ``llm-judge``. A record with no goal (no param, no
    ``metadata.goal``, no input) or with nothing the agent did (no trajectory, no output) is
    SKIPPED.

    Args:
        goal: the user's goal, the same for every record (else ``metadata.goal`` or the input).
        judge: the name of the configured judge to ask.
        step_chars: the most characters shown of a step's call, result or error.
        max_chars: the most characters of steps shown in all.
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``
            (default: input, output, trajectory.steps and, without the ``goal`` param,
            metadata.goal; no limit); over ``max_bytes`` the record is SKIPPED unavailable,
            the judge not asked. ``step_chars`` and ``max_chars`` still shorten the steps shown.
    """

    def __init__(
        self,
        *,
        goal: str | None = None,
        judge: str = "default",
        step_chars: int = 500,
        max_chars: int = 20000,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        if goal is not None and not goal.strip():
            raise ParamError("session-goal-completion: param 'goal' must not be empty")
        if step_chars < 20:
            raise ParamError("session-goal-completion: param 'step_chars' must be >= 20")
        if max_chars < step_chars:
            raise ParamError("session-goal-completion: param 'max_chars' must be >= step_chars")
        self.goal = goal
        self.judge = judge
        self.step_chars = step_chars
        self.max_chars = max_chars
        default = ["input", "output", "trajectory.steps"] + ([] if goal else ["metadata.goal"])
        self.projection = projection_param("session-goal-completion", evidence, default=default)

    def messages(self, record: Record, evidence: Evidence | None = None) -> list[Message]:
        """The prompt for ``record`` (``Skip`` when the record cannot be judged); with
        ``evidence``, a section for each projected part the prompt has no place for."""
        goal = self.goal or record.metadata.get("goal")
        if goal is not None and not isinstance(goal, str):
            raise ValueError(f"metadata.goal: expected a string, got {type(goal).__name__}")
        steps = record.trajectory.steps if record.trajectory is not None else []
        if not goal and record.input is None:
            raise Skip("record has no goal: give an input, metadata.goal or the param 'goal'")
        if not steps and record.output is None:
            raise Skip("record has no trajectory and no output: nothing the agent did to judge")
        extra = evidence.sections(SHOWN) if evidence is not None else ""
        return GOAL_TEMPLATE.render(
            goal=(f"\n# The user's goal\n{goal}\n" if goal else "") + extra,
            conversation=conversation(record.input),
            steps=steps_block(steps, self.step_chars, self.max_chars),
            answer=_NONE if record.output is None else conversation(record.output),
        )

    async def __call__(self, record: Record) -> Score:
        record, evidence = projected(self.projection, record)
        messages = self.messages(record, evidence)
        verdict = await ask_verdict(
            self.judge, messages, template=GOAL_TEMPLATE, check=_check, evidence=evidence
        )
        goal = verdict.data.get("goal")
        score = Score(
            passed=bool(verdict.data["achieved"]),
            explanation=explanation_of(verdict.data),
            metadata={"goal": goal} if isinstance(goal, str) else {},
        )
        return judged(score, self.judge, GOAL_TEMPLATE, verdict.replies, evidence)


session_goal_completion = builtin(
    "agent",
    "session-goal-completion",
    passed("session-goal-completion", "the judge found the user's goal achieved"),
    requires=(),
    example='evalsi.evaluate("examples/agent/trips.jsonl", ["session-goal-completion"], '
    + EXAMPLE_JUDGES
    + ")",
)(SessionGoalCompletion)
