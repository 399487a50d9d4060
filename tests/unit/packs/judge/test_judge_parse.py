"""The judge's answer is read wherever the JSON object is: whole, fenced, or with text around."""

from __future__ import annotations

import pytest

from evalsi.packs.judge import find_json_object
from evalsi.packs.judge._ask import number_check


@pytest.mark.parametrize(
    "text",
    [
        '{"score": 0.5, "explanation": "ok"}',
        '```json\n{"score": 0.5, "explanation": "ok"}\n```',
        'Here is my verdict:\n```\n{"score": 0.5, "explanation": "ok"}\n```\nThanks',
        'I think {"score": 0.5, "explanation": "ok"} is fair. {"other": 1}',
        'Reasoning {not json} then {"score": "0.5", "explanation": "ok"}',
    ],
)
def test_finds_the_object(text: str) -> None:
    data, problem = find_json_object(text, number_check(0, 1))
    assert problem == ""
    assert data is not None
    assert data["score"] == 0.5
    assert data["explanation"] == "ok"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("I would give it a 4.", "no JSON object found"),
        ('{"explanation": "no score"}', "no numeric 'score'"),
        ('{"score": 7}', "'score' 7 is outside 0..1"),
        ('{"score": "high"}', "'score' is not a number"),
        ("[1, 2]", "no JSON object found"),
    ],
)
def test_reports_why_not(text: str, why: str) -> None:
    data, problem = find_json_object(text, number_check(0, 1))
    assert data is None
    assert problem == why


def test_first_acceptable_object_wins() -> None:
    data, _ = find_json_object('{"score": 9} then {"score": 1}', number_check(0, 1))
    assert data == {"score": 1}
