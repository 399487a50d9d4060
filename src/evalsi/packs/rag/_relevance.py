"""``answer-relevance``, ``context-relevance`` and ``context-sufficiency``: does each part fit
the question? One judge call each, returning a verdict list the score is computed from."""

from __future__ import annotations

from evalsi.core import Record, Score
from evalsi.packs.judge import PromptTemplate
from evalsi.packs.rag._chunks import (
    answer_of,
    chunk_label,
    passages_block,
    question_of,
    reference_answer,
)
from evalsi.packs.rag._verdicts import (
    SYSTEM,
    ListVerdict,
    RagJudge,
    declare_judged,
    evidence,
    listed,
)

ANSWER_RELEVANCE_TEMPLATE = PromptTemplate(
    version="answer-relevance/v1",
    system=SYSTEM,
    user="""Check whether an answer stays on the question it was given.

# Question
$question

# Answer
$answer

Split the answer into its statements. For each, decide whether it is relevant: it helps \
answer the question (directly, or as context the question calls for). A statement that is off \
topic, padding, or about something the question did not ask is not relevant. Whether a \
statement is true does not matter here. Answer with only a JSON object:
{"statements": [{"statement": "<the statement>", "relevant": true or false, \
"reason": "<for an irrelevant statement: why>"}]}""",
)
"""The versioned prompt of ``answer-relevance``."""

CONTEXT_RELEVANCE_TEMPLATE = PromptTemplate(
    version="context-relevance/v1",
    system=SYSTEM,
    user="""Check whether each retrieved passage is relevant to the question.

# Question
$question

# Retrieved passages
$context

A passage is relevant when it holds information that helps answer the question, even in part. \
A passage on a neighbouring topic that does not help answer this question is not relevant. \
Answer with only a JSON object, one entry for each passage from 1 to $n:
{"chunks": [{"chunk": <passage number>, "relevant": true or false, \
"reason": "<one short sentence>"}]}""",
)
"""The versioned prompt of ``context-relevance``."""

CONTEXT_SUFFICIENCY_TEMPLATE = PromptTemplate(
    version="context-sufficiency/v1",
    system=SYSTEM,
    user="""Check whether the retrieved context holds enough information to answer the question.

# Question
$question
$reference
# Retrieved passages
$context

List the pieces of information a complete, correct answer to the question needs (when a \
reference answer is given, the pieces of information it states that answer the question). For \
each, decide whether the passages provide it, stated or directly implied. Answer with only a \
JSON object:
{"needed": [{"information": "<one piece of information>", "in_context": true or false, \
"chunks": [<numbers of the passages that provide it>]}]}""",
)
"""The versioned prompt of ``context-sufficiency``."""

STATEMENTS = ListVerdict("statements", "relevant", text="statement")
PASSAGES = ListVerdict("chunks", "relevant", number="chunk")
NEEDED = ListVerdict("needed", "in_context", text="information", non_empty=True)


class AnswerRelevance(RagJudge):
    """Share of the answer's statements that help answer the question.

    One judge call (template ``answer-relevance/v1``) splits the answer into statements and
    marks each relevant to the question or not; the score is relevant / statements, computed
    here, and the explanation quotes the irrelevant statements. Truth is not judged (that is
    ``faithfulness``). An empty answer, or one with no statement, scores 0 (an empty answer is
    not sent to the judge).

    Args:
        judge: the name of the configured judge to ask.
        pass_threshold: also emit ``answer-relevance-passed``: the score is at least this.
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``
            (parts among input, output: the default); over ``max_bytes`` the record is
            SKIPPED unavailable and the judge is not asked.
    """

    metric = "answer-relevance"
    template = ANSWER_RELEVANCE_TEMPLATE
    shows = ("input", "output")
    requires = ("input", "output")

    async def __call__(self, record: Record) -> list[Score]:
        record, projected = self.project(record)
        answer = answer_of(record)
        if not answer.strip():
            return self.scores(0.0, "the answer is empty", None, statements=[])
        verdict = await self.ask(
            STATEMENTS.check(), projected, question=question_of(record), answer=answer
        )
        statements = evidence(verdict.data["statements"], "statement", "relevant")
        if not statements:
            return self.scores(0.0, "the judge found no statement in the answer", verdict)
        off = [s for s in statements if not s["relevant"]]
        if off:
            explanation = (
                f"{len(off)} of {len(statements)} statements do not address the question: "
                + listed(off, "statement")
            )
        else:
            explanation = f"all {len(statements)} statements address the question"
        number = 1.0 - len(off) / len(statements)
        return self.scores(number, explanation, verdict, statements=statements)


class ContextRelevance(RagJudge):
    """Share of the retrieved chunks that are relevant to the question (judged, no labels).

    One judge call (template ``context-relevance/v1``) marks every retrieved passage relevant
    or not, each exactly once by its number (a verdict missing or repeating a passage is
    refused and repaired once); the score is relevant / retrieved, computed here, and the
    explanation names the irrelevant chunks with the judge's reasons. It needs no relevance
    labels; ``context-precision`` is the same question answered from labels.

    Args:
        judge: the name of the configured judge to ask.
        pass_threshold: also emit ``context-relevance-passed``: the score is at least this.
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``
            (parts among input, context: the default); over ``max_bytes`` the record is
            SKIPPED unavailable and the judge is not asked.
    """

    metric = "context-relevance"
    template = CONTEXT_RELEVANCE_TEMPLATE
    shows = ("input", "context")
    requires = ("input", "context")

    async def __call__(self, record: Record) -> list[Score]:
        record, projected = self.project(record)
        n = len(record.context)
        verdict = await self.ask(
            PASSAGES.check(n),
            projected,
            question=question_of(record),
            context=passages_block(record),
            n=str(n),
        )
        chunks = evidence(verdict.data["chunks"], "chunk", "relevant")
        off = [c for c in chunks if not c["relevant"]]
        if off:
            explanation = f"{len(off)} of {n} chunks irrelevant to the question: " + "; ".join(
                chunk_label(record, c["chunk"]) + (f" ({c['reason']})" if "reason" in c else "")
                for c in off
            )
        else:
            explanation = f"all {n} chunks relevant to the question"
        return self.scores(1.0 - len(off) / n, explanation, verdict, chunks=chunks)


class ContextSufficiency(RagJudge):
    """Share of the information a complete answer needs that the retrieved context provides.

    One judge call (template ``context-sufficiency/v1``) lists the pieces of information a
    complete answer needs (those of the reference answer when the record has one: a text
    reference, or the ``answer`` of a reference object) and marks each as provided by the
    context or not; the score is provided / needed, computed here (1.0: the context suffices),
    and the explanation quotes what is missing. An empty list is refused (every question
    needs some information).

    Args:
        judge: the name of the configured judge to ask.
        pass_threshold: also emit ``context-sufficiency-passed``: the score is at least this
            (1.0: everything needed is in the context).
        evidence: what the judge sees of a record, ``{include: [parts], max_bytes: N}``
            (parts among input, reference, context: the default); over ``max_bytes`` the record is
            SKIPPED unavailable and the judge is not asked.
    """

    metric = "context-sufficiency"
    template = CONTEXT_SUFFICIENCY_TEMPLATE
    shows = ("input", "reference", "context")
    requires = ("input", "context")

    async def __call__(self, record: Record) -> list[Score]:
        record, projected = self.project(record)
        ref = reference_answer(record)
        block = f"\n# Reference answer\n{ref}\n" if ref is not None else ""
        verdict = await self.ask(
            NEEDED.check(),
            projected,
            question=question_of(record),
            reference=block,
            context=passages_block(record),
        )
        needed = evidence(verdict.data["needed"], "information", "in_context")
        lacking = [i for i in needed if not i["in_context"]]
        if lacking:
            explanation = (
                f"the context lacks {len(lacking)} of {len(needed)} pieces of information "
                f"the answer needs: {listed(lacking, 'information')}"
            )
        else:
            explanation = f"the context holds all {len(needed)} pieces of information needed"
        number = 1.0 - len(lacking) / len(needed)
        return self.scores(number, explanation, verdict, needed=needed, reference=ref is not None)


answer_relevance = declare_judged(
    AnswerRelevance, "share of the answer's statements on the question"
)
context_relevance = declare_judged(
    ContextRelevance, "share of retrieved chunks relevant to the question"
)
context_sufficiency = declare_judged(
    ContextSufficiency, "share of the needed information in the context"
)
