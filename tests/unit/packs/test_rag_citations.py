"""Reading RAG records without a judge: chunk ids and texts, citations and their sentences."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.core import Content, Message, Record
from evalsi.packs.rag._chunks import (
    chunk_id,
    chunk_text,
    passages_block,
    question_of,
    reference_answer,
)
from evalsi.packs.rag._citations import Citation, citations

PASSAGES = [
    {"id": "moon-1", "text": "Apollo 11 landed on the Moon on 20 July 1969."},
    {"id": "moon-2", "text": "Buzz Aldrin joined Armstrong about twenty minutes later."},
    {"id": "mars-1", "text": "Mars has two small moons, Phobos and Deimos."},
]


def record(context: list[Any] | None = None, **fields: Any) -> Record:
    items = PASSAGES if context is None else context
    return Record(id="r", context=[Content.from_value(c) for c in items], **fields)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"id": "d1", "text": "x"}, "d1"),
        ({"doc_id": 7, "text": "x"}, "7"),
        ({"chunk_id": " c9 "}, "c9"),
        ({"id": True, "text": "x"}, None),
        ({"text": "no id here"}, None),
        ("d42", "d42"),
        ("a passage of words", None),
        (["not", "a", "chunk"], None),
    ],
)
def test_chunk_id(value: Any, expected: str | None) -> None:
    assert chunk_id(Content.from_value(value)) == expected


def test_chunk_text_and_prompt_block() -> None:
    assert chunk_text(Content.from_value({"page_content": "P", "id": 1})) == "P"
    assert chunk_text(Content.from_value({"id": 1, "score": 0.3})) == '{"id":1,"score":0.3}'
    block = passages_block(record([PASSAGES[0], "Plain passage."]))
    assert block == (
        "[1] (id: moon-1) Apollo 11 landed on the Moon on 20 July 1969.\n\n[2] Plain passage."
    )
    assert passages_block(record(), only={3}) == (
        "[3] (id: mars-1) Mars has two small moons, Phobos and Deimos."
    )


def test_question_and_reference_answer() -> None:
    chat = Content.of_messages(
        [Message("system", "Be brief."), Message("user", "Who landed?"), Message("assistant", "")]
    )
    assert question_of(record(input=chat)) == "Who landed?"
    assert reference_answer(record(reference=Content.of_text("Armstrong"))) == "Armstrong"
    both = Content.from_value({"answer": "Armstrong", "context_ids": ["moon-1"]})
    assert reference_answer(record(reference=both)) == "Armstrong"
    labels_only = Content.from_value({"context_ids": ["moon-1"]})
    assert reference_answer(record(reference=labels_only)) is None


def test_numbered_and_id_citations_with_their_sentences() -> None:
    answer = (
        "Apollo 11 landed in 1969 [1]. Aldrin followed twenty minutes later.[2] "
        "Mars has two moons [mars-1; 1]. Nothing cited here."
    )
    assert citations(answer, record()) == [
        Citation("Apollo 11 landed in 1969.", "[1]", 1),
        Citation("Aldrin followed twenty minutes later.", "[2]", 2),
        Citation("Mars has two moons.", "[mars-1]", 3),
        Citation("Mars has two moons.", "[1]", 1),
    ]


def test_a_marker_after_the_full_stop_belongs_to_the_sentence_before() -> None:
    answer = "Apollo 11 landed in 1969. [1] Aldrin followed. [2][3]"
    got = [(c.sentence, c.rank) for c in citations(answer, record())]
    assert got == [
        ("Apollo 11 landed in 1969.", 1),
        ("Aldrin followed.", 2),
        ("Aldrin followed.", 3),
    ]


def test_out_of_range_and_non_citations() -> None:
    answer = "See [sic] and [the docs](http://x). Phobos orbits Mars [9]. Again [1, 1]."
    got = citations(answer, record())
    assert got == [
        Citation("Phobos orbits Mars.", "[9]", None),
        Citation("Again.", "[1]", 1),
    ]
    assert citations("No citations at all.", record()) == []
