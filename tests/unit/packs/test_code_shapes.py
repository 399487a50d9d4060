"""Record shapes of the code pack: code extraction, candidate lists, the four test shapes, and
bad shapes as ERRORs whose reason names the field and what it should hold."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalsi.core import Content, Outcome, Record
from evalsi.evaluators import make_runner
from evalsi.packs.code import ShapeError, candidates_of, code_exec_tests, extract_code, read_tests


def test_extract_code_prefers_a_python_fence() -> None:
    text = "Sure!\n```text\nnot code\n```\nand\n```python\ndef f():\n    return 1\n```\nbye"
    assert extract_code(text) == "def f():\n    return 1\n"
    assert extract_code("```\nx = 1\n```") == "x = 1\n"
    assert extract_code("```js\nlet x\n```") == "let x\n"
    assert extract_code("x = 2\n") == "x = 2\n"


def test_candidates_one_or_a_list() -> None:
    assert candidates_of(Content.of_text("x = 1"), multiple=None) == (["x = 1"], False)
    listed = Content.from_value(["a = 1", "```python\nb = 2\n```"])
    assert candidates_of(listed, multiple=None) == (["a = 1", "b = 2\n"], True)
    as_text = Content.of_text('["a = 1", "b = 2"]')
    assert candidates_of(as_text, multiple=None) == (["a = 1", "b = 2"], True)
    # "one" keeps a program that happens to be a JSON list literal as one program
    assert candidates_of(as_text, multiple=False) == (['["a = 1", "b = 2"]'], False)
    with pytest.raises(ShapeError, match="output: the candidates param says a JSON list"):
        candidates_of(Content.of_text("x = 1"), multiple=True)
    with pytest.raises(ShapeError, match="output: expected a non-empty JSON list"):
        candidates_of(Content.from_value(["a", 3]), multiple=None)


def rec(reference: Any = None, **meta: Any) -> Record:
    ref = None if reference is None else Content.from_value(reference)
    return Record(id="r", output=Content.of_text("x = 1"), reference=ref, metadata=meta)


def test_check_style_needs_an_entry_point() -> None:
    code = "def check(candidate):\n    assert candidate(1) == 1\n"
    plan = read_tests(rec(code, entry_point="f"), tests_field="", entry_point="")
    assert plan.kind == "check"
    assert plan.entry_point == "f"
    assert plan.tests == [{"name": "check", "code": "check(candidate)"}]
    assert read_tests(rec(code), tests_field="", entry_point="g").entry_point == "g"
    with pytest.raises(ShapeError, match="entry point is needed"):
        read_tests(rec(code), tests_field="", entry_point="")
    with pytest.raises(ShapeError, match=r"metadata\.entry_point: expected a Python identifier"):
        read_tests(rec(code, entry_point="not valid"), tests_field="", entry_point="")


def test_test_functions_with_shared_setup() -> None:
    code = (
        "import math\n\n@staticmethod\ndef helper():\n    return 2\n\n"
        "def test_a():\n    assert 1\n\ndef test_b():\n    assert 2\n"
    )
    plan = read_tests(rec(code), tests_field="", entry_point="")
    assert plan.kind == "functions"
    assert [t["name"] for t in plan.tests] == ["test_a", "test_b"]
    assert plan.tests[0]["call"] == "test_a"
    assert "import math" in plan.setup
    assert "@staticmethod" in plan.setup
    assert "test_a" not in plan.setup


def test_asserts_each_a_test_with_the_statements_before() -> None:
    code = "x = 1\nassert x == 1\ny = x + 1\nassert y == 2\n"
    plan = read_tests(rec(code), tests_field="", entry_point="")
    assert plan.kind == "asserts"
    assert [t["code"] for t in plan.tests] == [
        "x = 1\nassert x == 1",
        "x = 1\ny = x + 1\nassert y == 2",
    ]
    assert plan.tests[1]["name"] == "assert_2 (line 4)"


def test_a_list_of_snippets_and_a_metadata_field() -> None:
    plan = read_tests(rec(["assert 1", "assert 2"]), tests_field="", entry_point="")
    assert plan.kind == "list"
    assert [t["name"] for t in plan.tests] == ["test_1", "test_2"]
    from_meta = read_tests(rec(None, tests=["assert 3"]), tests_field="tests", entry_point="")
    assert from_meta.tests[0]["code"] == "assert 3"


@pytest.mark.parametrize(
    ("reference", "meta", "params", "words"),
    [
        ("x = 1\n", {}, {}, "reference: found no test"),
        ("def check(:\n", {}, {}, "reference: the test code does not parse"),
        ([], {}, {}, "reference: expected test code, or a non-empty list"),
        (["assert 1", 2], {}, {}, "reference: expected test code, or a non-empty list"),
        (["assert (1"], {}, {}, "reference[0]: the test code does not parse"),
        ({"a": 1}, {}, {}, "reference: expected test code"),
        ("assert 1", {}, {"tests_field": "tests"}, "metadata.tests: missing"),
        ("assert 1", {}, {"language": "rust"}, "language 'rust' is not supported yet"),
        ("assert 1", {}, {"k": [5]}, None),
    ],
)
def test_bad_shapes_are_errors_naming_the_field(
    reference: Any, meta: dict[str, Any], params: dict[str, Any], words: str | None
) -> None:
    record = rec(reference, **meta)
    if words is None:  # k above n: only meaningful with a candidate list
        record.output = Content.from_value(["a = 1", "b = 2"])
        words = "k=5 is outside 1..2"
    runner = make_runner(code_exec_tests.bind(params))
    result = asyncio.run(runner.run_async([record]))[0]
    assert result.outcome is Outcome.ERROR
    assert words in result.reason, result.reason


def test_a_record_without_output_is_skipped() -> None:
    record = Record(id="r", reference=Content.of_text("assert 1"))
    result = asyncio.run(make_runner(code_exec_tests.bind({})).run_async([record]))[0]
    assert result.outcome is Outcome.SKIPPED
    assert result.reason == "record has no output"
