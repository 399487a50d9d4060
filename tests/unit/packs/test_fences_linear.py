"""Fenced blocks in anyone's text are read in linear time (the attack review held the server
for minutes with a few hundred spaces after a fence), and the same as the regular expressions
they replace on every input those handled in time."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Content
from evalsi.packs.code._shapes import extract_code, fenced_blocks
from evalsi.packs.core._json import fenced_body, parse_output
from evalsi.packs.judge._ask import MAX_SEARCHED, find_json_object
from evalsi.packs.judge._ask import fenced_blocks as json_blocks

# The patterns replaced (kept here as the reference on small inputs).
OLD_JSON = re.compile(r"\s*```[ \t]*(?:json)?[ \t]*\r?\n?(?P<body>.*?)\s*```\s*", re.I | re.S)
OLD_JUDGE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
OLD_CODE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)

# Text made of the characters the patterns care about, so the cases are not all trivial.
fencey = st.text(alphabet=st.sampled_from(list("`` \t\r\n{}jsonJSONpy:x1")), max_size=40)


@settings(max_examples=400, deadline=None)
@given(fencey)
def test_the_json_fence_reads_as_the_old_pattern(text: str) -> None:
    old = OLD_JSON.fullmatch(text)
    assert fenced_body(text) == (None if old is None else old["body"])


@settings(max_examples=400, deadline=None)
@given(fencey)
def test_the_judge_fences_read_as_the_old_pattern(text: str) -> None:
    assert json_blocks(text) == [b.lstrip() for b in OLD_JUDGE.findall(text)]


@settings(max_examples=400, deadline=None)
@given(fencey)
def test_the_code_fences_read_as_the_old_pattern(text: str) -> None:
    assert fenced_blocks(text) == OLD_CODE.findall(text)


def _seconds(call: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    call(*args)
    return time.perf_counter() - started


def test_hostile_fences_take_no_time() -> None:
    """Each case took from 30 s to minutes before; the bound is a guard, not a speed target."""
    took = max(
        _seconds(lambda: parse_output(Content.of_text("```" + " " * 100_000), allow_fenced=True)),
        _seconds(find_json_object, "```" + " " * 1_000_000),
        _seconds(find_json_object, '{"a": "' * 200_000),
        _seconds(extract_code, "```\n" + " " * 1_000_000),
        _seconds(extract_code, "```" * 300_000),
    )
    assert took < 5


def test_a_verdict_is_found_in_a_fence_and_past_the_search_cap_is_not_read() -> None:
    assert find_json_object('Sure:\n```json\n{"score": 4}\n```')[0] == {"score": 4}
    assert find_json_object(" " * MAX_SEARCHED + '{"score": 4}')[0] is None
    assert extract_code("intro\n```python\nprint(1)\n```\n```js\nx\n```") == "print(1)\n"
    assert parse_output(Content.of_text('```JSON\n{"a": 1}\n```'), allow_fenced=True) == (
        {"a": 1},
        None,
    )
