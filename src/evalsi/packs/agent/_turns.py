"""Turns of a transcript, and the scope a predicate's ``turn`` param selects.

A turn is the agent's response to one user message. A new turn begins at each ``message``
step whose role is the user's: the step's ``name`` is ``user``, or its ``input`` (else its
``output``) is an object with ``"role": "user"``. Steps before the first user message are a
turn of their own when the agent did something there (the request came in the record's
``input``), and otherwise (a system message, say) belong to the first user turn. A trajectory
without user message steps is one turn.

``turn`` is a number N (1-based), ``last``, or ``any`` (the default): the whole transcript, so
a call in any turn counts and counts are totals. A turn past the last one cannot be judged: the
record is SKIPPED.

A turn's answer is, for the last turn, the record's ``output``; else (and when the record has
none) the text of the turn's last assistant ``message`` step, else of its last ``llm_call``
step (its ``output`` as text, or the ``text`` the built-in loop records).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalsi.core import ParamError, Record, Step
from evalsi.evaluators import Skip

Turn = int | str
"""A turn number (1-based), ``"last"`` or ``"any"``."""


def check_turn(evaluator: str, value: Any) -> Turn:
    """The ``turn`` param checked, a digit string read as its number; else a ParamError."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and value.strip().lower() in ("last", "any"):
        return value.strip().lower()
    raise ParamError(
        f"{evaluator}: param 'turn' must be a turn number (1, 2, ...), 'last' or 'any', "
        f"got {value!r}"
    )


def role_of(step: Step) -> str:
    """The role of a ``message`` step: its name when it is one, else its input's or output's."""
    if step.name in ("user", "assistant", "system", "tool"):
        return step.name
    for value in (step.input, step.output):
        if isinstance(value, dict) and isinstance(value.get("role"), str):
            return str(value["role"])
    return ""


def text_of(value: Any) -> str | None:
    """The text a step holds: a string, or the ``content`` or ``text`` string of an object."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("content", "text"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return None


def split_turns(steps: list[Step]) -> list[list[tuple[int, Step]]]:
    """The turns, each its (1-based step number, step) pairs; always at least one turn."""
    turns: list[list[tuple[int, Step]]] = [[]]
    seen_user = False
    for i, step in enumerate(steps, 1):
        if step.kind == "message" and role_of(step) == "user":
            # the first user message opens turn 1 unless the agent already acted before it
            if seen_user or any(s.kind != "message" for _, s in turns[-1]):
                turns.append([])
            seen_user = True
        turns[-1].append((i, step))
    return turns


@dataclass(frozen=True, slots=True)
class TurnScope:
    """The steps a predicate judges: ``turns`` holds (turn number, its steps) in order;
    ``where`` is how explanations name it (``" in turn 2"``, ``""`` for the transcript)."""

    turns: list[tuple[int, list[tuple[int, Step]]]]
    where: str
    count: int
    """How many turns the whole transcript has."""

    @property
    def steps(self) -> list[tuple[int, Step]]:
        return [s for _, steps in self.turns for s in steps]

    def numbers(self) -> set[int]:
        return {i for i, _ in self.steps}


def scope_of(record: Record, turn: Turn) -> TurnScope:
    """The turns ``turn`` selects; Skip for a turn the transcript did not reach."""
    steps = record.trajectory.steps if record.trajectory is not None else []
    turns = list(enumerate(split_turns(steps), 1))
    n = len(turns)
    if turn == "any":
        return TurnScope(turns, "", n)
    if turn == "last":
        return TurnScope(turns[-1:], f" in the last turn (turn {n})" if n > 1 else "", n)
    assert isinstance(turn, int)
    if turn > n:
        raise Skip(f"no turn {turn}: the transcript has {n} turn(s)")
    return TurnScope([turns[turn - 1]], f" in turn {turn}", n)


def answer_of(record: Record, number: int, steps: list[tuple[int, Step]], count: int) -> str | None:
    """The answer of turn ``number`` of ``count`` (see the module docstring); None if none."""
    if number == count and record.output is not None:
        return record.output.as_text()
    for kind in ("message", "llm_call"):
        for _, step in reversed(steps):
            if step.kind != kind or (kind == "message" and role_of(step) != "assistant"):
                continue
            text = (
                text_of(step.output)
                if kind == "llm_call"
                else text_of(step.output) or text_of(step.input)
            )
            if text:
                return text
    return None
