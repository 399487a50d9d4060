"""pii-leakage on a megabyte of output: near-linear time and a bounded stored finding list
(both were quadratic / unbounded once: 66 s and 6 MB of metadata for one record)."""

from __future__ import annotations

import time

import pytest

import evalsi


@pytest.mark.parametrize(
    "text",
    ["mail ab@ex.com " * 66_666, "-----BEGIN PRIVATE KEY-----\n" * 36_000],
    ids=["emails", "pem"],
)
def test_a_megabyte_of_leaks_is_fast_and_stored_small(text: str) -> None:
    started = time.perf_counter()
    result = evalsi.evaluate([{"output": text}], ["pii-leakage"], store=":memory:")
    assert time.perf_counter() - started < 15  # ~1 s here; the quadratic version took 66 s
    (score, *_) = result.results[0].scores
    assert score.passed is False
    assert len(score.metadata["findings"]) == 100
    assert score.metadata["findings_total"] > 30_000


@pytest.mark.parametrize(
    "text",
    [
        "I can't help but notice that your loop is off by one; here is the fix.",
        "I can't explain how much this helps, but here is the code.",
    ],
)
def test_idioms_are_not_refusals(text: str) -> None:
    from evalsi.packs.safety._refusal import keyword_refusal

    assert keyword_refusal(text) is None


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Revenue +12 345 678 USD", False),
        ("Call +1 415 555 0132 today", True),
        ("Moscow office: +7 495 123 45 67", True),
        ("+44 20 7946 0958", True),
    ],
)
def test_plus_one_and_plus_seven_numbers_need_eleven_digits(text: str, found: bool) -> None:
    from evalsi.packs.safety._detect import find_phones

    assert bool(list(find_phones(text))) is found
