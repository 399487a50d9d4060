"""edit-distance equals a textbook Wagner-Fischer Levenshtein distance (written here, not
rapidfuzz) on characters and on words, with the normalised similarity 1 - d / max(len)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evalsi
from evalsi.core import Content, Outcome, Record
from evalsi.evaluators import Registry
from evalsi.packs import text

REG = Registry(text.EVALUATORS)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "text"
PAIRS = [json.loads(line) for line in (EXAMPLES / "translations.jsonl").read_text().splitlines()]


def levenshtein(a: Any, b: Any) -> int:
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def expected(hyp: Any, ref: Any) -> tuple[float, float]:
    d = levenshtein(hyp, ref)
    longest = max(len(hyp), len(ref))
    return float(d), 1.0 - d / longest if longest else 1.0


def results(rows: list[dict[str, Any]], **params: Any) -> list[Any]:
    r = evalsi.evaluate(
        data=rows,
        evaluators=["edit-distance"],
        params={"edit-distance": params},
        registry=REG,
        store=":memory:",
    )
    by_id = {x.record_id: x for x in r.results}
    return [by_id[row["id"]] for row in rows]


def values(result: Any) -> tuple[float, float]:
    assert result.outcome is Outcome.SCORED, result.reason
    got = {s.name: s.number for s in result.scores}
    return got["edit-distance"], got["edit-similarity"]


EDGES = [
    {"id": "kitten", "output": "kitten", "reference": "sitting"},
    {"id": "both-empty", "output": "", "reference": ""},
    {"id": "empty-out", "output": "", "reference": "abc"},
    {"id": "accents", "output": "café crème", "reference": "cafe creme"},
    {"id": "cjk", "output": "我们明天去北京", "reference": "我们明天要去北京"},
]


@pytest.mark.parametrize("unit", ["char", "word"])
@pytest.mark.parametrize("lowercase", [False, True])
def test_edit_distance_equals_wagner_fischer(unit: str, lowercase: bool) -> None:
    rows = PAIRS + EDGES
    for row, result in zip(rows, results(rows, unit=unit, lowercase=lowercase), strict=True):
        hyp, ref = row["output"], row["reference"]
        if lowercase:
            hyp, ref = hyp.lower(), ref.lower()
        if unit == "word":
            hyp, ref = hyp.split(), ref.split()
        assert values(result) == pytest.approx(expected(hyp, ref), abs=1e-12), row["id"]


def test_known_values() -> None:
    got = results(EDGES)
    assert values(got[0]) == pytest.approx((3.0, 1 - 3 / 7))
    assert values(got[1]) == (0.0, 1.0)
    assert values(got[2]) == (3.0, 0.0)
    assert values(got[3])[0] == 2.0  # é → e twice: accents are characters


def test_the_closest_reference_counts() -> None:
    row = {"id": "m", "output": "color", "reference": ["colour", "color", "kolor"]}
    (result,) = results([row])
    assert values(result) == (0.0, 1.0)
    assert "reference 2" in result.scores[0].explanation


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=25), st.text(max_size=25))
def test_property_any_unicode_text(hyp: str, ref: str) -> None:
    ev = REG.resolve("edit-distance").bind({}).instance
    scores = ev(Record(id="p", output=Content.of_text(hyp), reference=Content.of_text(ref)))
    assert (scores[0].number, scores[1].number) == pytest.approx(expected(hyp, ref), abs=1e-12)
