"""Judges for evaluators: a model that grades, reached through a context, never a global.

A run (Score or Run) builds one ``JudgeClient`` per configured judge (connector, cache and
accounting: ``runs/_judges.py``) and sets them with ``use_judges`` around grading; an evaluator
asks for one by name with ``get_judge``. ``contextvars`` carry the mapping into every asyncio
task the grading starts. There is no default judge: with none configured under the
name, ``get_judge`` raises ``Skip`` with a reason that says how to configure one, and the runs
refuse up front (``check_judges``) a spec whose judge evaluators name an unconfigured judge.

Example:
    >>> class Fixed:
    ...     async def complete(self, messages, *, seed=None, template=""):
    ...         return JudgeReply('{"score": 1}')
    ...     def identity(self):
    ...         return {"model": "fixed"}
    >>> with use_judges({"default": Fixed()}):
    ...     get_judge("default").identity()
    {'model': 'fixed'}
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalsi.core import Message, Usage
from evalsi.evaluators._decorator import BoundEvaluator, Skip


@dataclass(slots=True)
class JudgeReply:
    """A judge's answer: its text, the tokens it cost (zero when ``cached``), and whether it
    came from the judge cache instead of a call.

    ``keep``, when set, stores the answer in the judge cache: the asker awaits it only once
    the answer parsed as a verdict, so a malformed answer is never cached (a re-run asks again).
    """

    text: str
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    keep: Callable[[], Awaitable[None]] | None = field(default=None, repr=False, compare=False)


class JudgeClient(Protocol):
    """What an evaluator can ask of a judge."""

    async def complete(
        self, messages: list[Message], *, seed: int | None = None, template: str = ""
    ) -> JudgeReply:
        """One answer to ``messages``; ``template`` is the prompt template's hash (part of the
        cache key, so a new template never reuses an old answer)."""
        ...

    def identity(self) -> dict[str, Any]:
        """The judge's identity for manifests and cache keys: plain JSON, no secret values."""
        ...


_JUDGES: contextvars.ContextVar[Mapping[str, JudgeClient] | None] = contextvars.ContextVar(
    "evalsi_judges", default=None
)


@contextlib.contextmanager
def use_judges(judges: Mapping[str, JudgeClient]) -> Iterator[None]:
    """Make ``judges`` (name → client) reachable through ``get_judge`` inside the block."""
    token = _JUDGES.set(dict(judges))
    try:
        yield
    finally:
        _JUDGES.reset(token)


def get_judge(name: str) -> JudgeClient:
    """The judge configured under ``name``; ``Skip`` (the record is SKIPPED) when none is."""
    judge = find_judge(name)
    if judge is None:
        raise Skip(
            f"no judge named {name!r} configured (there is no default judge: add it under "
            f"spec.judges, or pass judges={{{name!r}: {{...}}}} to evalsi.evaluate)"
        )
    return judge


def find_judge(name: str) -> JudgeClient | None:
    """The judge configured under ``name``, or ``None`` (for callers that report a missing
    judge their own way, such as a plugin's evaluator served elsewhere)."""
    return (_JUDGES.get() or {}).get(name)


class UsesJudge:
    """Base of class evaluators that call a judge: ``judge`` is the name they ask for."""

    judge: str = "default"


def judges_needed(bound: Iterable[BoundEvaluator]) -> dict[str, list[str]]:
    """Judge name → the instance names of the bound evaluators that ask for it."""
    out: dict[str, list[str]] = {}
    for b in bound:
        if isinstance(b.instance, UsesJudge):
            out.setdefault(b.instance.judge, []).append(b.name)
    return out


__all__ = [
    "JudgeClient",
    "JudgeReply",
    "UsesJudge",
    "find_judge",
    "get_judge",
    "judges_needed",
    "use_judges",
]
