"""``faithfulness`` and ``citation-accuracy``: is the answer backed by the retrieved context?

Faithfulness (also called groundedness: one metric, registered once) has the judge split the
answer into claims and mark each as supported by the context or not, in one call. Citation
accuracy finds the answer's citations itself and has the judge check each cited passage
against the sentence citing it. Both scores are computed from the verdict lists.
"""

from __future__ import annotations

from typing import Any

from evalsi.core import Record, Score
from evalsi.evaluators import Skip
from evalsi.packs.judge import PromptTemplate
from evalsi.packs.rag._chunks import answer_of, passages_block, question_of
from evalsi.packs.rag._citations import citations
from evalsi.packs.rag._verdicts import (
    SYSTEM,
    ListVerdict,
    RagJudge,
    declare_judged,
    evidence,
    listed,
    quote,
    reason_of,
)

FAITHFULNESS_TEMPLATE = PromptTemplate(
    version="faithfulness/v1",
    system=SYSTEM,
    user="""Check whether an answer is supported by the retrieved context it was written from.

# Question
$question

# Context
$context

# Answer
$answer

Split the answer into its factual claims: short, self-contained statements of one fact each \
(leave out greetings, hedges and questions back to the user). For each claim, decide whether \
the context supports it: it is supported when the context states it or it follows directly \
from the context; it is not supported when the context contradicts it or does not mention it, \
even if it is true. Answer with only a JSON object:
{"claims": [{"claim": "<the claim>", "supported": true or false, \
"chunks": [<numbers of the passages that support it>], \
"reason": "<for an unsupported claim: what the context lacks or says instead>"}]}""",
)
"""The versioned prompt of ``faithfulness``."""

CITATION_TEMPLATE = PromptTemplate(
    version="citation-accuracy/v1",
    system=SYSTEM,
    user="""Check whether each cited passage supports the sentence that cites it.

# Cited passages
$context

# Citations
$citations

A citation is correct when the cited passage supports the sentence: the passage states it, or \
it follows directly from the passage. When a sentence cites several passages, each needs to \
support only the part of the sentence it is cited for. A passage that is merely on the same \
topic, or that contradicts the sentence, does not support it. Answer with only a JSON object, \
one entry for each citation from 1 to $n:
{"citations": [{"citation": <citation number>, "supported": true or false, \
"reason": "<for an unsupported citation: why not>"}]}""",
)
"""The versioned prompt of ``citation-accuracy``."""

CLAIMS = ListVerdict("claims", "supported", text="claim")
CITED = ListVerdict("citations", "supported", number="citation")


def _question(record: Record) -> str:
    return question_of(record) or "(not given)"


class Faithfulness(RagJudge):
    """Share of the answer's claims that the retrieved context supports (a.k.a. groundedness).

    One judge call (template ``faithfulness/v1``) splits the answer into factual claims and
    marks each as supported by the context or not, as ``{"claims": [{"claim", "supported",
    "chunks", "reason"}]}``. The score is computed here: supported claims / claims. The
    explanation quotes every unsupported claim with the judge's reason, and the claims are in
    the score's metadata. An empty answer, or one in which the judge finds no factual claim
    ("I don't know"), is SKIPPED; a record without context is SKIPPED. A verdict not in the
    format, even after one repair request, is an ERROR quoting the judge's answer.

    Args:
        judge: the name of the configured judge to ask.
        pass_threshold: also emit ``faithfulness-passed``: the score is at least this
            (1.0: every claim supported).
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``
            (parts among input, context, output: the default); over ``max_bytes`` the record is
            SKIPPED unavailable and the judge is not asked.
    """

    metric = "faithfulness"
    template = FAITHFULNESS_TEMPLATE
    shows = ("input", "context", "output")
    requires = ("output", "context")

    async def __call__(self, record: Record) -> list[Score]:
        record, projected = self.project(record)
        answer = answer_of(record)
        if not answer.strip():
            raise Skip("the answer is empty: it makes no claim to check")
        verdict = await self.ask(
            CLAIMS.check(),
            projected,
            question=_question(record),
            context=passages_block(record),
            answer=answer,
        )
        claims = evidence(verdict.data["claims"], "claim", "supported", chunks=True)
        if not claims:
            raise Skip("the judge found no factual claim in the answer")
        unsupported = [c for c in claims if not c["supported"]]
        if unsupported:
            explanation = (
                f"{len(unsupported)} of {len(claims)} claims not supported by the context: "
                + listed(unsupported, "claim")
            )
        else:
            explanation = f"all {len(claims)} claims supported by the context"
        number = 1.0 - len(unsupported) / len(claims)
        return self.scores(number, explanation, verdict, claims=claims)


class CitationAccuracy(RagJudge):
    """Share of the answer's citations whose cited passage supports the sentence citing it.

    Citations are found without the judge: ``[1]``, ``[1, 3]``, ``[2][4]`` (passage ranks,
    from 1) or ``[d7]`` (a chunk's id); a citation placed after a sentence's full stop belongs
    to that sentence. A citation of a passage the context does not have (``[9]`` of 4) is
    wrong without asking. One judge call (template ``citation-accuracy/v1``) checks every other
    (sentence, passage) pair; the score is supported / citations, computed here. The
    explanation quotes each sentence whose citation does not support it, with the reason. An
    answer without citations is SKIPPED (this measures citation precision, not coverage).

    Args:
        judge: the name of the configured judge to ask.
        pass_threshold: also emit ``citation-accuracy-passed``: the score is at least this
            (1.0: every citation supports its sentence).
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``
            (parts among context, output: the default); over ``max_bytes`` the record is
            SKIPPED unavailable and the judge is not asked.
    """

    metric = "citation-accuracy"
    template = CITATION_TEMPLATE
    shows = ("context", "output")
    requires = ("output", "context")

    async def __call__(self, record: Record) -> list[Score]:
        record, projected = self.project(record)
        cites = citations(answer_of(record), record)
        if not cites:
            raise Skip("the answer cites no passage (citations look like [1] or [chunk-id])")
        asked = [i for i, c in enumerate(cites) if c.rank is not None]
        verdict = None
        judged: dict[int, dict[str, Any]] = {}
        if asked:
            listing = "\n".join(
                f"{j}. Sentence: {quote(cites[i].sentence, 600)}\n   Cites passage "
                f"[{cites[i].rank}]"
                for j, i in enumerate(asked, 1)
            )
            verdict = await self.ask(
                CITED.check(len(asked)),
                projected,
                context=passages_block(record, only={cites[i].rank or 0 for i in asked}),
                citations=listing,
                n=str(len(asked)),
            )
            judged = dict(zip(asked, verdict.data["citations"], strict=True))
        entries, wrong = [], []
        for i, c in enumerate(cites):
            item = judged.get(i)
            if item is None:
                supported, reason = False, f"not in the context ({len(record.context)} passages)"
            else:
                supported, reason = item["supported"], reason_of(item)
            entry: dict[str, Any] = {"sentence": c.sentence, "marker": c.marker, "rank": c.rank}
            entry["supported"] = supported
            if reason:
                entry["reason"] = reason
            entries.append(entry)
            if not supported:
                why = f": {reason}" if reason else ""
                wrong.append(f"{quote(c.sentence)} cites {c.marker}{why}")
        if wrong:
            explanation = (
                f"{len(wrong)} of {len(cites)} citations do not support their sentence: "
                + "; ".join(wrong)
            )
        else:
            explanation = f"all {len(cites)} citations support their sentence"
        number = 1.0 - len(wrong) / len(cites)
        return self.scores(number, explanation, verdict, citations=entries)


faithfulness = declare_judged(Faithfulness, "share of the answer's claims the context supports")
citation_accuracy = declare_judged(
    CitationAccuracy, "share of citations that support their sentence"
)
