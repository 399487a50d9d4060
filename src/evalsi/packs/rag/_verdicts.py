"""The judge side of the rag pack: list verdicts, their checks, and the scores built from them.

Each judge metric asks for a JSON list of items with a yes/no flag (claims with ``supported``,
passages with ``relevant``...). The check rejects a list with a missing or malformed item (and,
for numbered items, a number missing, repeated or out of range), so the one repair request is
made; the score is then computed here from the flags, never taken from the judge, and the
items are kept in the score's metadata as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from evalsi.core import ParamError, Record, Score
from evalsi.evaluators import Evaluator, UsesJudge
from evalsi.packs._declare import builtin, clip, number, passed, yes_no
from evalsi.packs.judge import (
    EXAMPLE_JUDGES,
    Check,
    Evidence,
    PromptTemplate,
    Verdict,
    ask_template,
    judged,
    projected,
    projection_param,
)

SYSTEM = (
    "You are a careful, impartial evaluator of retrieval-augmented answers. Judge only what you "
    "are asked to judge, use only the text you are given, and answer in exactly the JSON format "
    "requested."
)
"""The system prompt of every rag-pack template."""


@dataclass(frozen=True, slots=True)
class ListVerdict:
    """The shape of a list verdict: ``{key: [{text: "...", flag: bool, ...}]}``.

    ``number`` names an item field that must hold each of 1..n exactly once (passages,
    citations); ``text`` names a field that must hold a non-empty string (claims,
    statements). ``non_empty`` rejects an empty list.
    """

    key: str
    flag: str
    text: str = ""
    number: str = ""
    non_empty: bool = False

    def check(self, n: int = 0) -> Check:
        """A check for ``ask_verdict``; it normalises flags to booleans and sorts by number."""

        def check(data: dict[str, Any]) -> str | None:
            items = data.get(self.key)
            if not isinstance(items, list):
                return f"no list {self.key!r}"
            if self.non_empty and not items:
                return f"{self.key!r} is empty"
            for i, item in enumerate(items):
                problem = self._item(item, i, n)
                if problem:
                    return problem
            if self.number:
                got = sorted(item[self.number] for item in items)
                if got != list(range(1, n + 1)):
                    return f"{self.key!r} must give each {self.number} from 1 to {n} exactly once"
                items.sort(key=lambda item: item[self.number])
            return None

        return check

    def _item(self, item: Any, i: int, n: int) -> str | None:
        where = f"{self.key}[{i}]"
        if not isinstance(item, dict):
            return f"{where} is not an object"
        flag = yes_no(item.get(self.flag))
        if flag is None:
            return f"{where} has no boolean {self.flag!r}"
        item[self.flag] = flag
        if self.text:
            text = item.get(self.text)
            if not isinstance(text, str) or not text.strip():
                return f"{where} has no {self.text!r} text"
        if self.number:
            number = item.get(self.number)
            if isinstance(number, str) and number.strip().isdigit():
                number = int(number.strip())
            if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= n:
                return f"{where} has no {self.number!r} from 1 to {n}"
            item[self.number] = number
        return None


def reason_of(item: dict[str, Any]) -> str:
    """An item's reason, if the judge gave one."""
    reason = item.get("reason")
    return reason.strip() if isinstance(reason, str) else ""


def evidence(
    items: list[dict[str, Any]], key: str, flag: str, *, chunks: bool = False
) -> list[dict[str, Any]]:
    """Each item's text (or number), flag, with ``chunks`` the passages it cites, and reason."""
    out = []
    for item in items:
        value = item[key]
        entry: dict[str, Any] = {key: value.strip() if isinstance(value, str) else value}
        entry[flag] = item[flag]
        cited = item.get("chunks")
        if chunks and isinstance(cited, list) and all(isinstance(c, int) for c in cited):
            entry["chunks"] = cited
        if reason_of(item):
            entry["reason"] = reason_of(item)
        out.append(entry)
    return out


def quote(text: str, limit: int = 160) -> str:
    """``text`` in double quotes, cut to about ``limit`` characters."""
    return f'"{clip(" ".join(text.split()), limit)}"'


def listed(items: list[dict[str, Any]], text: str) -> str:
    """Each item's ``text`` quoted, with its reason when it has one, for an explanation."""
    return "; ".join(quote(i[text]) + (f" ({i['reason']})" if "reason" in i else "") for i in items)


class RagJudge(UsesJudge):
    """Base of the rag-pack judge metrics: the ``judge``, ``pass_threshold`` and ``evidence``
    params. ``shows`` are the parts of a record the metric's prompt shows (its default
    evidence, and all a projection may include), ``requires`` those it cannot judge without."""

    metric: ClassVar[str] = ""
    template: ClassVar[PromptTemplate]
    shows: ClassVar[tuple[str, ...]]
    requires: ClassVar[tuple[str, ...]]

    def __init__(
        self,
        *,
        judge: str = "default",
        pass_threshold: float | None = None,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        if pass_threshold is not None and not 0.0 <= pass_threshold <= 1.0:
            raise ParamError(
                f"{self.metric}: param 'pass_threshold' must be between 0 and 1, "
                f"got {pass_threshold}"
            )
        self.judge = judge
        self.pass_threshold = pass_threshold
        self.projection = projection_param(
            self.metric, evidence, default=self.shows, requires=self.requires, shows=self.shows
        )

    def project(self, record: Record) -> tuple[Record, Evidence | None]:
        """The record as the ``evidence`` projection lets the judge see it (``Unavailable``
        over its budget), or as it is without one."""
        return projected(self.projection, record)

    async def ask(self, check: Check, evidence: Evidence | None, **values: str) -> Verdict:
        """Render the template with ``values`` and ask the judge, with one repair request."""
        return await ask_template(self.judge, self.template, check, evidence=evidence, **values)

    def scores(
        self, number: float, explanation: str, verdict: Verdict | None, **details: Any
    ) -> list[Score]:
        """The metric's score (with cost, judge metadata and ``details``) and, with a
        ``pass_threshold``, its ``<metric>-passed`` verdict."""
        score = Score(number=number, explanation=explanation, metadata=details)
        if verdict is not None:
            score = judged(score, self.judge, self.template, verdict.replies, verdict.evidence)
        out = [score]
        if self.pass_threshold is not None:
            out.append(Score(name=f"{self.metric}-passed", passed=number >= self.pass_threshold))
        return out


def declare_judged(cls: type[RagJudge], desc: str) -> Evaluator:
    """Register ``cls`` as ``builtin/<metric>@1.0.0`` of the rag pack."""
    name = cls.metric
    return builtin(
        "rag",
        name,
        number(name, desc),
        passed(f"{name}-passed", "score >= pass_threshold"),
        requires=cls.requires,
        example=f'evalsi.evaluate("examples/rag/rag.jsonl", ["{name}"], {EXAMPLE_JUDGES})',
    )(cls)
