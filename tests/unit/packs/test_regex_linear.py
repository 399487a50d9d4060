"""Patterns and scans over anyone's text run in linear time (the attack review's second pass):
a number-like dataset field, a policy's webhook URL and an answer full of citation markers
each held a worker for seconds to minutes; the replacements answer the same on every input
the originals handled in time."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Content, Record
from evalsi.packs.ml_monitoring._fields import _NUMBER, as_number
from evalsi.packs.rag import _citations
from evalsi.packs.rag._chunks import chunk_id
from evalsi.packs.rag._citations import Citation, citations
from evalsi.policies._spec import _URL

# The patterns replaced (kept here as the reference on small inputs).
OLD_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
OLD_URL = re.compile(r"https?://[^\s/]+\S*")


def old_citations(answer: str, record: Record) -> list[Citation]:
    """``citations`` as it was before it bisected (quadratic in the number of markers)."""
    n = len(record.context)
    ids: dict[str, int] = {}
    for rank, chunk in enumerate(record.context, 1):
        ident = chunk_id(chunk) if chunk.kind == "json" else None
        if ident is not None:
            ids.setdefault(ident, rank)
    groups = []
    for match in _citations._GROUP.finditer(answer):
        tokens = [t for t in _citations._SPLIT.split(match.group(1).strip()) if t]
        resolved = [_citations._resolve(t, ids, n) for t in tokens]
        if tokens and all(ok for ok, _ in resolved):
            cited = [(t, rank) for t, (_, rank) in zip(tokens, resolved, strict=True)]
            groups.append((match.start(), match.end(), cited))
    if not groups:
        return []
    spans = _citations._sentences(answer)
    markers = [(a, b) for a, b, _ in groups]

    def bare(a: int, b: int) -> str:
        parts, at = [], a
        for ma, mb in markers:
            if a <= ma and mb <= b:
                parts.append(answer[at:ma])
                at = mb
        parts.append(answer[at:b])
        return _citations._TIGHT.sub(r"\1", " ".join("".join(parts).split()))

    out: list[Citation] = []
    seen: set[tuple[int, str]] = set()
    for start, _, cited in groups:
        index = next(i for i, (a, b) in enumerate(spans) if a <= start < b)
        if index > 0 and not bare(spans[index][0], start).strip(" .,;:"):
            index -= 1
        sentence = bare(*spans[index])
        for token, cited_rank in cited:
            key = (index, str(cited_rank) if cited_rank is not None else f"?{token}")
            if key not in seen:
                seen.add(key)
                out.append(Citation(sentence, f"[{token}]", cited_rank))
    return out


def _record(*ids: str) -> Record:
    context = [Content.of_json({"id": i, "text": f"passage {i}"}) for i in ids]
    return Record(id="r", context=[*context, Content.of_text("a passage"), Content.of_text("b")])


RECORDS = (_record(), _record("d1", "x. y", "a"))

numbery = st.text(alphabet=st.sampled_from(list("0123456789.+-eEx ")), max_size=20)
urly = st.builds(
    lambda scheme, rest: scheme + rest,
    st.sampled_from(["http://", "https://", "ftp://", "http:/", ""]),
    st.text(alphabet=st.sampled_from(list("a/ :.\t1")), max_size=15),
)
citey = st.text(alphabet=st.sampled_from(list("[]1234 ,;.!?\nAxd:ay")), max_size=60)


@settings(max_examples=500, deadline=None)
@given(numbery)
def test_numbers_read_as_the_old_pattern(text: str) -> None:
    assert bool(_NUMBER.fullmatch(text)) == bool(OLD_NUMBER.fullmatch(text))


@settings(max_examples=500, deadline=None)
@given(urly)
def test_webhook_urls_read_as_the_old_pattern(text: str) -> None:
    assert bool(_URL.fullmatch(text)) == bool(OLD_URL.fullmatch(text))


@settings(max_examples=1000, deadline=None)
@given(citey, st.sampled_from(RECORDS))
def test_citations_read_as_before(answer: str, record: Record) -> None:
    assert citations(answer, record) == old_citations(answer, record)


def test_ordinary_inputs_give_the_same_answers() -> None:
    assert [as_number(t) for t in ("1", "-2.5", ".5", "5.", "1e3", " 7 ", "1.2.3", "e5", "")] == [
        1.0,
        -2.5,
        0.5,
        5.0,
        1000.0,
        7.0,
        None,
        None,
        None,
    ]
    assert _URL.fullmatch("https://hooks.example.com/x?y=1")
    assert not _URL.fullmatch("https:///path")
    assert not _URL.fullmatch("http://a b")
    record = _record("d1")
    answer = "Paris is the capital. [1] It is large [d1][2]. Unknown [sic]."
    assert [(c.sentence, c.marker, c.rank) for c in citations(answer, record)] == [
        ("Paris is the capital.", "[1]", 1),
        ("It is large.", "[d1]", 1),
        ("It is large.", "[2]", 2),
    ]


def _seconds(call: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    call(*args)
    return time.perf_counter() - started


def test_hostile_inputs_take_no_time() -> None:
    """Before: 3 s for the 8,000-digit number (minutes at 100,000), 18 s for the 40,000-character
    URL, 7 s for 20,000 characters of markers (over a minute at 100,000). The bound is a
    guard, not a speed target."""
    record = _record()
    took = max(
        _seconds(as_number, "1" * 100_000 + "x"),
        _seconds(_NUMBER.fullmatch, "1" * 100_000 + "." + "1" * 100_000 + "x"),
        _seconds(_URL.fullmatch, "http://" + "a" * 100_000 + " "),
        _seconds(citations, "A[1] " * 20_000, record),
        _seconds(citations, "[1]" * 33_000, record),
        _seconds(citations, "x.[1] " * 16_000, record),
    )
    assert took < 5
