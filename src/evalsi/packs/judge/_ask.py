"""Asking a judge for a JSON verdict: robust parsing, exactly one repair request, then an error.

A judge's answer is read as the first JSON object in it that the verdict's check accepts:
the whole text, a fenced block, or an object with text around it. When none is found the judge
is asked once more, with its answer and a request to answer in the format; if that fails too
the record is an ERROR that quotes the raw answer. A malformed verdict is never a silent 0, and
never cached: only an answer that parsed is kept, so a re-run asks the judge again.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evalsi.core import Message, Score, Usage, content_hash
from evalsi.evaluators import JudgeReply, get_judge
from evalsi.packs.judge._projection import Evidence

REPAIR_PROMPT = (
    "Your previous answer could not be read. Answer again with only the JSON object in the "
    "format asked for above: no other text, no code fence."
)
"""The one repair request (its exact text is part of the protocol: tests script it)."""

EXAMPLE_JUDGES = (
    'judges={"default": {"connector": "openai-compatible", '
    '"baseUrl": "http://127.0.0.1:8000/v1", "model": "qwen2.5-7b-instruct"}}'
)
"""The ``judges=`` argument the catalog examples show (a local OpenAI-compatible server)."""

_RAW_SHOWN = 300
MAX_SEARCHED = 32_768
"""How much of a judge's answer is searched for its verdict, in characters: a verdict is a
short object, and a judge (named by whoever wrote the spec) may answer anything, as long as
it likes; each ``{`` starts a decode that may read to the end, so the search grows with the
square of what it reads."""


def fenced_blocks(text: str) -> list[str]:
    """The bodies of the ```json (or untagged) fenced blocks of ``text``, in order; in time
    linear in ``text`` (a regular expression for this took 40 s on 40,000 spaces)."""
    blocks: list[str] = []
    at = 0
    while (start := text.find("```", at)) >= 0 and (end := text.find("```", start + 3)) >= 0:
        body = text[start + 3 : end]
        if body.startswith(("json", "JSON")):
            body = body[4:]
        blocks.append(body.lstrip())
        at = end + 3
    return blocks


Check = Callable[[dict[str, Any]], str | None]
"""Returns why a parsed object is not an acceptable verdict, or None when it is."""


class JudgeFormatError(Exception):
    """The judge did not answer in the format asked for, even after one repair request."""


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A versioned prompt: ``system`` and ``user`` with ``$name`` placeholders."""

    version: str
    system: str
    user: str

    @property
    def hash(self) -> str:
        return content_hash({"version": self.version, "system": self.system, "user": self.user})

    def render(self, **values: str) -> list[Message]:
        from string import Template

        return [
            Message(role="system", content=self.system),
            Message(role="user", content=Template(self.user).substitute(values)),
        ]


@dataclass(slots=True)
class Verdict:
    """A parsed verdict, what obtaining it cost, and the projected evidence the judge was shown
    (None without a projection)."""

    data: dict[str, Any]
    replies: list[JudgeReply] = field(default_factory=list)
    evidence: Evidence | None = None


def find_json_object(text: str, check: Check | None = None) -> tuple[dict[str, Any] | None, str]:
    """The first JSON object in ``text`` that ``check`` accepts, and else why none was found.

    Example:
        >>> find_json_object('Sure! {"score": 4, "explanation": "ok"} Hope it helps.')[0]
        {'score': 4, 'explanation': 'ok'}
    """
    candidates: list[Any] = []
    text = text[:MAX_SEARCHED]
    stripped = text.strip()
    with contextlib.suppress(ValueError):
        candidates.append(json.loads(stripped))
    for block in fenced_blocks(text):
        with contextlib.suppress(ValueError):
            candidates.append(json.loads(block))
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        candidates.append(value)
    problem = ""  # the outermost candidate's problem: inner objects are usually list items
    for value in candidates:
        if not isinstance(value, dict):
            continue
        why = check(value) if check is not None else None
        if why is None:
            return value, ""
        problem = problem or why
    return None, problem or "no JSON object found"


def prompt_identity(template: PromptTemplate, evidence: Evidence | None = None) -> str:
    """What the judge cache key holds of the prompt: the template's hash, and with a projection
    its fingerprint too (so two projections never share an answer, whatever they render)."""
    if evidence is None:
        return template.hash
    return content_hash({"template": template.hash, "evidence": evidence.fingerprint})


async def ask_verdict(
    judge_name: str,
    messages: list[Message],
    *,
    template: PromptTemplate,
    check: Check,
    evidence: Evidence | None = None,
) -> Verdict:
    """Ask ``judge_name`` and parse its verdict, with one repair request on a bad answer;
    ``evidence`` is the projection the messages were rendered from, if any."""
    judge = get_judge(judge_name)
    identity = prompt_identity(template, evidence)
    reply = await judge.complete(messages, template=identity)
    data, problem = find_json_object(reply.text, check)
    if data is not None:
        await _keep(reply)
        return Verdict(data, [reply], evidence)
    repair = [
        *messages,
        Message(role="assistant", content=reply.text),
        Message(role="user", content=REPAIR_PROMPT),
    ]
    second = await judge.complete(repair, template=identity)
    data, problem = find_json_object(second.text, check)
    if data is not None:
        await _keep(second)  # the first answer was malformed: it stays out of the cache
        return Verdict(data, [reply, second], evidence)
    raw = second.text if len(second.text) <= _RAW_SHOWN else second.text[:_RAW_SHOWN] + "…"
    raise JudgeFormatError(
        f"judge {judge_name!r} did not answer in the format asked for ({problem}), even after "
        f"one repair request; its answer: {raw!r}"
    )


async def ask_template(
    judge_name: str,
    template: PromptTemplate,
    check: Check,
    *,
    evidence: Evidence | None = None,
    **values: str,
) -> Verdict:
    """``ask_verdict`` with the messages ``template`` renders from ``values``."""
    messages = template.render(**values)
    return await ask_verdict(
        judge_name, messages, template=template, check=check, evidence=evidence
    )


async def _keep(reply: JudgeReply) -> None:
    """Cache an answer that parsed as a verdict (only those: see ``JudgeReply.keep``)."""
    if reply.keep is not None:
        await reply.keep()


def total_usage(replies: Sequence[JudgeReply]) -> Usage:
    """The tokens and cost of the calls behind ``replies`` (cached replies count zero)."""
    costs = [r.usage.cost_usd for r in replies]
    return Usage(
        input_tokens=sum(r.usage.input_tokens or 0 for r in replies),
        output_tokens=sum(r.usage.output_tokens or 0 for r in replies),
        total_tokens=sum(r.usage.tokens() or 0 for r in replies),
        cost_usd=None if any(c is None for c in costs) else float(sum(c or 0.0 for c in costs)),
    )


def judge_metadata(
    judge_name: str,
    template: PromptTemplate,
    replies: Sequence[JudgeReply],
    evidence: Evidence | None = None,
) -> dict[str, Any]:
    """What every judge score records: which judge and template, whether it was cached, and
    with a projection the evidence the judge was shown (its projection, size, fingerprint)."""
    out: dict[str, Any] = {
        "judge": judge_name,
        "judge_identity": get_judge(judge_name).identity(),
        "template": template.version,
        "template_hash": template.hash,
        "cached": all(r.cached for r in replies),
        "judge_calls": sum(not r.cached for r in replies),
        "repaired": len(replies) > 1,
    }
    if evidence is not None:
        out["evidence"] = evidence.summary()
    return out


def judged(
    score: Score,
    judge_name: str,
    template: PromptTemplate,
    replies: Sequence[JudgeReply],
    evidence: Evidence | None = None,
) -> Score:
    """``score`` with the cost of the calls behind ``replies`` and ``judge_metadata`` before
    its own metadata."""
    metadata = {**judge_metadata(judge_name, template, replies, evidence), **score.metadata}
    return replace(score, cost=total_usage(replies), metadata=metadata)


def number_check(low: float, high: float, key: str = "score") -> Check:
    """Accept an object whose ``key`` is a number in [low, high]."""

    def check(data: dict[str, Any]) -> str | None:
        value = data.get(key)
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                return f"{key!r} is not a number"
            data[key] = value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"no numeric {key!r}"
        if not low <= value <= high:
            return f"{key!r} {value} is outside {low:g}..{high:g}"
        return None

    return check


def bool_check(key: str) -> Check:
    """Accept an object whose ``key`` is a boolean (the strings true / false become one)."""

    def check(data: dict[str, Any]) -> str | None:
        value = data.get(key)
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            data[key] = value.strip().lower() == "true"
            return None
        return None if isinstance(value, bool) else f"no boolean {key!r}"

    return check


def explanation_of(data: dict[str, Any]) -> str:
    value = data.get("explanation", data.get("reasoning", ""))
    return value if isinstance(value, str) else json.dumps(value)
