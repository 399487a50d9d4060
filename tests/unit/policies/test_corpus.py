"""A dataset-scope step's corpus: bounded in records and bytes, pruned by time, refreshed
only when it changed and not more often than its reduce allows."""

from __future__ import annotations

import sacrebleu

from evalsi.core import Content, Record
from evalsi.policies._corpus import MIN_REFRESH_S, StepCorpus
from tests.support.registry import BUILTINS


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def corpus(clock: Clock, **bounds: int) -> StepCorpus:
    return StepCorpus(BUILTINS.resolve("bleu").bind({}), 60.0, clock=clock, **bounds)


def rec(i: int, text: str = "the cat sat on the mat") -> Record:
    return Record(id=str(i), output=Content.of_text(text), reference=Content.of_text(text))


def test_the_oldest_records_go_first_past_the_record_bound() -> None:
    c = corpus(Clock(), max_records=3)
    for i in range(5):
        c.add(rec(i))
    assert [r.id for r in c.snapshot()] == ["2", "3", "4"]
    assert c.dropped == 2


def test_the_byte_bound_holds_and_one_huge_record_does_not_stay() -> None:
    c = corpus(Clock(), max_bytes=2_000)
    for i in range(50):
        c.add(rec(i))
    assert 0 < c.bytes <= 2_000
    c.add(rec(99, "x " * 5_000))  # alone over the bound: nothing is kept
    assert (c.bytes, c.snapshot()) == (0, [])


def test_records_leave_with_the_window_and_an_empty_corpus_reduces_to_nothing() -> None:
    clock = Clock()
    c = corpus(clock)
    c.add(rec(1))
    clock.now = 30
    c.add(rec(2))
    clock.now = 75  # the first is older than 60 s
    assert c.due()
    assert [r.id for r in c.snapshot()] == ["2"]
    clock.now = 200
    assert c.due(force=True)
    assert c.reduce(c.snapshot()) == []


def test_a_refresh_waits_for_a_change_and_for_its_pause() -> None:
    clock = Clock()
    c = corpus(clock)
    assert not c.due()  # nothing added
    c.add(rec(1))
    assert c.due()
    c.snapshot()
    assert not c.due()  # unchanged since
    c.add(rec(2))
    assert not c.due()  # changed, but refreshed a moment ago
    assert c.due(force=True)
    clock.now += MIN_REFRESH_S
    assert c.due()


def test_the_reduction_is_sacrebleus() -> None:
    c = corpus(Clock())
    hyps, refs = ["a b c d e", "the dog ran off home"], ["a b c d f", "the dog ran home"]
    for i, (h, r) in enumerate(zip(hyps, refs, strict=True)):
        c.add(Record(id=str(i), output=Content.of_text(h), reference=Content.of_text(r)))
    (bleu,) = c.reduce(c.snapshot())
    assert bleu.mean == sacrebleu.corpus_bleu(hyps, [refs]).score
    assert bleu.n == 2
